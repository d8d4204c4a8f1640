"""`yolodoctor check`: probes that run before training. Each probe returns facts; the rules in rules/ judge them."""
