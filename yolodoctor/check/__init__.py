"""`yolodoctor check`: probes that run before training. Each probe returns facts and findings."""
