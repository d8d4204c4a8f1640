"""Plain Ultralytics training with nothing but a timestamp per step, for the profiler-overhead comparison.

    python bench/plain_train.py OUT.json STEPS KEY=VALUE...

It stops after STEPS steps and skips the validation that would follow (the same bound yolodoctor uses), and writes
the step end times (time.monotonic) and images per step as JSON.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    out, steps, *words = sys.argv[1:]
    steps = int(steps)
    from ultralytics import YOLO
    from ultralytics.cfg import smart_value

    args = {k: smart_value(v) for k, v in (w.split("=", 1) for w in words)}
    model = YOLO(args.pop("model", "yolo11n.yaml"))
    ends: list[float] = []
    images: list[int] = []

    def on_batch_end(trainer) -> None:
        ends.append(time.monotonic())
        images.append(trainer.batch_size)
        if len(ends) >= steps:
            trainer.stop = True
            trainer.validate = lambda: (trainer.metrics or {}, None)
            trainer.final_eval = lambda: None
            trainer.plot_metrics = lambda: None

    model.add_callback("on_train_batch_end", on_batch_end)
    model.train(**args)
    with open(out, "w") as fh:
        json.dump({"ends": ends, "images": images}, fh)


if __name__ == "__main__":
    main()
