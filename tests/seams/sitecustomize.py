"""A test-only seam: on the PYTHONPATH of a training that yolodoctor launches in args mode (`profile KEY=VALUE`,
fix's trials), it injects a fault into the training loop, so that the tests see how a real failure is recorded.

    YD_TEST_FAULT=oom@3        a CUDA-style out-of-memory error raised at the 4th step (steps count from 0)
    YD_TEST_FAULT=crash@3      a generic exception there
    YD_TEST_FAULT=nan@3        the loss the recorder reads is NaN from that step on (training goes on)
    YD_TEST_FAULT=oom@1:amp=False   only in trainings whose train argument amp is False (one trial's candidate)

Python imports the first sitecustomize on its path at start-up; nothing happens unless YD_TEST_FAULT is set."""

import os


def _install(text: str) -> None:
    head, _, cond = text.partition(":")
    kind, _, step = head.partition("@")
    if kind not in ("oom", "nan", "crash") or not step.isdigit():
        raise ValueError(f"YD_TEST_FAULT: {text!r} is not KIND@STEP[:KEY=VALUE]")
    at = int(step)
    key, _, value = cond.partition("=")

    from yolodoctor.profiling.recorder import Recorder

    original = Recorder.on_train_batch_end

    def on_train_batch_end(self, trainer):
        if self.steps >= at and (not key or str(getattr(trainer.args, key, None)) == value):
            if kind == "oom":
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (injected by a test)")
            if kind == "crash":
                raise RuntimeError("injected crash (a test)")
            loss, trainer.loss = getattr(trainer, "loss", None), float("nan")
            try:
                return original(self, trainer)
            finally:
                trainer.loss = loss
        return original(self, trainer)

    Recorder.on_train_batch_end = on_train_batch_end


if os.environ.get("YD_TEST_FAULT"):
    _install(os.environ["YD_TEST_FAULT"])
