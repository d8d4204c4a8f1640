"""A read-only observer for the equivalence test, loaded at interpreter start when this folder is on PYTHONPATH and
YD_OBSERVE names a folder. It appends one callback set to Ultralytics' default callbacks (so every trainer gets it,
under yolodoctor or not) that records each step's loss (``trainer.loss``, what yolodoctor's recorder reads) and, when
training ends, the fp32 state of the model, its EMA and the optimizer (Ultralytics' checkpoints hold fp16 copies).
It reads and never writes training state; both runs of the comparison carry it alike."""

import importlib.abc
import importlib.util
import json
import os
import sys

OUT = os.environ.get("YD_OBSERVE")
TARGET = "ultralytics.utils.callbacks.base"
losses = []


def on_train_batch_end(trainer):
    losses.append(float(trainer.loss.item()))


def on_train_end(trainer):
    import torch

    with open(os.path.join(OUT, "losses.json"), "w") as fh:
        json.dump({"losses": losses}, fh)
    torch.save({"model": trainer.model.state_dict(), "ema": trainer.ema.ema.state_dict(),
                "optimizer": trainer.optimizer.state_dict()}, os.path.join(OUT, "weights.pt"))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            module.default_callbacks["on_train_batch_end"].append(on_train_batch_end)
            module.default_callbacks["on_train_end"].append(on_train_end)

        spec.loader.exec_module = exec_module
        return spec


if OUT:
    sys.meta_path.insert(0, _Finder())
