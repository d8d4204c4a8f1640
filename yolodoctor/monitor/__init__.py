"""`yolodoctor monitor`: a Textual TUI over a run directory being written (or the machine alone).

model.py   records in, a Snapshot out: rolling-window facts, the LiveEngine's findings, history for the graphs
source.py  where records come from: a run directory tailed incrementally, a recorded run replayed, the machine
launch.py  a training started as `python -m yolodoctor profile ... --out DIR` in a subprocess
app.py     the Textual app (panels.py: its widgets); command.py: the CLI glue

Nothing here is imported by `import yolodoctor`; textual is imported only by app.py and panels.py.
"""
