"""The effective settings a training ran with, as the recorder reads them off Ultralytics' trainer after its setup
(profiling/recorder.effective_settings) and every consumer reads them back from profile.json: one typed record.

A run directory stores them as a JSON object; records written by other versions may lack keys or hold others, so the
record is read as it was written (``as_settings``) and every key is optional."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from typing_extensions import TypedDict  # pydantic reads it on Python 3.11 (record/profile.py)


class Settings(TypedDict, total=False):
    device: str  # "cuda:0", "cpu", "mps"
    data: str | None  # the data.yaml or classification folder the training opened
    task: str | None  # detect, segment, pose, obb, classify
    model: str | None
    batch: int | None  # per process, as the trainer ran it (AutoBatch and OOM halving applied)
    batch_requested: Any  # as asked (an int, or a fraction for AutoBatch)
    batch_asked: Any  # as the user's args.yaml says, where Ultralytics overwrote it before any callback
    imgsz: Any
    epochs: int | None
    workers_requested: int | None
    workers_asked: int | None
    workers: int | None  # the train loader's own num_workers
    prefetch_factor: int | None
    pin_memory: bool | None
    batches_per_epoch: int | None
    images_per_epoch: int | None
    amp_requested: Any
    amp: bool
    precision: str  # fp16, bf16, fp32
    grad_scaler: bool
    compile_requested: Any
    compile_active: bool
    channels_last: bool
    accumulate: int | None
    nbs: int | None
    optimizer: str | None
    lr0: float | None
    seed: int | None
    warmup_iterations: int | None
    close_mosaic: int | None
    mosaic: bool
    cache: str | None  # the cache the train dataset really uses: ram, disk or None
    cache_requested: str | None  # as asked: ram, disk or None
    mosaic_buffer: bool | None
    deterministic: bool | None
    deterministic_algorithms: bool
    cudnn_benchmark: bool
    cudnn_deterministic: bool
    tf32_matmul: bool
    tf32_cudnn: bool
    float32_matmul_precision: str
    val: bool | None
    torch: str
    cuda_launch_blocking: str | None
    anomaly_detection: bool


def as_settings(recorded: Mapping[str, Any] | None) -> Settings:
    """A run's settings as recorded (a profile.json object, or an event's), typed; None reads as no settings."""
    return cast(Settings, dict(recorded or {}))
