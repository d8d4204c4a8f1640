"""What a person reads: the console report, the comparison of two runs and its HTML page."""
