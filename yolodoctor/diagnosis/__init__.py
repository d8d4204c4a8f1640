"""Diagnosis: facts computed from records (profiles, check probes) and rules, as data, that decide on them.

Arrows point down only: nothing here imports torch or ultralytics.
"""
