"""Measuring a training run: the side-process sampler (CPU, threads, workers, memory, disk, GPU), runner and tracer."""
