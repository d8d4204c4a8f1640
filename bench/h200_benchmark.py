"""How close `yolodoctor fix --verify --apply` gets to the best configuration on a GPU machine, in resumable parts.

    python bench/h200_benchmark.py run [PART ...] [--budget-s 540] [--redo UNIT ...] [scale options]
    python bench/h200_benchmark.py grid [--tiny]          # the sweep grid and why each configuration is in it
    python bench/report_h200.py [--results DIR] [--write] # the figures (a full report in bench/out/ with --write)
    bash bench/h200_benchmark.sh PART ...                 # run, then pack results and logs into $OUT where it is set

Parts (`all` runs them in this order; every unit of a part is skipped once its result is recorded):
  dataset     `make-dataset --images 20000 --val-images 2000` (640x480 JPEG); local, remade on a fresh machine
  defaults    Ultralytics defaults (yolo11n.yaml, imgsz 640, batch 16, workers 8, AMP), whole epochs, profiled
  fix-safe    a bounded `profile` of the defaults, then `fix --verify --apply` (safe changes only); the applied run
              is the whole training with the kept plan. Runs detached (setsid), so it outlives one command: the
              next command on the same machine waits for it again. A defaults whole run is added when none was recorded
              on this machine (its machine_id), so that applied/defaults is a ratio within one machine.
  fix-unsafe  the same with --allow-unsafe
  loader      the train loader alone (Ultralytics' own, built without a model and iterated for --loader-seconds,
              mosaic on): workers 8 and 16 at batch 16, 64 and 128, 16 workers with cache='ram', and the (workers,
              batch, cache) of each applied plan
  sweep       bounded `profile --no-trace` runs over the grid below, plus each applied plan's own configuration
  spread      one configuration (--spread-config, default b64-w16) profiled twice; another configuration's pair is
              recorded beside the default's (spread-CONFIG-1/2)
  workers     is the host's launch work slowed by the loader workers' CPU load? batch 64 with compile='reduce-overhead'
              at 8, 12 and 16 workers, bounded, in alternating rounds (ABC CBA). The step's compute time (data wait
              left out: fewer workers leave the loader short, but a step's own work is the same) and its spread per
              count: if it grows with the workers, they slow the host's launch threads
  compile     compile cost on one machine: the --compile-config eager, then compiled with an empty inductor/Triton
              cache (cold), then again with that cache (warm); cost = the first steps' excess over the steady step
              time, compiled minus eager

Bookkeeping: results are small JSON files, one per part, in --results (default bench/results/h200-benchmark/,
committed, so that a later command and a fresh machine skip what was finished); run directories, logs and the dataset
live in --work (default bench/out/h200/, git-ignored). A record carries the machine (host, GPU, and machine_id: the
first 8 hex digits of the kernel's boot id, so that two records with the same id ran on one machine in one boot),
its wall time and its digest (steady images/s, epochs, setup and first-step excess, per-optimizer-step loss for whole
runs, a few diagnosis facts) and a host probe before and after it (probe(), yolodoctor/profiling/hostprobe.py: a
Python loop, a JPEG decode, a memory copy - the host's own speed, to tell a machine that slowed from a run that did).
`run` starts a unit only when the time it took before (or an estimate) fits in what is left of --budget-s, so that a
command with a time limit ends cleanly; exit 3 means "call again". A unit cut off mid-way is redone from its start.
Results of another scale are refused (the scale is stored with them). --redo UNIT runs a recorded unit again, once
per machine: the same command again goes on from there.

Mosaic: Ultralytics closes mosaic once `epoch >= epochs - close_mosaic` (trainer.py, 8.4.190), i.e. from the first
epoch whenever epochs <= close_mosaic (10). Every run here passes close_mosaic=0 so that mosaic stays on, as in the
first 90 epochs of a 100-epoch run. epochs=1 (--epochs): no warm-up either (warm-up lasts min(3, epochs - 1)
epochs), so bounded trials, the sweep and the whole runs measure the same phase: mosaic on, accumulate at its nominal.

Long enough: at batch 128 with 16 workers the loader's prefetch queue is 64 batches (8,192 images) and an epoch of
20,000 images 156 steps, fewer than the 212 a valid steady window needs (20 + 64, then 2 x 64): a one-epoch run could
not measure it, and fix --verify would reject every such trial as "window too short to conclude" (a user's 100-epoch
run does not hit this: a bounded profile crosses epochs). So a bounded run whose window does not fit in one epoch
runs whole epochs (2 here) with warmup_epochs=0 and val=False (Runner.long_enough: the recorder restarts its wait
clock at each epoch start, and with no validation between the epochs the workers get no pause to refill their
queue in), and fix-unsafe profiles the defaults that way, so that its trials
inherit it.

Precision: Ultralytics 8.4.190 has the train argument for it: `amp=True` (or 'fp16', the default) trains under fp16
autocast with a GradScaler, after `check_amp` (offline it logs "checks skipped" and keeps AMP on); `amp='bf16'`
trains under bfloat16 autocast with no GradScaler and skips check_amp; amp=False/'fp32' is float32. yolodoctor's rule
PR202 proposes amp='bf16' (unsafe: it changes numerics) where AMP runs fp16 on compute capability >= 8.0, and the
planner refuses it below 8.0. In the grid, "fp16" is amp left at its default and "bf16" is amp=bf16.

Sweep grid (`grid` prints it): 72 configurations make the full factorial of batch {16, 64, 128} x workers {8, 16} x
amp {fp16, bf16} x compile {off, default, reduce-overhead} x cache {off, ram}, about 70 minutes at ~1 min a run.
The 14 below are a fractional design around the two ceilings the pipeline has: the loader's (set by workers and
cache: ~520 img/s with 8 workers, ~900 with 16 on a 16-core H200 machine) and the GPU side's (set by batch, compile
and precision: launch-bound at batch 16). Each knob's main effect is read from pairs one knob apart, at the settings
where the other ceiling does not hide it: batch (b16-w8/b64-w8, b64-w16/b128-w16), workers (b64-w8/b64-w16), compile
(b16-w8/-c; b64-w16/-c/-ro; b128-w16/-c/-ro), amp (b64-w16/-bf16, b128-w16-ro/-bf16), cache (b64-w8/-ram,
b128-w16-ro/-ram, b128-w16-ro-bf16/-ram). Left out: b16-w16 (batch 16 consumes ~190-280 img/s, far under 8 workers'
~520, so 16 workers cannot show), b128-w8 (8 workers cap it like b64-w8), eager bf16 at 128 and compile x bf16 at 64
(the 128 pair answers it where the GPU side is the limit).

At tiny scale (--tiny: 480 images of 160x120, imgsz 64, CPU) batch maps 16/64/128 -> 2/4/8, workers 8/16 -> 1/2
(the trainer uses 0 on a CPU anyway), compile and bf16 are dropped (CPU), and configurations that become equal are
run once: the pipeline, bookkeeping and report are exercised, not the figures.

Commands, one per part (repo root, yolodoctor and its dependencies installed; each command ends inside 10 minutes,
exit 3 = run the same command again, on the same machine while a fix runs detached). Minutes at full scale on a 16-core
NVIDIA H200 machine (defaults ~190-270 img/s, compilation ~110-140 s cold, 30-45 s per bounded trial):
  bash bench/h200_benchmark.sh dataset      #  ~1.5 min: 22,000 JPEGs on 16 cores (any part makes it first if missing)
  bash bench/h200_benchmark.sh defaults     #  ~2.5 min: one epoch of 20,000 images at ~200 img/s, validation, setup
  bash bench/h200_benchmark.sh fix-safe     # ~15-20 min, 2-3 commands: the fix ~15 min (12 trials of ~33 s eager
                                            #   and ~45 s compiled, +110 s for each compiled candidate's first (cold)
                                            #   trial, the applied epoch), then its defaults run ~2 min; extra
                                            #   repeats where noise leaves a change undecided, up to --max-reps 4
  bash bench/h200_benchmark.sh fix-unsafe   # ~27 min, 4 commands with --max-reps 2: the fix ~24 min (the profile,
                                            #   17 trials: baseline, batch 128 alone and with the workers, the
                                            #   batch-64 fallback alone and with them, compile, deterministic and
                                            #   bf16 on batch 64 + workers, the plan and its safe part, twice each,
                                            #   but batch 128 and the plan once where their loss settles them; two
                                            #   cold compiles of ~140 s; the applied run), then a defaults run ~2.5 min
  bash bench/h200_benchmark.sh loader       #  ~5 min: 6-8 probes of 20 s plus start-up (cache='ram': + ~30 s)
  bash bench/h200_benchmark.sh sweep        # ~20 min, 3 commands: 14 grid points + the 2 plans (7-9 compiled)
  bash bench/h200_benchmark.sh spread       #  ~2 min: b64-w16 profiled twice
  bash bench/h200_benchmark.sh compile      #  ~6 min: eager ~1, cold ~3, warm ~2 (b64-w16 reduce-overhead)
  bash bench/h200_benchmark.sh workers      #  ~5 min: 6 bounded compiled runs of ~45 s (a cold compile first: +100 s)
About 80 minutes in all. Parts can share a command (`bash bench/h200_benchmark.sh defaults fix-safe spread`); a fresh
machine remakes the dataset first (~16 s). To measure the grid again on one machine, name its points with --redo
(`bash bench/h200_benchmark.sh sweep --grid NAMES --redo sweep/NAME ...`). Where the results come back as
$OUT/h200-results.tgz, `tar xzf h200-results.tgz` in the repository restores bench/results/h200-benchmark/, and
`python bench/report_h200.py` shows where things stand.
py-spy (--py-spy): install it and put its `py-spy` on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, today
from common import machine as describe_machine

sys.path.insert(0, str(ROOT))
import pyspy_probe

from yolodoctor.fixing.parity import opt_curve

PARTS = ["dataset", "defaults", "fix-safe", "fix-unsafe", "loader", "sweep", "spread", "compile", "workers"]
RESULTS = ROOT / "bench" / "results" / "h200-benchmark"
WORK = ROOT / "bench" / "out" / "h200"
SETTLE, PREFETCH = 20, 4  # yolodoctor's steady window starts after SETTLE + workers x PREFETCH steps
CALL_AGAIN = 3


# ---------------------------------------------------------------------------------------------------------- scale
@dataclass(frozen=True)
class Scale:
    images: int = 20000
    val_images: int = 2000
    size: str = "640x480"
    imgsz: int = 640
    epochs: int = 1
    model: str = "yolo11n.yaml"
    steps: int | None = None  # bounded runs (sweep, spread, compile): None = `profile`'s default rule
    loader_seconds: float = 20.0
    reps: int = 2  # fix --reps
    tiny: bool = False


TINY = Scale(images=480, val_images=32, size="160x120", imgsz=64, loader_seconds=3.0, reps=1, tiny=True)
TINY_MAP = {"batch": {16: 2, 64: 4, 128: 8}, "workers": {8: 1, 12: 2, 16: 2}}


# ---------------------------------------------------------------------------------------------------------- grid
@dataclass(frozen=True)
class Config:
    name: str
    batch: int
    workers: int
    amp: str = "fp16"  # fp16: amp left at Ultralytics' default (True); bf16: amp='bf16'
    compile: bool | str = False  # False | True ('default') | 'reduce-overhead'
    cache: bool | str = False  # False | 'ram'
    why: str = ""

    def args(self, tiny: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"batch": TINY_MAP["batch"].get(self.batch, self.batch) if tiny else self.batch,
                               "workers": TINY_MAP["workers"].get(self.workers, self.workers) if tiny else self.workers}
        if self.amp == "bf16" and not tiny:
            out["amp"] = "bf16"
        if self.compile and not tiny:
            out["compile"] = self.compile
        if self.cache:
            out["cache"] = self.cache
        return out


RO = "reduce-overhead"
GRID = [
    Config("b16-w8", 16, 8, why="Ultralytics defaults: the reference"),
    Config("b16-w8-c", 16, 8, compile=True, why="compile at the default batch (launch-bound at 16); not CUDA graphs: "
           "they crash with the gradient accumulation of batch 16 (pytorch/pytorch#169545)"),
    Config("b64-w8", 64, 8, why="batch at nbs: 4x the work per launch; 8 workers (~520 img/s alone)"),
    Config("b64-w8-ram", 64, 8, cache="ram", why="does skipping JPEG decode lift the 8-worker ceiling?"),
    Config("b64-w16", 64, 16, why="16 workers (~900 img/s alone): is the loader the limit at 8?"),
    Config("b64-w16-c", 64, 16, compile=True, why="compile without CUDA graphs (fusion only)"),
    Config("b64-w16-ro", 64, 16, compile=RO, why="compile with CUDA graphs; ~400 img/s on an H200 when first profiled"),
    Config("b64-w16-bf16", 64, 16, amp="bf16", why="bf16 alone, eager"),
    Config("b128-w16", 128, 16, why="batch above nbs (unsafe: effective batch 128)"),
    Config("b128-w16-c", 128, 16, compile=True, why="compile default at 128"),
    Config("b128-w16-ro", 128, 16, compile=RO, why="the best recorded configuration (1015-1131 img/s)"),
    Config("b128-w16-ro-bf16", 128, 16, amp="bf16", compile=RO, why="bf16 where the GPU side is the limit"),
    Config("b128-w16-ro-ram", 128, 16, compile=RO, cache="ram", why="cache on the best: is 16 workers' ~900 the cap?"),
    Config("b128-w16-ro-bf16-ram", 128, 16, amp="bf16", compile=RO, cache="ram", why="every knob at its fast setting"),
]
DEFAULTS = GRID[0]
SPREAD_DEFAULT = "b64-w16"
UNSAFE_REACH = {"batch": 128, "workers": 16}  # the largest batch and workers an unsafe plan can reach here (2 x nbs)
LOADER_GRID = [(8, 16, False), (16, 16, False), (8, 64, False), (16, 64, False), (16, 128, False), (16, 128, "ram")]


def grid(tiny: bool = False, names: list[str] | None = None) -> list[Config]:
    """The sweep's configurations; at tiny scale those that map to the same arguments are run once."""
    out, seen = [], set()
    for c in GRID:
        key = json.dumps(c.args(tiny), sort_keys=True)
        if (names and c.name not in names) or key in seen:
            continue
        seen.add(key)
        out.append(c)
    return out


def loader_units(tiny: bool = False) -> dict[str, dict[str, Any]]:
    """The loader part's fixed units: name -> train arguments (tiny scale maps some onto others: run once)."""
    out: dict[str, dict] = {}
    for w, b, cache in LOADER_GRID:
        args = Config("", b, w, cache=cache).args(tiny)
        if args not in out.values():
            out[f"w{w}-b{b}" + ("-ram" if cache else "")] = args
    return out


WORKERS_TEST = (8, 12, 16)  # the workers part: batch 64 reduce-overhead at these loader worker counts
WORKERS_ROUNDS = 2


def workers_units(tiny: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The workers part's units in the order they run: batch 64 with CUDA graphs at each worker count, in rounds of
    alternating order (ABC CBA), so that drift of the machine falls on every count alike."""
    out = []
    for r in range(WORKERS_ROUNDS):
        for w in (WORKERS_TEST if r % 2 == 0 else WORKERS_TEST[::-1]):
            out.append((f"b64-ro-w{w}-{r + 1}", Config("", 64, w, compile=RO).args(tiny)))
    return out


def spread_units(config: str) -> tuple[str, str]:
    """The spread part's unit names for a configuration: spread-1/2 for the default one, spread-CONFIG-1/2 else."""
    return ("spread-1", "spread-2") if config == SPREAD_DEFAULT else (f"spread-{config}-1", f"spread-{config}-2")


def words(args: dict[str, Any]) -> list[str]:
    return [f"{k}={v}" for k, v in args.items()]


# ---------------------------------------------------------------------------------------------------------- digest
def read_events(run: Path) -> list[dict]:
    """A run's events (yolodoctor's own reader: a torn last line skipped, a missing file read as none)."""
    from yolodoctor.record.events import read_events as records

    return list(records(run / "events.jsonl"))


def digest(run: Path, curve: bool = False) -> dict[str, Any]:
    """What the report needs from a run directory. steady_ips = images / (data wait + compute) over the steps after
    SETTLE + workers x 4 (the queue drained once; compilation and warm-up left out; validation is outside steps)."""
    prof = json.loads((run / "profile.json").read_text())
    ev = read_events(run)
    st = prof.get("settings") or {}
    steps = sorted((e for e in ev if e.get("type") == "step" and e.get("train_index", 0) == 0),
                   key=lambda e: e["step"])
    out: dict[str, Any] = {"run": run.name, "status": prof.get("status"), "reason": prof.get("reason"),
                           "settings": {k: st.get(k) for k in ("device", "batch", "workers", "precision", "amp",
                                                                "compile_requested", "compile_active", "cache",
                                                                "accumulate", "epochs", "images_per_epoch", "mosaic",
                                                                "deterministic", "torch")},
                           "summary_ips": (prof.get("summary") or {}).get("images_per_s"),
                           "window_valid": ((prof.get("summary") or {}).get("window") or {}).get("valid"),
                           "steps": len(steps), "images": sum(s.get("images") or 0 for s in steps)}
    dur = [(s.get("wait") or 0) + s["compute"] for s in steps]
    skip = SETTLE + (st.get("workers") or 0) * (st.get("prefetch_factor") or PREFETCH)
    tail = [(d, s) for d, s in zip(dur[skip:], steps[skip:], strict=False) if not s.get("traced")]
    if len(tail) >= 2:
        med = statistics.median(d for d, _ in tail)
        out.update(steady_ips=sum(s["images"] for _, s in tail) / sum(d for d, _ in tail), steady_steps=len(tail),
                   step_s_median=med, wait_share=sum(s.get("wait") or 0 for _, s in tail) / sum(d for d, _ in tail),
                   first_steps_excess_s=sum(dur[:skip]) - skip * med)
        compute = statistics.quantiles([s["compute"] for _, s in tail], n=10, method="inclusive")
        # the step's own work, data wait left out: p10, median, p90 (how much it jitters)
        out["compute_s"] = [compute[0], statistics.median(s["compute"] for _, s in tail), compute[-1]]
        gpu = [s["gpu_ms"] for _, s in tail if s.get("gpu_ms")]
        if gpu:  # CUDA-event time of the step: tells a slower GPU side from a slower host between two runs
            out["gpu_ms_median"] = statistics.median(gpu)
    start = next((e["t"] for e in ev if e.get("type") == "run_start"), None)
    first_epoch = next((e["t"] for e in ev if e.get("type") == "epoch_start"), None)
    end = next((e["t"] for e in ev if e.get("type") == "run_end"), None)
    if start is not None and first_epoch is not None:
        out["setup_s"] = first_epoch - start  # model build, label scan, cache, AMP check: before the first epoch
    if start is not None and end is not None:
        out["run_s"] = end - start
    epochs = []
    for e in (x for x in ev if x.get("type") == "epoch_end" and x.get("train_index", 0) == 0):
        val = next((x["t"] - e["t"] for x in ev if x.get("type") == "fit_epoch_end" and x.get("epoch") == e["epoch"]
                    and x["t"] >= e["t"]), None)
        epochs.append({"epoch": e["epoch"], "train_s": e.get("seconds"), "steps": e.get("steps"), "val_s": val,
                       "images": sum(s.get("images") or 0 for s in steps if s.get("epoch") == e["epoch"])})
    out["epochs"] = epochs
    if curve:
        out["loss_per_opt_step"] = opt_curve(steps)
    try:
        from yolodoctor.diagnosis.diagnose import diagnose

        d = diagnose(run)
        keep = ("gpu.util_mean", "gpu.mem_fraction_peak", "cpu.train_thread_pct", "cpu.saturated_share",
                "cpu.train_workers_pct", "cpu.total_pct", "gpu.throttled_share", "trace.syncs_per_step",
                "run.data_wait_share", "loader.capacity_images_per_s", "gpu.name")
        out["facts"] = {k: d.facts.get(k) for k in keep if d.facts.get(k) is not None}
        out["findings"] = [f.id for f in d.findings]
    except Exception as e:  # the digest is still useful without the diagnosis
        out["facts_error"] = f"{type(e).__name__}: {e}"[:200]
    return out


def phases(run: Path) -> dict[str, float] | None:
    """Where a run's wall time went, from its events: process start and imports until the trainer begins
    (``start_s``), the trainer's setup until the first epoch (``setup_s``), the first step (first batch and first
    forward/backward: a compile happens here, ``first_step_s``), the remaining steps (``steps_s``), and from the last
    step to the run's end (``end_s``; the validation of a whole run is in it)."""
    ev = read_events(run)
    at = {t: next((e["t"] for e in ev if e.get("type") == t and e.get("train_index", 0) == 0), None)
          for t in ("run_start", "train_begin", "epoch_start", "run_end")}
    steps = sorted((e for e in ev if e.get("type") == "step" and e.get("train_index", 0) == 0), key=lambda e: e["t"])
    if None in at.values() or not steps:
        return None
    return {"start_s": at["train_begin"] - at["run_start"], "setup_s": at["epoch_start"] - at["train_begin"],
            "first_step_s": steps[0]["t"] - at["epoch_start"], "steps_s": steps[-1]["t"] - steps[0]["t"],
            "end_s": at["run_end"] - steps[-1]["t"], "total_s": at["run_end"] - at["run_start"]}


# ---------------------------------------------------------------------------------------------------------- machine
def machine() -> dict[str, Any]:
    from yolodoctor.api.nvml import visible_now
    from yolodoctor.record.profile import host_id

    try:
        mid = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        mid = "?"
    gpus = visible_now()
    try:
        from importlib.metadata import version

        ul = version("ultralytics")
    except Exception:
        ul = None
    return {"host": host_id(), "machine_id": mid, "gpu": gpus[0].name if gpus else None,
            "gpu_uuid": gpus[0].uuid[-12:] if gpus else None, "cores": len(os.sched_getaffinity(0)),
            "ultralytics": ul, "describe": describe_machine()}


# ---------------------------------------------------------------------------------------------------------- results
def load_results(results: Path) -> dict[str, dict]:
    out = {}
    for part in PARTS:
        f = results / f"{part}.json"
        if f.exists():
            out[part] = json.loads(f.read_text())
    return out


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


class NotYet(Exception):
    """A unit that is still running detached (fix): call again."""


@dataclass
class Unit:
    name: str
    kind: str  # for the time estimate: dataset, whole, fix, loader, bounded, bounded-compiled, compile
    fn: Callable[[], dict[str, Any]]


EST_S = {"dataset": 120, "whole": 240, "fix": 30, "loader": 90, "bounded": 80, "bounded-compiled": 200,
         "compile": 420}  # full scale, until a unit of the kind has run
EST_TINY_S = 30


class SpyThread(threading.Thread):
    """The py-spy watcher of one bounded run: ``stop`` ends it, ``result`` holds what it sampled (or why not)."""

    def __init__(self, watch: Callable[[], None]) -> None:
        super().__init__(target=watch, daemon=True)
        self.result: dict[str, Any] | None = None
        self.stop = threading.Event()


class Runner:
    def __init__(self, a) -> None:
        self.scale: Scale = a.scale
        self.work, self.results = Path(a.work), Path(a.results)
        self.budget, self.t0 = a.budget_s, time.monotonic()
        self.tries, self.names = a.fix_try or [], a.grid
        self.max_reps = a.max_reps  # fix --max-reps (None: fix's own default)
        self.spread_config, self.compile_config = a.spread_config, a.compile_config
        self.pyspy_s = getattr(a, "py_spy", 0) or 0
        self.machine = machine()
        # --redo UNIT is honoured once a machine: the same command again (exit 3: call again) goes on from there
        self.redone_file = self.work / "redone.json"
        self.redone: dict[str, str] = json.loads(self.redone_file.read_text()) if self.redone_file.exists() else {}
        self.asked = set(a.redo or [])
        for u in sorted(x for x in self.asked if self.redone.get(x) == self.machine["machine_id"]):
            print(f"  {u}: redone on this machine already; to run it again here, remove {self.redone_file}",
                  file=sys.stderr)
        self.redo = {x for x in self.asked if self.redone.get(x) != self.machine["machine_id"]}
        self.restart = set(self.redo)  # a fix named here is started again; one added later is only collected
        self.detached: subprocess.Popen | None = None  # the fix driver this runner started
        self.data = self.work / f"ds{self.scale.images}" / "data.yaml"
        self.res = load_results(self.results)
        for part, doc in self.res.items():
            if doc.get("scale") != asdict(self.scale):
                print(f"{self.results / (part + '.json')} holds results of another scale ({doc.get('scale')}); use "
                      "another --results", file=sys.stderr)
                raise SystemExit(2)

    # -- time and records
    def left(self) -> float:
        return self.budget - (time.monotonic() - self.t0)

    def est(self, kind: str) -> float:
        """The longest wall time of this kind of unit so far (on this machine if it ran any), else an estimate.
        A fix runs detached and is waited for inside the budget: only its start must fit."""
        recs = [r for doc in self.res.values() for r in doc["units"].values()
                if r.get("kind") == kind and r.get("wall_s") and kind != "fix"]
        here = [r["wall_s"] for r in recs if (r.get("machine") or {}).get("machine_id") == self.machine["machine_id"]]
        walls = here or [r["wall_s"] for r in recs]
        return max(walls) if walls else (EST_TINY_S if self.scale.tiny else EST_S[kind])

    def done(self, part: str, unit: str) -> bool:
        return unit in self.records(part) and not {unit, f"{part}/{unit}"} & self.redo

    def record(self, part: str, unit: str, rec: dict) -> None:
        doc = self.res.setdefault(part, {"part": part, "scale": asdict(self.scale), "units": {}})
        doc["units"][unit] = rec
        write_json(self.results / f"{part}.json", doc)
        self.mark_redone({unit, f"{part}/{unit}"} & self.redo)
        self.redo -= {unit, f"{part}/{unit}"}

    def mark_redone(self, labels: set[str]) -> None:
        """The units asked for by --redo that were redone (recorded; a detached fix: started) on this machine."""
        if labels & self.asked:
            self.redone.update(dict.fromkeys(labels & self.asked, self.machine["machine_id"]))
            write_json(self.redone_file, self.redone)

    def records(self, part: str) -> dict[str, dict]:
        return self.res.get(part, {}).get("units", {})

    # -- processes
    def call(self, cmd: list[str], out: Path, log: Path, env: dict | None = None, new_session: bool = False
             ) -> int | subprocess.Popen:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w") as fo, open(log, "w") as fe:
            p = subprocess.Popen(cmd, stdout=fo, stderr=fe, env={**os.environ, **(env or {})}, cwd=ROOT,
                                 start_new_session=new_session)
        if new_session:
            return p
        try:
            return p.wait()
        finally:  # the runner was stopped (SIGTERM, Ctrl-C): stop the unit's process with it
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()

    def common(self) -> dict[str, Any]:
        s = self.scale
        return {"model": s.model, "data": str(self.data), "imgsz": s.imgsz, "epochs": s.epochs, "close_mosaic": 0,
                "plots": False, "project": str(self.work / "ul")}

    def profile(self, run: Path, args: dict[str, Any], *flags: str, curve: bool = False,
                env: dict | None = None) -> dict[str, Any]:
        shutil.rmtree(run, ignore_errors=True)
        t = time.monotonic()
        rc = self.call([sys.executable, "-m", "yolodoctor", "profile", *words({**self.common(), **args}), *flags,
                        "--out", str(run), "--json"], run.parent / f"{run.name}.json", run.parent / f"{run.name}.log",
                       env=env)
        rec = {"rc": rc, "args": args, "cmd_wall_s": round(time.monotonic() - t, 1)}
        if not (run / "profile.json").exists():
            return rec | {"status": "failed", "reason": _tail(run.parent / f"{run.name}.log")}
        return rec | digest(run, curve=curve)

    def bounded(self, run: Path, args: dict, curve: bool = False, env: dict | None = None) -> dict:
        steps = ["--steps", str(self.scale.steps)] if self.scale.steps else []
        shutil.rmtree(run, ignore_errors=True)  # no events of an earlier run for the py-spy watcher to read
        spy = self.py_spy(run, args)
        try:
            rec = self.profile(run, args, *steps, "--no-trace", "--loader-seconds", "0", curve=curve, env=env)
        finally:
            if spy is not None:
                spy.stop.set()
                spy.join(timeout=self.pyspy_s + 30)
        if spy is not None:
            rec["pyspy"] = spy.result
        elif self.pyspy_s:
            rec["pyspy"] = {"error": "py-spy is not on PATH"}
        return rec

    def py_spy(self, run: Path, args: dict) -> SpyThread | None:
        """With --py-spy S: once the run is 10 steps into its steady window, sample its training process (the pid its
        sampler recorded) for S seconds (bench/pyspy_probe.py): where the training thread's wall time goes, on a CPU,
        holding the GIL. 'truncated' says the run ended before the S seconds did (its shutdown is in the samples)."""
        if not self.pyspy_s or pyspy_probe.binary() is None:
            return None
        after = SETTLE + int(args.get("workers", 8)) * PREFETCH + 10

        def events() -> str:
            try:
                return (run / "events.jsonl").read_text(errors="replace")
            except OSError:
                return ""

        def watch() -> None:
            t.result = {"error": "the run ended before its steady window"}
            while not t.stop.is_set():
                ev = events()
                pid = pyspy_probe.training_pid(run) if ev.count('"type": "step"') >= after else None
                if pid:
                    prefix = run.parent / f"{run.name}.pyspy"
                    first = ev.count('"type": "step"')
                    procs = pyspy_probe.start(pid, self.pyspy_s, prefix)
                    for p in procs:
                        p.wait()
                    ev = events()
                    t.result = {**pyspy_probe.summarise({k: Path(f"{prefix}.{k}.txt") for k in pyspy_probe.KINDS},
                                                        pid),
                                "steps": [first, ev.count('"type": "step"')], "truncated": '"run_end"' in ev}
                    return
                time.sleep(0.5)

        t = SpyThread(watch)
        t.start()
        return t

    # -- parts
    def units(self, part: str) -> list[Unit]:
        return getattr(self, "part_" + part.replace("-", "_"))()

    def part_dataset(self) -> list[Unit]:
        def make() -> dict:
            d = self.data.parent
            t = time.monotonic()
            rc = self.call([sys.executable, "-m", "yolodoctor", "make-dataset", str(d), "--images",
                            str(self.scale.images), "--val-images", str(self.scale.val_images), "--size",
                            self.scale.size, "--force", "--json"], self.work / "dataset.json",
                           self.work / "dataset.log")
            if rc != 0:
                raise SystemExit(f"make-dataset failed (rc {rc}): {_tail(self.work / 'dataset.log')}")
            return {"images": self.scale.images, "val_images": self.scale.val_images, "size": self.scale.size,
                    "seconds": round(time.monotonic() - t, 1)}

        marker = self.data.parent / ".yolodoctor-dataset"
        complete = marker.exists() and json.loads(marker.read_text()).get("complete")
        return [] if complete and "dataset" not in self.redo else [Unit("dataset", "dataset", make)]

    def defaults_args(self) -> dict[str, Any]:
        return DEFAULTS.args(True) if self.scale.tiny else {}  # full scale: no argument at all, Ultralytics' own

    def long_enough(self, args: dict[str, Any]) -> dict[str, Any]:
        """Train arguments that give a bounded run of ``args`` a valid steady window where one epoch is too short for
        it: the profile's default steps (SETTLE + 3 x the prefetch queue: profiling/bounds.py) over the batches of an
        epoch, as whole epochs, with no warm-up and no validation before the last epoch (so that the steps stay in
        one steady phase and the workers do not refill their queue during a validation). At 20,000 images this is
        batch 128 with 16 workers: 212 steps needed, 156 in an epoch."""
        batch = int(args.get("batch", DEFAULTS.args(self.scale.tiny)["batch"]))
        workers = int(args.get("workers", DEFAULTS.args(self.scale.tiny)["workers"]))
        need, per_epoch = SETTLE + 3 * workers * PREFETCH, -(-self.scale.images // batch)
        epochs = -(-need // per_epoch)
        return {} if epochs <= self.scale.epochs else {"epochs": epochs, "warmup_epochs": 0, "val": False}

    def unsafe_reach(self) -> dict[str, Any]:
        """UNSAFE_REACH at this scale (tiny maps batch 128 and 16 workers down like the grid does)."""
        return Config("", UNSAFE_REACH["batch"], UNSAFE_REACH["workers"]).args(self.scale.tiny)

    def whole_defaults(self, run: Path) -> dict:
        return self.profile(run, self.defaults_args(), "--all", "--loader-seconds", "0", curve=True)

    def part_defaults(self) -> list[Unit]:
        return [Unit("defaults", "whole", lambda: self.whole_defaults(self.work / "defaults"))]

    def defaults_here(self) -> bool:
        recs = [self.records("defaults").get("defaults")] + [self.records(p).get("defaults")
                                                             for p in ("fix-safe", "fix-unsafe")]
        return any(r and r.get("status") == "complete" and r["machine"]["machine_id"] == self.machine["machine_id"]
                   for r in recs)

    def part_fix_safe(self, unsafe: bool = False) -> list[Unit]:
        part = "fix-unsafe" if unsafe else "fix-safe"
        units = [Unit("fix", "fix", lambda: self.fix(part, unsafe))]
        pid_file, rec = self.work / part / "fix.pid", self.records(part).get("fix")
        if rec and pid_file.exists():
            started = json.loads(pid_file.read_text())
            # a fix started here after the recorded one (--redo cut short): collect it
            if started["machine_id"] == self.machine["machine_id"] and started["pid"] != rec.get("driver_pid"):
                self.redo.add(f"{part}/fix")
        fix_here = not self.done(part, "fix") or \
            (rec or {}).get("machine", {}).get("machine_id") == self.machine["machine_id"]
        if not self.defaults_here() and fix_here:  # applied / defaults within one machine
            # after the fix: the long detached unit first, so that a --budget-s running out cuts the short
            # defaults run (remade in minutes), not the fix's trials; a fix recorded here still gets its defaults run
            units.append(Unit("defaults", "whole", lambda: self.whole_defaults(self.work / part / "defaults")))
            if self.records(part).get("defaults"):  # recorded on another machine: this fix needs its own
                self.redo.add(f"{part}/defaults")
        return units

    def part_fix_unsafe(self) -> list[Unit]:
        return self.part_fix_safe(unsafe=True)

    def fix(self, part: str, unsafe: bool) -> dict:
        """`profile` of the defaults + `fix --verify --apply`, started detached (see `_fix`), then waited for."""
        d = self.work / part
        pid_file, done_file = d / "fix.pid", d / "fix.done.json"
        running = pid_file.exists() and _alive(json.loads(pid_file.read_text())["pid"])
        if {"fix", f"{part}/fix"} & self.restart and not running:
            pid_file.unlink(missing_ok=True)
            done_file.unlink(missing_ok=True)
        started = json.loads(pid_file.read_text()) if pid_file.exists() else None
        alive = started and started["machine_id"] == self.machine["machine_id"] and _alive(started["pid"])
        if not done_file.exists() and not alive:
            if started:
                print(f"{part}: the detached fix (pid {started['pid']}) is gone; starting it again", file=sys.stderr)
            shutil.rmtree(d / "run", ignore_errors=True)
            (d / "run").mkdir(parents=True)
            cmd = [sys.executable, str(Path(__file__).resolve()), "_fix", str(d), "--reps", str(self.scale.reps),
                   *(["--max-reps", str(self.max_reps)] if self.max_reps else []), *(["--unsafe"] if unsafe else []),
                   *[x for t in self.tries for x in ("--try", t)], "--words",
                   *words({**self.common(), **self.defaults_args(),
                           **(self.long_enough(self.unsafe_reach()) if unsafe else {})})]
            self.detached = self.call(cmd, d / "fix-driver.out", d / "fix-driver.log", new_session=True)
            started = {"pid": self.detached.pid, "machine_id": self.machine["machine_id"], "started": today()}
            write_json(pid_file, started)
            self.mark_redone({"fix", f"{part}/fix"})  # a later call collects this one, even after it ended
            print(f"{part}: fix started detached (pid {self.detached.pid})", file=sys.stderr)
        while not done_file.exists():
            if self.detached is not None:
                self.detached.poll()  # reap it when it has ended
            if not _alive(started["pid"]) and not done_file.exists():
                return {"status": "failed", "reason": "the detached fix driver ended without a result: "
                        + (_tail(d / "fix-driver.log") or "")}
            if self.left() < 10:
                raise NotYet(f"{part}: `fix --verify --apply` still running detached; run this part again "
                             "on the same machine, where it goes on")
            time.sleep(2 if self.scale.tiny else 5)
        done = json.loads(done_file.read_text())
        return {**self.fix_record(d / "run", done), "wall_s": done["ended_s"] - done["started_s"],
                "driver_pid": started["pid"], "max_reps": self.max_reps}  # None: fix's own default

    def fix_record(self, run: Path, done: dict) -> dict:
        rec: dict[str, Any] = {"rc_profile": done["rc_profile"], "rc_fix": done["rc_fix"]}
        prof = run / "profile"
        if (prof / "profile.json").exists():
            rec["profile"] = digest(prof)
        try:
            env = json.loads((run / "fix.json").read_text())
        except (OSError, json.JSONDecodeError):
            return rec | {"status": "failed", "reason": _tail(run / "fix.log") or _tail(run / "profile.log")}
        tr = env.get("trials") or {}
        for r in tr.get("runs", []):
            r["phases"] = phases(Path(r["run_dir"]))  # where each trial's time went (compile: its first step)
            r["run_dir"] = Path(r["run_dir"]).name
        ap = env.get("applied") or {}
        rec.update(status=ap.get("status", "no apply"), findings=[f["id"] for f in env.get("findings", [])],
                   plan=[{k: c.get(k) for k in ("kind", "key", "before", "after", "safety", "reason")}
                         for c in env["plan"]["changes"]],
                   dropped=env["plan"].get("dropped", []), trials=tr,
                   kept={c["key"]: c["after"] for c in tr.get("kept", []) if c["kind"] == "args"},
                   applied={k: ap.get(k) for k in ("status", "applied", "rolled_back", "rollback_reason", "attempts")})
        rec["applied"]["args"] = {c["key"]: c["after"] for c in ap.get("changes", []) if c["kind"] == "args"}
        rec["applied"]["other"] = {c["key"]: c["after"] for c in ap.get("changes", []) if c["kind"] != "args"}
        if ap.get("run_dir") and (Path(ap["run_dir"]) / "profile.json").exists():
            rec["applied_run"] = digest(Path(ap["run_dir"]), curve=True)
        return rec

    def plan_configs(self) -> dict[str, dict]:
        """Each applied plan's train arguments over the defaults (batch, workers, amp, compile, cache...)."""
        out = {}
        for part in ("fix-safe", "fix-unsafe"):
            fx = self.records(part).get("fix") or {}
            if fx.get("applied", {}).get("applied") == "plan":
                out[plan_unit(part)] = {**self.defaults_args(), **fx["applied"]["args"]}
        return out

    def part_loader(self) -> list[Unit]:
        todo = loader_units(self.scale.tiny)
        for name, args in self.plan_configs().items():
            key = {k: args.get(k, DEFAULTS.args(self.scale.tiny)[k]) for k in ("workers", "batch")}
            key |= {"cache": args["cache"]} if args.get("cache") else {}
            if key not in todo.values():
                todo[name] = key
        return [Unit(n, "loader", lambda n=n, a=a: self.loader(n, a)) for n, a in todo.items()]

    def loader(self, name: str, args: dict) -> dict:
        out = self.work / "loader" / f"{name}.result.json"
        out.unlink(missing_ok=True)
        t = time.monotonic()
        rc = self.call([sys.executable, str(Path(__file__).resolve()), "_loader", "--out", str(out), "--seconds",
                        str(self.scale.loader_seconds), *words({**self.common(), **args,
                                                                  "name": f"loader-{name}", "exist_ok": True})],
                       self.work / "loader" / f"{name}.out", self.work / "loader" / f"{name}.log")
        res = json.loads(out.read_text()) if out.exists() else {"status": "failed",
                                                                "reason": _tail(self.work / "loader" / f"{name}.log")}
        return {"rc": rc, "args": args, "cmd_wall_s": round(time.monotonic() - t, 1), **res}

    def part_sweep(self) -> list[Unit]:
        cs = {c.name: c.args(self.scale.tiny) for c in grid(self.scale.tiny, self.names)}
        for name, args in self.plan_configs().items():
            cs[name] = args  # measured the same way as the grid, in the same sweep, even where a grid point equals it
        cs = {n: {**a, **self.long_enough(a)} for n, a in cs.items()}
        return [Unit(n, "bounded-compiled" if a.get("compile") else "bounded",
                     lambda n=n, a=a: {"config": n, **self.bounded(self.work / "sweep" / n, a)}) for n, a in cs.items()]

    def part_spread(self) -> list[Unit]:
        c = next(c for c in GRID if c.name == self.spread_config)
        kind = "bounded-compiled" if c.args(self.scale.tiny).get("compile") else "bounded"
        return [Unit(n, kind, lambda i=i: {"config": c.name, **self.bounded(
            self.work / "spread" / f"{c.name}-{i}", c.args(self.scale.tiny), curve=True)})
            for i, n in zip((1, 2), spread_units(c.name), strict=False)]

    def part_workers(self) -> list[Unit]:
        return [Unit(n, "bounded-compiled" if a.get("compile") else "bounded",
                     lambda n=n, a=a: {"workers": a["workers"], **self.bounded(self.work / "workers" / n, a)})
                for n, a in workers_units(self.scale.tiny)]

    def part_compile(self) -> list[Unit]:
        return [Unit("compile", "compile", self.compile_unit)]

    def compile_unit(self) -> dict:
        c = next(c for c in GRID if c.name == self.compile_config)
        args = c.args(self.scale.tiny)
        cache = self.work / "compile" / "inductor-cache"
        shutil.rmtree(cache, ignore_errors=True)
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}
        eager = {k: v for k, v in args.items() if k != "compile"}
        rec: dict[str, Any] = {"config": c.name, "compile_mapped_off": "compile" not in args}
        for name, a in (("eager", eager), ("cold", args), ("warm", args)):
            rec[name] = self.bounded(self.work / "compile" / name, a, env=env)
        base = rec["eager"].get("first_steps_excess_s")
        for name in ("cold", "warm"):
            ex = rec[name].get("first_steps_excess_s")
            rec[f"cost_{name}_s"] = ex - base if ex is not None and base is not None else None
        return rec


def plan_unit(part: str) -> str:
    """The sweep unit of a fix part's applied plan: fix-safe -> plan-safe."""
    return "plan-" + part[4:]


def _tail(path: Path, n: int = 600) -> str | None:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie or a recycled pid is not our fix
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z" and "_fix" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------------------- commands
def cmd_run(a) -> int:
    parts = PARTS if not a.parts or a.parts == ["all"] else a.parts
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown part(s) {', '.join(sorted(unknown))}; parts: {', '.join(PARTS)}")
    r = Runner(a)
    old = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a unit's process is stopped with the runner
    try:
        return run_parts(r, parts, a.budget_s)
    finally:
        signal.signal(signal.SIGTERM, old)


def run_parts(r: Runner, parts: list[str], budget_s: float) -> int:
    print(f"h200-benchmark: parts {' '.join(parts)}; budget {budget_s:.0f} s; results {r.results}; "
          f"machine {r.machine['host']} ({r.machine['machine_id']}) {r.machine['gpu'] or 'no GPU'}", file=sys.stderr)
    pending: list[str] = []
    for part in ["dataset"] + [p for p in parts if p != "dataset"]:
        for u in r.units(part):
            label = f"{part}/{u.name}"
            if part != "dataset" and r.done(part, u.name):
                print(f"  {label}: done before, skipped", file=sys.stderr)
                continue
            if pending or r.left() < r.est(u.kind):
                pending.append(label)
                continue
            print(f"  {label}: running ({r.left():.0f} s left, ~{r.est(u.kind):.0f} s)", file=sys.stderr)
            before = probe()
            t = time.monotonic()
            try:
                rec = u.fn()
            except NotYet as e:
                print(f"  {e}", file=sys.stderr)
                pending.append(label)
                continue
            rec.update(kind=u.kind, machine=r.machine, finished=today(),
                       wall_s=round(rec.get("wall_s") or time.monotonic() - t, 1),
                       host_probe={"before": before, "after": probe()})
            r.record(part, u.name, rec)
            ips = rec.get("steady_ips") or rec.get("images_per_s")
            print(f"  {label}: {rec.get('status', 'done')} in {rec['wall_s']:.0f} s"
                  + (f", {ips:.1f} img/s" if ips else ""), file=sys.stderr)
        if part != "dataset" and pending:
            break  # parts depend on the ones before (plans feed loader and sweep): keep the order
    if pending:
        print(f"h200-benchmark: not finished: {', '.join(pending)} - run again (exit {CALL_AGAIN})", file=sys.stderr)
        return CALL_AGAIN
    print("h200-benchmark: all requested parts are recorded", file=sys.stderr)
    return 0


def probe() -> dict[str, float | None]:
    """The host's speed now (yolodoctor/profiling/hostprobe.py: a Python loop, a JPEG decode, a memory copy), or the
    error that stopped it (the record is still made)."""
    from yolodoctor.profiling.hostprobe import measure

    try:
        return measure()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:120]}


def cmd_fix_driver(a) -> int:
    """Detached: profile the defaults (bounded, as a user would), then fix --verify --apply on that run."""
    run = Path(a.dir) / "run"
    t0 = time.monotonic()
    y = [sys.executable, "-m", "yolodoctor"]
    rc_p = rc_f = None
    try:
        with open(run / "profile.json", "w") as o, open(run / "profile.log", "w") as e:
            rc_p = subprocess.call([*y, "profile", *a.words, "--out", str(run / "profile"), "--json"], stdout=o,
                                   stderr=e)
        with open(run / "fix.json", "w") as o, open(run / "fix.log", "w") as e:
            rc_f = subprocess.call([*y, "fix", str(run / "profile"), "--verify", "--apply", "--reps", str(a.reps),
                                    *(["--max-reps", str(a.max_reps)] if a.max_reps else []),
                                    "--json", *(["--allow-unsafe"] if a.unsafe else []),
                                    *[x for t in a.try_ for x in ("--try", t)]], stdout=o, stderr=e)
    finally:
        write_json(Path(a.dir) / "fix.done.json", {"rc_profile": rc_p, "rc_fix": rc_f, "started_s": t0,
                                                   "ended_s": time.monotonic()})
    return 0


def cmd_loader_probe(a) -> int:
    """The train loader alone: Ultralytics' own, built from the train arguments with no model training, iterated
    by yolodoctor's loader timing (mosaic on) for --seconds."""
    from ultralytics.cfg import smart_value
    from ultralytics.models.yolo.detect import DetectionTrainer

    from yolodoctor.profiling import loader

    args = {k: smart_value(v) for k, v in (w.split("=", 1) for w in a.words)}
    tr = DetectionTrainer(overrides=args)
    tr.args.workers = args.get("workers", 8)  # the trainer uses 0 on a CPU; a loader alone can use them
    tr.model = tr.get_model(cfg=args["model"], verbose=False)  # build_dataset reads the model's stride
    t = time.monotonic()
    res = loader.measure(tr, seconds=a.seconds, mosaic=True)
    res["build_and_iterate_s"] = time.monotonic() - t
    write_json(Path(a.out), {"status": "complete", **res})
    return 0


def cmd_grid(a) -> int:
    for c in grid(a.tiny):
        print(f"{c.name:22s} {' '.join(words(c.args(a.tiny))):55s} {c.why}")
    return 0


def scale_of(a) -> Scale:
    s = TINY if a.tiny else Scale()
    return replace(s, **{k: v for k, v in (("images", a.images), ("val_images", a.val_images), ("size", a.size),
                                           ("imgsz", a.imgsz), ("epochs", a.epochs), ("model", a.model),
                                           ("steps", a.steps), ("loader_seconds", a.loader_seconds),
                                           ("reps", a.reps)) if v is not None})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run parts (resumable)")
    r.add_argument("parts", nargs="*", help=f"parts: all or some of {' '.join(PARTS)}")
    r.add_argument("--budget-s", type=float, default=540.0, help="start no unit that would end after this")
    r.add_argument("--work", help="run directories, logs, dataset [bench/out/h200]")
    r.add_argument("--results", help="result JSON per part [bench/results/h200-benchmark]")
    r.add_argument("--redo", nargs="+", metavar="UNIT", help="run these units again: UNIT or PART/UNIT "
                   "(e.g. sweep/b64-w16 fix-safe/fix); once a machine: the same command again goes on from there")
    r.add_argument("--tiny", action="store_true", help="the CPU scale (see the docstring)")
    for k, t in (("images", int), ("val-images", int), ("size", str), ("imgsz", int), ("epochs", int),
                 ("model", str), ("steps", int), ("loader-seconds", float), ("reps", int)):
        r.add_argument(f"--{k}", type=t)
    r.add_argument("--grid", type=lambda s: s.split(","), help="sweep only these grid names (comma-separated)")
    r.add_argument("--max-reps", type=int, help="pass --max-reps to fix (the most repeats of an undecided candidate; "
                   "fix's default 4); 2 (no extra repeats) makes fix-unsafe take about 25 minutes")
    r.add_argument("--fix-try", action="append", metavar="KEY=VALUE", help="pass --try to fix (tiny runs)")
    r.add_argument("--spread-config", default=SPREAD_DEFAULT, choices=[c.name for c in GRID],
                   help="the configuration run twice (another than the default is recorded beside it)")
    r.add_argument("--compile-config", default="b64-w16-ro", choices=[c.name for c in GRID if c.compile])
    r.add_argument("--py-spy", type=float, default=0, metavar="SECONDS", help="sample each bounded run's training "
                   "process with py-spy for SECONDS in its steady window (bench/pyspy_probe.py; py-spy on PATH)")
    g = sub.add_parser("grid", help="print the sweep grid")
    g.add_argument("--tiny", action="store_true")
    f = sub.add_parser("_fix")  # internal: the detached fix driver
    f.add_argument("dir")
    f.add_argument("--reps", type=int, default=2)
    f.add_argument("--max-reps", type=int)
    f.add_argument("--unsafe", action="store_true")
    f.add_argument("--try", dest="try_", action="append", default=[])
    f.add_argument("--words", nargs="+", default=[])
    lp = sub.add_parser("_loader")  # internal: the loader probe
    lp.add_argument("--out", required=True)
    lp.add_argument("--seconds", type=float, default=20.0)
    lp.add_argument("words", nargs="*")
    a = ap.parse_args(argv)
    if a.cmd == "run":
        a.scale = scale_of(a)
        tiny_dir = ROOT / "bench" / "out" / "h200-tiny"
        a.work = a.work or str(tiny_dir if a.tiny else WORK)
        a.results = a.results or str(tiny_dir / "results" if a.tiny else RESULTS)
        return cmd_run(a)
    return {"grid": cmd_grid, "_fix": cmd_fix_driver, "_loader": cmd_loader_probe}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
