"""The same training without yolodoctor: `python plain_train.py KEY=VALUE...` is `YOLO(model).train(**args)` and
nothing else (the arguments parsed by Ultralytics' own smart_value, as `yolo train` and yolodoctor parse them).
The observer (observer/sitecustomize.py) records it exactly as it records the profiled run."""

import sys

from ultralytics import YOLO
from ultralytics.cfg import smart_value

args = {k: smart_value(v) for k, v in (w.split("=", 1) for w in sys.argv[1:])}
YOLO(args.pop("model")).train(**args)
