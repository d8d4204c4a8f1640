"""The run record, the ground every stage reads: the run directory, the profile record, the event stream, the step
summaries and the steady window. It imports nothing above it."""
