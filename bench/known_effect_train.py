"""A training with a change of known effect, for measuring fix --verify's decisions (bench/decision_errors.py):
`python known_effect_train.py DATA PROJECT`. While deterministic=True (Ultralytics' default) every step is made 25%
longer (a sleep of a quarter of the step's own time), so deterministic=False is a change of +25% images/s (a step
of 1.25 against 1: 20% less time) and nothing else; cache=False changes nothing at all.
"""
import sys
import time

from ultralytics import YOLO


def slow_down(trainer):
    if trainer.args.deterministic:
        time.sleep(0.25 * (time.perf_counter() - trainer._step_t0))


def mark(trainer):
    trainer._step_t0 = time.perf_counter()


model = YOLO("yolo11n.yaml")
model.add_callback("on_train_batch_start", mark)
model.add_callback("on_train_batch_end", slow_down)
model.train(data=sys.argv[1], imgsz=64, batch=8, epochs=3, plots=False, project=sys.argv[2], name="known",
            exist_ok=True)
