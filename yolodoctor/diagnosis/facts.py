"""Facts: numbers and flags computed from a run record (and from `check`'s probes), named for the rules.

Every fact a rule may use is listed in CATALOGUE with its type and meaning; ``rules`` validates conditions against
it. A fact that could not be measured is absent (not None), so a rule that needs it stays silent. Times are
seconds, shares are 0..1, CPU is percent of one core, memory is bytes.

Which signal a fact rests on is part of its name: ``trace.*`` comes from the torch.profiler window (CUPTI distorts
launch costs), ``gpu.*`` from NVML (device-wide, averaged over up to a second), ``cpu.*`` from /proc, ``run.*`` from
the step callbacks (host clock, CUDA events).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from yolodoctor.numbers import is_finite as _num
from yolodoctor.record import stretches
from yolodoctor.record.events import read_events
from yolodoctor.record.profile import Profile, run_file
from yolodoctor.record.settings import Settings, as_settings

# name: (type, meaning)
CATALOGUE: dict[str, tuple[str, str]] = {
    "run.device": ("string", "cuda, cpu or mps: where the training ran"),
    "run.complete": ("bool", "the profiled training ended normally"),
    "run.images_per_s": ("double", "steady-state images/s over the window (host clock, step ends)"),
    "run.window_valid": ("bool", "the steady window can be trusted: the loader's queue had settled (its recorded "
                                 "occupancy no longer falling), the rate steady across it, at least 10 steps"),
    "run.window_steps": ("double", "steps in the steady window"),
    "run.window_why": ("string", "why the window could not be trusted, and how many more steps it needed"),
    "run.step_s": ("double", "median step time (data wait + compute) in the window"),
    "run.compute_s": ("double", "median time from on_train_batch_start to on_train_batch_end"),
    "run.wait_s": ("double", "median data wait: previous batch end to next batch start"),
    "run.data_wait_share": ("double", "share of step time spent waiting for the next batch"),
    "run.gpu_step_ms": ("double", "median elapsed time on the GPU stream between the step's CUDA events (idle gaps "
                                  "included: it is not kernel-busy time, see trace.kernel_busy_ms)"),
    "run.batch": ("double", "batch size of the steady window's steps (after any out-of-memory halving); under DDP the "
                            "total over the ranks"),
    "run.ranks": ("double", "processes that trained: the DDP ranks, or 1 (workers, the loader and the cores are per "
                            "rank)"),
    "run.batch_started": ("double", "batch size the training started with (AutoBatch resolved, before any halving)"),
    "run.images_per_epoch": ("double", "training images per epoch"),
    "run.epochs": ("double", "epochs the run was configured for"),
    "run.nonfinite_losses": ("double", "steps whose loss was NaN or infinite"),
    "run.nan_recoveries": ("double", "times Ultralytics reloaded a checkpoint after a NaN"),
    "run.oom_retries": ("double", "times Ultralytics halved the batch after an out-of-memory"),
    "run.epoch_s": ("double", "estimated seconds per training epoch at the steady rate"),
    "run.val_share": ("double", "validation share of epoch time (whole runs only)"),
    "run.val_s": ("double", "median seconds per epoch from the epoch's end to the end of its validation and saving "
                            "(whole epochs only)"),
    "run.pause_s": ("double", "seconds between stretches of training steps, over the train() call: validation, the "
                              "epochs' ends, checkpoints (never part of a steady figure)"),
    "run.pause_share": ("double", "share of the steps' wall time (first step to last) spent in those pauses"),
    "run.pauses": ("double", "pauses between stretches of training steps"),
    "run.training_s": ("double", "seconds of the train() call's training steps, pauses left out"),
    "run.wall_s": ("double", "wall seconds of a whole run, its process's start to its end (absent for a bounded "
                             "run, which is not the training's whole)"),
    "run.epoch_wall_s": ("double", "estimated wall seconds per epoch: run.epoch_s plus the median pause at an epoch's "
                                   "end (validation and saving included)"),
    "ranks.count": ("double", "DDP ranks that trained (absent for a single process)"),
    "ranks.straggler": ("double", "the rank that waited longest for its data (median per step)"),
    "ranks.straggler_wait_ms": ("double", "that rank's median data wait per step, ms"),
    "ranks.others_wait_ms": ("double", "the other ranks' median data wait per step (median over them), ms"),
    "ranks.wait_excess_share": ("double", "the straggler's data wait beyond the others', as a share of the step: what "
                                          "every rank loses waiting for it at the gradient all-reduce"),
    "ranks.step_ms": ("double", "median step time over the ranks, ms (the same for all: they move in step)"),
    "ranks.straggler_workers": ("double", "the straggler's train loader workers (median over the window)"),
    "ranks.others_workers": ("double", "the other ranks' train loader workers (median over them)"),
    "ranks.batch_per_rank": ("double", "images per step on each rank (batch over ranks)"),
    "ranks.workers_total": ("double", "train loader workers of all ranks together"),
    "settings.batch_requested": ("double", "batch the user asked for"),
    "settings.workers": ("double", "train-loader workers that ran"),
    "settings.workers_requested": ("double", "workers the user asked for"),
    "settings.amp": ("bool", "mixed precision active"),
    "settings.precision": ("string", "fp16, bf16 or fp32"),
    "settings.compile_requested": ("string", "false, default, reduce-overhead, max-autotune-no-cudagraphs"),
    "settings.compile_active": ("bool", "the model that trained was a torch.compile module"),
    "settings.channels_last": ("bool", "the model trained in NHWC"),
    "settings.deterministic": ("bool", "deterministic=True"),
    "settings.cudnn_benchmark": ("bool", "torch.backends.cudnn.benchmark"),
    "settings.tf32_matmul": ("bool", "torch.backends.cuda.matmul.allow_tf32"),
    "settings.tf32_cudnn": ("bool", "torch.backends.cudnn.allow_tf32"),
    "settings.nbs": ("double", "nominal batch size"),
    "settings.accumulate": ("double", "micro-batches per optimizer step"),
    "settings.cache": ("string", "none, ram or disk"),
    "settings.imgsz": ("double", "training image size"),
    "settings.mosaic": ("bool", "mosaic augmentation on"),
    "settings.amp_requested": ("string", "amp as asked: true, false, fp16 or bf16"),
    "settings.workers_asked": ("double", "workers in the run's args.yaml (before Ultralytics set 0 on the CPU)"),
    "settings.workers_why": ("string", "why the train loader ran fewer workers than asked"),
    "settings.cache_requested": ("string", "cache as asked: ram, disk or none"),
    "settings.task": ("string", "the training's Ultralytics task: detect, segment, pose, obb or classify"),
    "settings.mosaic_buffer": ("bool", "mosaic picks its other images from the recent-images buffer (off with "
                                       "cache='ram')"),
    "settings.cuda_launch_blocking": ("bool", "CUDA_LAUNCH_BLOCKING=1 in the training's environment"),
    "settings.anomaly_detection": ("bool", "torch.autograd anomaly detection was on"),
    "ul.amp_check": ("string", "Ultralytics' AMP check: passed, skipped, failed, or not-run"),
    "ul.amp_unchecked": ("string", "why AMP ran without Ultralytics' check (bf16, offline, the CPU)"),
    "ul.cache_refused": ("bool", "cache='ram' asked for, and Ultralytics' RAM guard trained uncached"),
    "ul.cache_required_gb": ("double", "RAM the guard wanted for the cache (twice the images), GB"),
    "ul.cache_available_gb": ("double", "RAM available when the guard looked, GB"),
    "ul.files_slow": ("bool", "Ultralytics' file-speed check warned of slow image access"),
    "ul.files_read": ("string", "the file-speed check's measured ping, read speed and file size"),
    "ul.autobatch": ("string", "AutoBatch's outcome: chosen or default"),
    "ul.autobatch_why": ("string", "why AutoBatch fell back to the default batch"),
    "ul.autobatch_batch": ("double", "the batch AutoBatch chose or fell back to"),
    "ul.autobatch_target": ("double", "the share of GPU memory AutoBatch aimed at"),
    "ul.autobatch_total_gb": ("double", "GPU memory AutoBatch saw, GB"),
    "ul.autobatch_miss": ("double", "share of GPU memory the training reserved at most, minus AutoBatch's target"),
    "ul.assigner_per_image": ("bool", "the task-aligned assigner ran out of memory and assigns image by image"),
    "host.python_ms": ("double", "the host's own speed: a fixed Python loop's ms, mean of just before and after the run"
                       " (profiling/hostprobe.py; a shared machine moves)"),
    "loader.capacity_images_per_s": ("double", "the train loader alone, no model: images/s it sustains"),
    "loader.capacity_valid": ("bool", "the loader timing ran long enough"),
    "loader.headroom": ("double", "loader capacity over the training's images/s (below ~1.2: the loader limits)"),
    "loader.prefetch_depth": ("double", "batches the loader keeps in flight (workers x prefetch_factor)"),
    "cpu.usable": ("double", "cores this process may use (affinity, cgroup quota)"),
    "cpu.count": ("double", "os.cpu_count() (what Ultralytics clamps workers with)"),
    "cpu.train_thread_pct": ("double", "median CPU of the training thread, % of one core (/proc, no profiler)"),
    "cpu.process_pct": ("double", "median CPU of the training process, % of one core"),
    "cpu.train_workers_pct": ("double", "median CPU of all train-loader workers together, % of one core"),
    "cpu.per_worker_pct": ("double", "median CPU per train-loader worker, % of one core"),
    "cpu.total_pct": ("double", "median machine-wide CPU, % of all cores"),
    "cpu.saturated_share": ("double", "share of samples with machine-wide CPU above 90%"),
    "cpu.iowait_pct": ("double", "median iowait, % of all cores"),
    "disk.read_mb_s": ("double", "median disk read MB/s (machine-wide)"),
    "mem.available_min": ("double", "lowest available RAM seen"),
    "mem.shm_free_min": ("double", "lowest free /dev/shm seen"),
    "gpu.name": ("string", "GPU model (NVML)"),
    "gpu.nvlink_links": ("double", "active NVLink links of the training's GPU (NVML); 0: it reaches other GPUs over "
                                   "PCIe only"),
    "gpu.cc_major": ("double", "compute capability, major"),
    "gpu.util_mean": ("double", "mean NVML utilisation % in the window (device-wide, coarse)"),
    "gpu.mem_total": ("double", "GPU memory, bytes"),
    "gpu.mem_used_max": ("double", "peak GPU memory used (NVML, all processes)"),
    "gpu.mem_fraction_peak": ("double", "peak GPU memory used / total"),
    "gpu.mem_per_image": ("double", "peak training memory (torch reserved) per image of the batch, bytes"),
    "gpu.torch_reserved_max": ("double", "peak bytes the torch allocator reserved during a training step, over every "
                                         "step but each epoch's first (whose peak also spans the setup before it)"),
    "gpu.torch_allocated_max": ("double", "peak bytes torch allocated during a training step, over the same steps"),
    "gpu.reserved_over_allocated": ("double", "allocator reserved / allocated at the peak (fragmentation)"),
    "gpu.throttled_share": ("double", "share of samples with a throttle reason other than idle"),
    "trace.cuda": ("bool", "the trace recorded CUDA kernels"),
    "trace.kernels_per_step": ("double", "CUDA kernels per step (trace)"),
    "trace.kernel_busy_ms": ("double", "GPU busy time per step: union of kernel intervals (trace)"),
    "trace.gpu_busy_share": ("double", "kernel-busy time over traced wall time"),
    "trace.short_kernel_share": ("double", "share of kernels shorter than 10 us"),
    "trace.launches_per_step": ("double", "kernel launch calls per step"),
    "trace.launch_cpu_ms": ("double", "CPU ms per step inside launch calls (inflated by CUPTI)"),
    "trace.tensor_core_share": ("double", "share of kernel time in tensor-core kernels (by kernel name)"),
    "trace.h2d_pageable_per_step": ("double", "host-to-device copies from pageable memory per step"),
    "trace.nccl_ms": ("double", "GPU time per step in NCCL kernels (DDP's collectives) that no other kernel overlaps"),
    "trace.nccl_share": ("double", "that exposed NCCL time's share of the GPU's busy time (trace)"),
    "trace.syncs_per_step": ("double", "device/stream synchronisations and .item() calls per step"),
    "check.decode_ms": ("double", "check: median decode+resize ms per image on one core"),
    "check.image_formats_png_share": ("double", "check: share of PNG images"),
    "check.cache_ram_fits": ("bool", "check: cache='ram' fits in available RAM (Ultralytics' estimate)"),
    "check.cache_fill_s": ("double", "check: seconds cache='ram' takes to fill before training (each train and val "
                                     "image read, decoded and resized once on Ultralytics' caching threads); a lower "
                                     "bound, as the threads contend"),
    # how the training ended (reported first: diagnosis/diagnose.py Diagnosis.ending)
    "end.status": ("string", "the profile's status: complete, incomplete or running"),
    "end.reason": ("string", "why the training stopped: out-of-memory ..., nan ..., crashed ..., bounded ..."),
    "end.exit_code": ("double", "the training process's exit code"),
    "end.steps": ("double", "training steps recorded before the end"),
    "end.batch": ("double", "the batch the run was started with"),
}

# What `yolodoctor check` measures before a training (its probes in yolodoctor/check/), under the names check reports
# them with (`check --json`). Train arguments are Ultralytics' effective values (defaults filled in), as given.
CATALOGUE.update({
    "args.given": ("list", "check: the train arguments the user gave (names), as opposed to Ultralytics' defaults"),
    "args.amp": ("any", "check: amp as Ultralytics gets it (True, False, 'fp16', 'bf16' or 'fp32')"),
    "args.batch": ("double", "check: batch as given (-1 or a fraction below 1: AutoBatch sizes it)"),
    "args.nbs": ("double", "check: nominal batch size (64 where 0 is given, as Ultralytics does)"),
    "args.cache": ("any", "check: cache as given (True, 'ram', 'disk' or False)"),
    "args.compile": ("any", "check: compile as given (False, True or a torch.compile mode)"),
    "args.deterministic": ("any", "check: deterministic as given"),
    "args.device": ("any", "check: device as given (None: Ultralytics picks)"),
    "args.model": ("string", "check: model as given"),
    "args.plots": ("any", "check: plots as given"),
    "config.cudnn_benchmark": ("bool", "check: the training script sets torch.backends.cudnn.benchmark (--torch-flag)"),
    "config.accumulate": ("double", "check: micro-batches per optimizer step Ultralytics will use (nbs / batch)"),
    "check.data_given": ("bool", "check: a data= argument was given (else no dataset was examined)"),
    "env.device_kind": ("string", "check: the device the training would use: cuda, cpu, mps or other"),
    "env.device_auto": ("bool", "check: no device was asked for: Ultralytics picks cuda:0 or the CPU"),
    "env.device_gpus": ("double", "check: CUDA devices the training would use (more than one: DDP)"),
    "env.device_missing": ("string", "check: why device= names a CUDA device this machine does not have"),
    "env.cuda_available": ("bool", "check: torch can use CUDA"),
    "env.torch": ("string", "check: the torch version"),
    "env.torch_cuda_build": ("string", "check: the CUDA version torch was built for (null: a CPU build)"),
    "env.torch_devices": ("list", "check: the CUDA devices torch sees (index, name, uuid, compute capability, memory)"),
    "env.nvml": ("bool", "check: NVML answers (GPU telemetry possible)"),
    "env.nvml_reason": ("string", "check: why NVML is unavailable"),
    "env.nvml_gpus": ("list", "check: the GPUs NVML sees, after CUDA_VISIBLE_DEVICES"),
    "env.nvml_gpu_names": ("list", "check: their names"),
    "env.device_map": ("list", "check: torch devices paired with NVML GPUs by UUID"),
    "env.device_mismatch": ("string", "check: how torch and NVML disagree on the visible GPUs"),
    "env.driver": ("string", "check: the NVIDIA driver version"),
    "env.cuda_driver": ("string", "check: the CUDA version the driver supports"),
    "env.online": ("bool", "check: DNS answered (null: no answer in time)"),
    "env.yolo_offline": ("bool", "check: YOLO_OFFLINE is set (Ultralytics downloads nothing)"),
    "env.amp_weights_present": ("bool", "check: the weights Ultralytics' AMP check loads are on this machine"),
    "env.amp_weights_path": ("string", "check: where Ultralytics looks for them"),
    "env.font_present": ("bool", "check: the font Ultralytics' plots need is on this machine"),
    "env.cloudpickle": ("bool", "check: cloudpickle is installed (DDP needs it)"),
    "env.weights_missing": ("bool", "check: model= names a weights file that is neither here nor in Ultralytics' "
                                    "weights_dir"),
    "env.weights_release_asset": ("bool", "check: that file is one of Ultralytics' release assets (downloadable)"),
    "gpu.cc_minor": ("double", "compute capability, minor"),
    "gpu.compute_capability": ("list", "check: compute capability [major, minor] of the GPU the training would use"),
    "cpu.affinity": ("double", "check: CPUs in this process's affinity mask"),
    "cpu.quota": ("double", "check: CPUs the cgroup quota allows (null: no quota)"),
    "ram.available": ("double", "check: available RAM, bytes"),
    "shm.free": ("double", "check: free /dev/shm, bytes"),
    "loader.workers_requested": ("double", "check: workers asked for"),
    "loader.workers_effective": ("double", "check: train-loader workers Ultralytics will start (its clamp: 0 on the "
                                           "CPU, os.cpu_count() per GPU, batches per epoch)"),
    "loader.batch": ("double", "check: the batch the loader collates (null: AutoBatch decides)"),
    "loader.imgsz": ("double", "check: training image size"),
    "loader.prefetch_factor": ("double", "check: batches each worker prefetches (Ultralytics' train loader)"),
    "loader.prefetch_batches": ("double", "check: batches in flight (workers x prefetch factor)"),
    "loader.prefetch_bytes": ("double", "check: bytes of those batches (uint8, imgsz square)"),
    "cache.ram_bytes": ("double", "check: the RAM cache's size: the train images resized to imgsz"),
    "cache.ram_required": ("double", "check: the RAM Ultralytics' guard requires for it (twice the size)"),
    "cache.ram_fits": ("bool", "check: that much RAM is available (Ultralytics' guard would keep the cache)"),
    "dataset.yaml": ("string", "check: the data.yaml examined"),
    "dataset.task": ("string", "check: detect, segment, pose, obb or classify"),
    "dataset.classes": ("double", "check: classes in names (null: names unusable)"),
    "dataset.images": ("double", "check: images over all splits (each counted once)"),
    "dataset.images.train": ("double", "check: train images"),
    "dataset.image_formats": ("map", "check: images per file extension"),
    "dataset.image_size_median": ("list", "check: median image [width, height] in pixels"),
    "dataset.download": ("bool", "check: data.yaml has a download: field (never run by check)"),
    "dataset.download_text": ("string", "check: that field, shortened"),
    "dataset.yaml_problems": ("list", "check: what is wrong with data.yaml, one item per kind of problem"),
    "dataset.defects": ("list", "check: the per-file verdicts Ultralytics' loader would reach, one item per kind "
                                "found"),
    "io.network_fs": ("bool", "check: the dataset is on a network or FUSE file system"),
    "io.fstype": ("string", "check: the file system type of the dataset's mount"),
    "io.mountpoint": ("string", "check: its mount point"),
    "io.mount": ("map", "check: the mount (device, mountpoint, fstype)"),
    "io.path": ("string", "check: the dataset root the mount was looked up for"),
    "io.cache_state": ("string", "check: cold, partly-cold or warm: whether the sample was read from the disk"),
    "io.sample_files": ("double", "check: images read and decoded"),
    "io.read_mb_s": ("double", "check: read speed of the sample, MB/s"),
    "io.read_ms_per_image": ("double", "check: ms to read one image"),
    "io.decode_ms_median": ("double", "check: median ms to decode one image (OpenCV, one core)"),
    "io.resize_ms_median": ("double", "check: median ms to resize it to imgsz"),
    "io.workers": ("double", "check: loader processes the ceilings assume (the effective workers, at least 1)"),
    "io.read_ceiling_images_per_s": ("double", "check: images/s that many processes can read at the sample's speed"),
    "io.decode_ceiling_images_per_s": ("double", "check: images/s they can decode and resize"),
})

# What `yolodoctor check` reads of a classification folder (check/classify.py): its layout as Ultralytics'
# check_cls_dataset and ClassificationDataset read it, and what a training would write into it.
CATALOGUE.update({
    "dataset.images.val": ("double", "check: validation images (a classification folder: those in val/, validation/ "
                                     "or valid/, or the 20% a split copy would put there)"),
    "dataset.images.test": ("double", "check: test images"),
    "dataset.cls.folder": ("string", "check: the classification folder examined"),
    "dataset.cls.has_train": ("bool", "check: it has a train/ folder (else Ultralytics copies its images into a new "
                                      "FOLDER_split with train/ and val/)"),
    "dataset.cls.split_folder": ("string", "check: that FOLDER_split folder"),
    "dataset.cls.split_writable": ("bool", "check: the folder that would hold FOLDER_split is writable"),
    "dataset.cls.val_split": ("string", "check: the folder the training validates on: val, validation, valid, test "
                                        "or none"),
    "dataset.cls.val_fallback": ("bool", "check: that is test/, which Ultralytics takes where val/, validation/ and "
                                         "valid/ are missing"),
    "dataset.cls.names": ("list", "check: the class names: every folder in train/, sorted, empty ones included"),
    "dataset.cls.train_classes": ("string", "check: those names, written out (the first ten)"),
    "dataset.cls.val_classes": ("string", "check: the class folders of the validation folder, written out"),
    "dataset.cls.train_per_class": ("map", "check: train images per class"),
    "dataset.cls.empty_classes": ("string", "check: train class folders with no image, written out"),
    "dataset.cls.empty_class_count": ("double", "check: how many (each still counts in nc)"),
    "dataset.cls.val_unknown": ("string", "check: validation class folders with images that train/ lacks"),
    "dataset.cls.val_unknown_count": ("double", "check: how many (Ultralytics skips their images)"),
    "dataset.cls.val_unknown_images": ("double", "check: the images in them"),
    "dataset.cls.val_disjoint": ("bool", "check: no validation class folder is a train class (Ultralytics numbers "
                                         "them in their own order: labels meaningless)"),
    "dataset.cls.val_images_kept": ("double", "check: validation images Ultralytics keeps (in a train class)"),
    "dataset.cls.val_missing": ("string", "check: train classes without a validation image, written out"),
    "dataset.cls.val_missing_count": ("double", "check: how many"),
    "dataset.cls.ignored_files": ("double", "check: files in the split folders Ultralytics does not read (another "
                                            "extension, or outside the class folders)"),
    "dataset.cls.ignored_examples": ("list", "check: the first of them (file, reason)"),
    "dataset.cls.cache_files": ("string", "check: the .cache files Ultralytics writes its image scan to (beside the "
                                          "split folders)"),
    "dataset.cls.cache_writable": ("bool", "check: their folder is writable (else Ultralytics rescans at each start)"),
    "dataset.cls.decoded_bytes_train": ("double", "check: bytes of the train images decoded at full resolution "
                                                  "(height x width x 3)"),
    "dataset.cls.decoded_bytes_val": ("double", "check: the same for the validation images Ultralytics keeps"),
    "dataset.cls.npy_files": ("double", "check: .npy files cache='disk' writes (one beside each train and validation "
                                        "image)"),
    "dataset.cls.npy_bytes": ("double", "check: bytes they take"),
    "dataset.cls.npy_unwritable": ("double", "check: image folders that are not writable (Ultralytics then turns the "
                                             "disk cache off)"),
    "dataset.cls.npy_unwritable_dirs": ("string", "check: those folders, written out"),
    "cache.ram_peak": ("double", "check: classification's cache='ram' at its peak, while a split's decoded images are "
                                 "copied into one buffer (Ultralytics has no RAM check for it)"),
})

# The items of list facts rules can evaluate one by one (`each`): field -> (type, meaning).
ITEMS: dict[str, dict[str, tuple[str, str]]] = {
    "dataset.defects": {
        "kind": ("string", "the verdict: no_label, orphan_label, empty_label, img_missing, img_empty, img_corrupt, "
                           "jpeg_truncated, img_small, split_overlap, lbl_columns, lbl_parse, lbl_class, lbl_coords, "
                           "lbl_zero or lbl_dup"),
        "files": ("double", "files with this verdict"),
        "rows": ("double", "label rows with it (the lbl_* verdicts)"),
        "examples": ("list", "the first files with it (and rows: file, line, row, reason)"),
        "missing_share_max": ("double", "no_label: the largest share of one split's images without a label file"),
        "by_split": ("map", "no_label: images without a label file, per split"),
        "per_split": ("string", "no_label: the same against each split's images, e.g. 'train 3/100, val 1/20'"),
    },
    "dataset.yaml_problems": {
        "kind": ("string", "unparseable, missing-key, invalid-value, names-mismatch, path-missing, no-images, "
                           "kpt-shape or cwd-path"),
        "file": ("string", "the data.yaml's file name"),
        "text": ("string", "each problem of this kind in a sentence (the first five, then how many more)"),
        "count": ("double", "problems of this kind"),
        "detail": ("map", "the problem's particulars (file, line, key, split, path ...), or {problems: [...]} for "
                          "several"),
        "test_only": ("bool", "every problem of this kind concerns the test split, which training does not need"),
    },
}


def _median(values: Iterable[Any]) -> float | None:
    vals = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(vals) if vals else None


def _d(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _steps(events: list[dict]) -> list[dict]:
    """Step records whose timing and index fields are numbers; others (damaged, or written elsewhere) are left out."""
    return [e for e in events if e.get("type") == "step" and _num(e.get("t0")) and _num(e.get("t1"))
            and all(_num(e[k]) for k in ("n", "step") if e.get(k) is not None)]


def _put(facts: dict[str, Any], key: str, value: Any) -> None:
    """Set a fact when the value has the type the catalogue declares for it (a finite number for a double): a record
    written elsewhere, or damaged, leaves the fact missing instead of feeding the rules a string or a NaN."""
    kind = CATALOGUE.get(key, (None,))[0]
    if isinstance(value, bool):
        if kind in (None, "bool"):
            facts[key] = value
    elif isinstance(value, str):
        if kind in (None, "string"):
            facts[key] = value
    elif isinstance(value, (int, float)) and kind in (None, "double"):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond float range
            return
        if math.isfinite(number):
            facts[key] = number


def from_profile(profile: Profile, run_dir: str | Path | None = None, *, events: list[dict] | None = None,
                 samples: list[dict] | None = None) -> dict[str, Any]:
    """Facts of a profile (a yolodoctor.record.profile.Profile); ``run_dir`` (or the streams given) adds what the event
    and sample streams say."""
    f: dict[str, Any] = {}
    s, st = profile.summary or {}, profile.settings or {}
    device = str(st.get("device", "")).split(":")[0] or None
    _put(f, "run.device", device)
    _put(f, "run.complete", profile.status == "complete")
    for key, src in (("run.images_per_s", "images_per_s"), ("run.step_s", "step_s_median"),
                     ("run.compute_s", "compute_s_median"), ("run.wait_s", "wait_s_median"),
                     ("run.data_wait_share", "data_wait_share"), ("run.gpu_step_ms", "gpu_ms_median")):
        _put(f, key, s.get(src))
    win = _d(s.get("window"))
    _put(f, "run.window_valid", win.get("valid"))
    _put(f, "run.window_steps", win.get("steps"))
    if win.get("valid") is False:
        _put(f, "run.window_why", win.get("why"))
    _put(f, "run.batch", st.get("batch"))
    f["run.ranks"] = float(len(profile.ranks or []) or 1)
    _put(f, "run.batch_started", st.get("batch"))
    _put(f, "run.images_per_epoch", st.get("images_per_epoch"))
    _put(f, "run.epochs", st.get("epochs"))
    if f.get("run.images_per_s") and f.get("run.images_per_epoch"):
        f["run.epoch_s"] = f["run.images_per_epoch"] / f["run.images_per_s"]
    _pause_facts(f, s)
    for key in ("batch_requested", "workers", "workers_requested", "amp", "precision", "compile_active",
                "channels_last", "deterministic", "cudnn_benchmark", "tf32_matmul", "tf32_cudnn", "nbs",
                "accumulate", "imgsz", "mosaic"):
        _put(f, f"settings.{key}", st.get(key))
    if "compile_requested" in st:
        c = st["compile_requested"]
        f["settings.compile_requested"] = ("default" if c is True else "false" if c in (False, None) else str(c))
    if "cache" in st:
        f["settings.cache"] = str(st["cache"] or "none")
    probes = [_d(_d(profile.host_probe).get(k)).get("python_ms") for k in ("before", "after")]
    hp = [x for x in probes if _num(x) and x > 0]
    if hp:
        f["host.python_ms"] = sum(hp) / len(hp)
    cap = profile.loader_capacity or {}
    _put(f, "loader.capacity_images_per_s", cap.get("images_per_s"))
    _put(f, "loader.capacity_valid", cap.get("valid"))
    if f.get("loader.capacity_images_per_s") and f.get("run.images_per_s"):  # one rank's loader, one rank's share
        f["loader.headroom"] = f["loader.capacity_images_per_s"] / (f["run.images_per_s"] / f["run.ranks"])
    _put(f, "loader.prefetch_depth", win.get("prefetch_depth"))
    _trace_facts(f, _d(_d(profile.trace).get("summary")))
    _rank_facts(f, profile.ranks, st)
    if run_dir is not None and events is None:
        events = list(read_events(run_file(run_dir, profile, "events", "events.jsonl")))
    if run_dir is not None and samples is None:
        samples = list(read_events(run_file(run_dir, profile, "samples", "samples.jsonl")))
    _settings_facts(f, st)
    if events is not None:
        _event_facts(f, events)
        _log_facts(f, events, st)
    if samples is not None:
        _sample_facts(f, samples, _window_spans(events or [], win))
    return f


def _pause_facts(f: dict[str, Any], s: dict[str, Any]) -> None:
    """Where the steps' wall time went besides training: the pauses between stretches (record/stretches.py)."""
    p = _d(s.get("pauses"))
    _put(f, "run.training_s", s.get("training_s"))
    if s.get("bounded") is False:
        _put(f, "run.wall_s", _d(s.get("phases")).get("total"))
    if not _num(p.get("count")):
        return
    _put(f, "run.pauses", p["count"])
    _put(f, "run.pause_s", p.get("seconds"))
    train = s.get("training_s")
    if _num(p.get("seconds")) and _num(train) and p["seconds"] + train > 0:
        f["run.pause_share"] = p["seconds"] / (p["seconds"] + train)
    ends = p.get("epoch_end_s_median")
    if _num(f.get("run.epoch_s")):
        f["run.epoch_wall_s"] = f["run.epoch_s"] + (ends if _num(ends) else 0.0)


def _rank_facts(f: dict[str, Any], ranks: list[dict] | None, st: Settings) -> None:
    """A DDP training's ranks (record/ranks.py): who waits longest for data, and by how much beyond the others."""
    every = [r for r in ranks or [] if isinstance(r, dict)]
    rows = [r for r in every if _num(r.get("wait_s_median"))]
    if len(every) >= 2:
        f["ranks.count"] = float(len(every))
        if _num(batch := st.get("batch")):
            f["ranks.batch_per_rank"] = batch / len(every)
    if len(rows) < 2:
        return
    slow = max(rows, key=lambda r: r["wait_s_median"])
    others = [r for r in rows if r is not slow]
    others_wait = statistics.median(r["wait_s_median"] for r in others)
    f["ranks.straggler"] = float(slow.get("rank", rows.index(slow)))
    f["ranks.straggler_wait_ms"] = 1000 * slow["wait_s_median"]
    f["ranks.others_wait_ms"] = 1000 * others_wait
    step = _median(r.get("step_s_median") for r in rows)
    if step:
        f["ranks.step_ms"] = 1000 * step
        f["ranks.wait_excess_share"] = max(0.0, slow["wait_s_median"] - others_wait) / step
    _put(f, "ranks.straggler_workers", slow.get("workers"))
    _put(f, "ranks.others_workers", _median(r.get("workers") for r in others))
    workers = [w for w in (r.get("workers") for r in every) if _num(w)]
    if len(workers) == len(every):
        f["ranks.workers_total"] = float(sum(workers))


def live(run_dir: str | Path, window_s: float = 30.0, now: float | None = None) -> dict[str, Any]:
    """Facts over the last ``window_s`` seconds of a run directory that is still being written (the monitor's
    rolling window; pair with engine.LiveEngine for hysteresis)."""
    from yolodoctor.record.profile import EVENTS, SAMPLES
    from yolodoctor.record.summary import summarise_train

    run = Path(run_dir)
    events = list(read_events(run / EVENTS))
    samples = list(read_events(run / SAMPLES))
    settings = as_settings(next((e.get("settings") for e in reversed(events) if e.get("type") == "settings"), None))
    steps = [e for e in events if e.get("type") == "step"]
    if not steps:
        return {}
    end = now if now is not None else steps[-1]["t1"]
    recent = [s for s in steps if s["t1"] >= end - window_s and s.get("train_index") == steps[-1].get("train_index")]
    summary = summarise_train(recent, settings, whole=True)
    cap = next(({k: v for k, v in e.items() if k not in ("type", "t")} for e in reversed(events)
                if e.get("type") == "loader_capacity"), None)
    trace = next(({k: v for k, v in e.items() if k not in ("type", "t")} for e in reversed(events)
                  if e.get("type") == "trace"), None)
    from yolodoctor.record import ranks

    rows = ranks.summarise(run, samples, read={0: events}, since=end - window_s)  # DDP: every rank, same window
    if rows:
        ranks.fold(summary, rows)
    prof = Profile(settings=settings, summary=summary, loader_capacity=cap, trace=trace,
                   status="running" if not any(e.get("type") == "run_end" for e in events) else "complete",
                   ranks=rows)
    lo = recent[0]["t0"] if recent else end - window_s
    return from_profile(prof, events=events, samples=[s for s in samples if s.get("t", 0) >= lo - 1.0
                                                       or s.get("type") == "sampler_start"])


def _trace_facts(f: dict[str, Any], t: dict[str, Any]) -> None:
    if not t:
        return
    _put(f, "trace.cuda", t.get("cuda"))
    for key, src in (("kernels_per_step", "kernels_per_step"), ("kernel_busy_ms", "kernel_busy_ms_per_step"),
                     ("gpu_busy_share", "gpu_busy_share"), ("short_kernel_share", "short_kernel_share"),
                     ("launches_per_step", "launches_per_step"), ("launch_cpu_ms", "launch_cpu_ms_per_step"),
                     ("tensor_core_share", "tensor_core_share"), ("nccl_ms", "nccl_ms_per_step"),
                     ("nccl_share", "nccl_share")):
        _put(f, f"trace.{key}", t.get(src))
    copies = _d(t.get("memcpy_per_step"))
    if t.get("cuda") is True:
        _put(f, "trace.h2d_pageable_per_step", copies.get("h2d_pageable", 0.0))
    syncs = t.get("sync_calls_per_step")
    if isinstance(syncs, dict):
        _put(f, "trace.syncs_per_step", sum(v for k, v in syncs.items() if k != "aten::item" and _num(v)))


def _settings_facts(f: dict[str, Any], st: Settings) -> None:
    """What Ultralytics changed or decided silently, from the effective settings."""
    amp = st.get("amp_requested")
    if amp is not None:
        _put(f, "settings.amp_requested", str(amp).lower())
    asked, ran = st.get("workers_asked"), st.get("workers")
    if _num(asked):
        _put(f, "settings.workers_asked", asked)
        if _num(ran) and ran < asked:
            cpu = str(st.get("device", "")).startswith("cpu")
            _put(f, "settings.workers_why", "on the CPU Ultralytics loads in the training process (workers=0)"
                 if cpu and ran == 0 else
                 "on the CPU Ultralytics sets workers=0; the program set another number after it" if cpu else
                 "Ultralytics caps workers at os.cpu_count() per visible GPU and at the batches per epoch")
    cache = st.get("cache_requested")
    if "cache_requested" in st:
        _put(f, "settings.cache_requested", cache or "none")
    for key in ("mosaic_buffer", "anomaly_detection", "task"):
        _put(f, f"settings.{key}", st.get(key))
    if "cuda_launch_blocking" in st:
        _put(f, "settings.cuda_launch_blocking", str(st.get("cuda_launch_blocking") or "0").strip() == "1")


def _log_facts(f: dict[str, Any], events: list[dict], st: Settings) -> None:
    """What Ultralytics only logged (profiling/ultralytics_log.py records it)."""
    logs = [e for e in events if e.get("type") == "ultralytics_log" and isinstance(e.get("kind"), str)]
    kinds = {e["kind"]: e for e in logs}
    figs = {k: [str(x) for x in (e.get("figures") or [])] for k, e in kinds.items()}
    asked, device = str(st.get("amp_requested", "")).lower(), str(st.get("device", ""))
    check = next((k.split("_")[1] for k in ("amp_failed", "amp_skipped", "amp_passed") if k in kinds), None)
    if "amp_requested" in st:
        _put(f, "ul.amp_check", check or "not-run")
    why = ("amp='bf16' skips Ultralytics' AMP check" if asked == "bf16" and device.startswith("cuda") else
           "AMP does nothing on the CPU: the training ran in float32" if asked in ("true", "fp16", "bf16")
           and device.startswith("cpu") else
           f"Ultralytics' AMP check was skipped ({figs['amp_skipped'][0] if figs.get('amp_skipped') else 'offline'})"
           " and AMP stayed on unverified" if check == "skipped" else None)
    if why:
        _put(f, "ul.amp_unchecked", why)
    if "cache_refused" in kinds:
        _put(f, "ul.cache_refused", True)
        g = [float(x) for x in figs["cache_refused"][:2]]
        _put(f, "ul.cache_required_gb", g[0])
        _put(f, "ul.cache_available_gb", g[1])
    elif st.get("cache_requested") == "ram" and "cache" in st:
        _put(f, "ul.cache_refused", st.get("cache") != "ram")
    slow = [e for e in logs if e["kind"] == "files_slow"]
    read = slow or [e for e in logs if e["kind"] == "files_fast"]
    if read:
        _put(f, "ul.files_slow", bool(slow))
        _put(f, "ul.files_read", "; ".join(dict.fromkeys(str((e.get("figures") or [""])[0]) for e in read)))
    if "autobatch_chosen" in kinds:
        b, _, total, pct = figs["autobatch_chosen"][:4]
        _put(f, "ul.autobatch", "chosen")
        _put(f, "ul.autobatch_batch", float(b))
        _put(f, "ul.autobatch_target", float(pct) / 100)
        _put(f, "ul.autobatch_total_gb", float(total))
        # Only a batch that ran as chosen tells how good the estimate was; a halved one is MM205's finding.
        ran_as_chosen = f.get("run.batch") in (None, float(b))
        if ran_as_chosen and _num(f.get("gpu.torch_reserved_max")) and float(total) > 0:
            used = f["gpu.torch_reserved_max"] / (float(total) * (1 << 30))
            _put(f, "ul.autobatch_miss", used - float(pct) / 100)
    elif "autobatch_default" in kinds:
        _put(f, "ul.autobatch", "default")
        _put(f, "ul.autobatch_why", figs["autobatch_default"][0])
        _put(f, "ul.autobatch_batch", float(figs["autobatch_default"][1]))
    if "assigner_per_image" in kinds:
        _put(f, "ul.assigner_per_image", True)


def _event_facts(f: dict[str, Any], events: list[dict]) -> None:
    steps = _steps(events)
    f["run.nonfinite_losses"] = float(sum(1 for e in events if e.get("type") == "nonfinite_loss"))
    fits = [e for e in events if e.get("type") == "fit_epoch_end" and _num(e.get("t"))]
    if fits:
        f["run.nan_recoveries"] = float(max((e["nan_recoveries"] for e in fits if _num(e.get("nan_recoveries"))),
                                            default=0))
        f["run.oom_retries"] = float(max((e["oom_retries"] for e in fits if _num(e.get("oom_retries"))), default=0))
    # Ultralytics resets its retry count once an epoch completes: the restarts themselves say how often it halved
    retries = [e for e in events if e.get("type") == "oom_retry"]
    halvings = _halvings(steps)
    if retries or halvings:
        f["run.oom_retries"] = float(max(len(retries), halvings))
    ran = _batch_that_ran(steps)
    if ran is not None:
        f["run.batch"] = ran
    # one span for both peaks: the steps after each epoch's first (the allocator's peaks are reset after every step,
    # so a first step's peak spans the setup, AutoBatch's probing or a failed attempt before an OOM halving)
    span = [e for e in steps if e.get("i", 1) != 0]
    reserved = [x for x in (e.get("mem_reserved_peak", e.get("mem_reserved")) for e in span) if _num(x)]
    if reserved:
        f["gpu.torch_reserved_max"] = float(max(reserved))
        if f.get("run.batch"):
            f["gpu.mem_per_image"] = f["gpu.torch_reserved_max"] / f["run.batch"]
    # fragmentation compares the reserved pool with the steps' peak allocation; a profile that recorded only the
    # resting allocation (mem_allocated, at batch end) cannot tell, so the fact stays missing and MM204 silent
    peaks = [e["mem_allocated_peak"] for e in span if _num(e.get("mem_allocated_peak"))]
    if peaks and max(peaks) > 0:
        f["gpu.torch_allocated_max"] = float(max(peaks))
        if reserved:
            f["gpu.reserved_over_allocated"] = float(max(reserved) / max(peaks))
    # validation share: whole epochs only (epoch_end -> fit_epoch_end is validation + saving). A bounded run that
    # crossed epochs validated them for real; the epoch it stopped in skipped validation and is left out.
    ends = {(e.get("train_index"), e.get("epoch")): e for e in events
            if e.get("type") == "epoch_end" and _num(e.get("t")) and _num(e.get("seconds"))}
    stop = next((x["t"] for x in events if x.get("type") == "bounded" and _num(x.get("t"))), None)
    shares, vals = [], []
    for e in fits:
        end = ends.get((e.get("train_index"), e.get("epoch")))
        if end and end.get("seconds") and (stop is None or e["t"] < stop):
            val = e["t"] - end["t"]
            shares.append(val / (val + end["seconds"]))
            vals.append(val)
    if shares:
        f["run.val_share"] = statistics.median(shares)
        f["run.val_s"] = statistics.median(vals)


def _halvings(steps: list[dict]) -> int:
    """Times the batch of consecutive steps of one train() call fell to half or less (an OOM retry's halving)."""
    n = 0
    last: dict[Any, float] = {}  # the last batch of each train() call
    for e in steps:
        b, t = e.get("batch"), e.get("train_index", 0)
        if _num(b) and _num(last.get(t)) and b <= last[t] / 2:
            n += 1
        if _num(b):
            last[t] = b
    return n


def _batch_that_ran(steps: list[dict]) -> float | None:
    """The batch the last steps ran (after any halving)."""
    batches = [e["batch"] for e in steps if _num(e.get("batch")) and not e.get("traced")]
    return float(batches[-1]) if batches else None


def _window_spans(events: list[dict], window: dict[str, Any]) -> list[tuple[float, float]] | None:
    """The wall-clock spans of the window's training steps (its stretches, pauses left out), as the summary states
    them; for a record that states none, the spans of the stretches of its steps from ``first_step`` on, in the
    train() call with the most steps."""
    spans = window.get("spans")
    if isinstance(spans, list) and spans and all(isinstance(x, list) and len(x) == 2 and all(_num(v) for v in x)
                                                 for x in spans):
        return [(float(a), float(b)) for a, b in spans]
    steps = [e for e in _steps(events) if not e.get("traced")]
    if not steps:
        return None
    calls = [e.get("train_index", 0) for e in steps]
    main = max(set(calls), key=calls.count)
    first = window.get("first_step")
    inside = [e for e in steps if e.get("train_index", 0) == main
              and (not _num(first) or e.get("n", e.get("step", 0)) >= first)] or steps
    return [stretches.span(p) for p in stretches.split(inside)]


def _sample_facts(f: dict[str, Any], samples: list[dict], spans: list[tuple[float, float]] | None) -> None:
    """The sampler's figures over the samples taken inside ``spans`` (the window's training steps; all samples where
    none fall inside, as in a run too short for a sample per stretch)."""
    start = next((s for s in samples if s.get("type") == "sampler_start"), None) or {}
    gpu = _d(start.get("gpu"))
    _put(f, "gpu.name", gpu.get("name"))
    _put(f, "gpu.nvlink_links", gpu.get("nvlink_links"))
    cc = gpu.get("compute_capability")
    if isinstance(cc, list) and cc:
        _put(f, "gpu.cc_major", cc[0])
    _put(f, "cpu.count", start.get("cpu_count"))
    rows = [s for s in samples if s.get("type") == "sample" and _num(s.get("t"))]
    if spans:
        inside = [s for s in rows if stretches.inside(s["t"], spans)]
        rows = inside or rows
    if not rows:
        return
    if not any(s.get("ranks") for s in rows):  # under DDP the sampled process launches the ranks, trains none
        _put(f, "cpu.train_thread_pct", _median(_d(_d(s.get("proc")).get("thread")).get("cpu") for s in rows))
    _put(f, "cpu.process_pct", _median(_d(s.get("proc")).get("cpu") for s in rows))
    tw = [_d(_d(s.get("roles")).get("train_worker")) for s in rows]
    _put(f, "cpu.train_workers_pct", _median(r.get("cpu") for r in tw))
    per = [r["cpu"] / r["count"] for r in tw if _num(r.get("count")) and r["count"] and _num(r.get("cpu"))]
    _put(f, "cpu.per_worker_pct", _median(per))
    _put(f, "cpu.total_pct", _median(_d(s.get("cpu")).get("total") for s in rows))
    totals = [t for t in (_d(s.get("cpu")).get("total") for s in rows) if _num(t)]
    if totals:
        f["cpu.saturated_share"] = sum(1 for t in totals if t > 90) / len(totals)
    _put(f, "cpu.iowait_pct", _median(_d(s.get("cpu")).get("iowait") for s in rows))
    rd = _median(_d(s.get("disk")).get("read_bps") for s in rows)
    if rd is not None:
        f["disk.read_mb_s"] = rd / 1e6
    avail = [a for a in (_d(s.get("mem")).get("available") for s in rows) if _num(a)]
    if avail:
        f["mem.available_min"] = float(min(avail))
    shm = [(m["shm_total"] - m["shm_used"]) for m in (_d(s.get("mem")) for s in rows)
           if _num(m.get("shm_total")) and _num(m.get("shm_used"))]
    if shm:
        f["mem.shm_free_min"] = float(min(shm))
    g = [s["gpu"] for s in rows if isinstance(s.get("gpu"), dict) and s["gpu"]]
    if g:
        utils = [x["util"] for x in g if _num(x.get("util"))]
        if utils:  # never 0% for "not measured"
            f["gpu.util_mean"] = statistics.fmean(utils)
        used = [x["mem_used"] for x in g if _num(x.get("mem_used")) and x["mem_used"]]
        total = next((x["mem_total"] for x in g if _num(x.get("mem_total")) and x["mem_total"]), None)
        if used:
            f["gpu.mem_used_max"] = float(max(used))
        if used and total:
            f["gpu.mem_total"] = float(total)
            f["gpu.mem_fraction_peak"] = max(used) / total
        thr = [x["throttle"] for x in g if isinstance(x.get("throttle"), list)]  # None: NVML did not answer
        if thr:
            f["gpu.throttled_share"] = sum(1 for t in thr if any(n not in ("gpu_idle", "applications_clocks_setting")
                                                                  for n in t)) / len(thr)


def from_check(check_facts: dict[str, Any]) -> dict[str, Any]:
    """The check probes' facts that rules read, under the catalogue's names."""
    f: dict[str, Any] = {}
    decode = [v for v in (check_facts.get("io.decode_ms_median"), check_facts.get("io.resize_ms_median")) if _num(v)]
    if decode and sum(decode):
        _put(f, "check.decode_ms", sum(decode))
    fmts = _d(check_facts.get("dataset.image_formats"))
    total = sum(v for v in fmts.values() if _num(v))
    if total:
        _put(f, "check.image_formats_png_share",
             sum(v for k, v in fmts.items() if _num(v) and str(k).lower().endswith("png")) / total)
    _put(f, "check.cache_ram_fits", check_facts.get("cache.ram_fits"))
    _put(f, "check.cache_fill_s", cache_fill_s(check_facts))
    _put(f, "cpu.usable", check_facts.get("cpu.usable"))
    _put(f, "gpu.name", check_facts.get("gpu.name"))
    cc = check_facts.get("gpu.compute_capability")
    if isinstance(cc, (list, tuple)) and cc:
        _put(f, "gpu.cc_major", cc[0])
    return f


CACHE_THREADS_MAX = 8  # Ultralytics' NUM_THREADS: min(8, max(1, os.cpu_count() - 1)), the pool cache_images uses


def cache_fill_s(check_facts: dict[str, Any]) -> float | None:
    """Seconds Ultralytics takes to fill cache='ram' before the first step: every train and val image read and
    decoded once (both splits: the val loader is built with the same cache argument), and resized to imgsz except in
    classification, which caches full-resolution images (BaseDataset.cache_images, ClassificationDataset.cache_images),
    on min(8, cores - 1) threads, at check's per-image cost on one core. None where a figure is missing. Measured on
    an H100 host with 16 cores (1,500 train and 300 val 1080p PNGs, 2026-12-07): 25 s against 16 s from this
    estimate, so it is a lower bound."""
    images = sum(v for v in (check_facts.get("dataset.images.train"), check_facts.get("dataset.images.val"))
                 if _num(v))
    keys = ["io.read_ms_per_image", "io.decode_ms_median"]
    if check_facts.get("dataset.task") != "classify":
        keys.append("io.resize_ms_median")
    parts = [float(v) for k in keys if _num(v := check_facts.get(k))]
    cores = check_facts.get("cpu.count")
    if not images or len(parts) < len(keys) or not _num(cores):
        return None
    threads = min(CACHE_THREADS_MAX, max(1, int(cores) - 1))
    return images * sum(parts) / 1000.0 / threads


def ending(profile: Profile) -> dict[str, Any]:
    """How the training ended (end.*): what the profile's status and reason say, for the rules that report it. The
    values are kept as recorded (the engine reads a whole number as a double where the catalogue says so)."""
    f: dict[str, Any] = {"end.status": profile.status, "end.reason": profile.reason or None,
                         "end.exit_code": profile.exit_code, "end.steps": (profile.summary or {}).get("steps"),
                         "end.batch": (profile.settings or {}).get("batch")}
    return {k: v for k, v in f.items() if v is not None and (CATALOGUE[k][0] != "double" or _num(v))}
