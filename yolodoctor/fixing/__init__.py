"""Fixing: findings -> a plan of train-argument, environment and torch-flag changes under the machine's limits."""
