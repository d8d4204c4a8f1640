"""Thin wrappers over system libraries (NVML, /proc, cgroups) that return None instead of raising."""
