"""The planner: turn a diagnosis into a plan of concrete changes that respects what this machine can hold.

Each finding's fix proposes changes; the planner keeps, per key, the proposal of the finding with the largest
estimated gain, then checks each change against measured constraints:

  workers   at most the cores minus one, and the prefetch queue (workers x 4 x batch images) must fit /dev/shm
  batch     at most nbs (above it the optimisation changes: unsafe), and the measured peak memory scaled to the new
            batch must stay under MEMORY_CEILING of the GPU
  cache     'ram' only where check measured that it fits (detection: Ultralytics silently trains uncached
            otherwise; classification: it has no such check and caches full-resolution images, whatever the RAM),
            and only where its gain over the planned epochs (beyond the plan's added workers) repays the fill
  amp=bf16  only on compute capability 8.0 and newer
  compile   only on CUDA, and only where the gain over the planned run outweighs the one-off compilation;
            'reduce-overhead' (CUDA graphs) only where the planned batch trains without gradient accumulation
            (accumulate = round(nbs / batch) == 1): with accumulation, cudagraph trees overwrite the outputs of one
            micro-batch with the next and the step crashes ("accessing tensor output of CUDAGraphs that has been
            overwritten", pytorch/pytorch#169545; seen on the H200 at batch 16). Below that it becomes
            compile=True (inductor without CUDA graphs); where the batch change of the same plan is what removes the
            accumulation, the compile change `requires` it and is trialled on top of it. Where the plan also turns
            deterministic off, compile requires that too (_compile_without_determinism: inductor is handicapped in
            deterministic mode)

Unsafe changes (those that change what is trained, or that must be proven by a trial, like cudnn.benchmark) are
kept only with ``allow_unsafe``; a change that alters the optimisation (``changes_training``: the effective batch,
nbs, precision) is marked unsafe here whatever its rule said, and its trial must show loss parity
(fixing/parity.py). Gains are upper bounds taken from each rule and do not add up: `fix --verify` measures what the
plan really does.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from yolodoctor.findings import Finding
from yolodoctor.record.settings import Settings

MEMORY_CEILING = 0.8
# changes that move the loader's ceiling, not the GPU side's; "val" moves neither (it is not in a steady window)
LOADER_SIDE = {"workers", "cache", "val"}
LOADER_REASON = "planner loader-capacity"  # the workers change the planner adds for a plan that outruns its loader
PREFETCH_FACTOR = 4
# What a plan may change; nothing else reaches a relaunched training.
ALLOWED = {
    "args": {"amp", "workers", "cache", "batch", "compile", "deterministic", "channels_last", "val", "nbs"},
    "env": {"PYTORCH_CUDA_ALLOC_CONF"},
    "torch_flags": {"cudnn.benchmark", "cudnn.deterministic", "cudnn.allow_tf32", "cuda.matmul.allow_tf32"},
}


@dataclass
class Change:
    kind: str  # "args" | "env" | "torch_flags"
    key: str
    before: Any
    after: Any
    reason: str  # "LA201 host-bound"
    safety: str = "safe"
    changes_training: bool = False
    seconds_saved_per_epoch: float | None = None
    one_off_seconds: float | None = None
    note: str | None = None
    requires: list[str] = field(default_factory=list)  # keys of other changes of the plan this one needs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def split(changes: list[Change]) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """The train arguments, environment variables and torch flags a list of changes sets."""
    return ({c.key: c.after for c in changes if c.kind == "args"},
            {c.key: str(c.after) for c in changes if c.kind == "env"},
            {c.key: c.after for c in changes if c.kind == "torch_flags"})


class ChangeSet:
    """What a list of ``changes`` sets, by kind (shared by Plan and a trial's Candidate)."""

    changes: list[Change]

    @property
    def args(self) -> dict[str, Any]:
        return split(self.changes)[0]

    @property
    def env(self) -> dict[str, str]:
        return split(self.changes)[1]

    @property
    def torch_flags(self) -> dict[str, Any]:
        return split(self.changes)[2]


@dataclass
class Plan(ChangeSet):
    changes: list[Change] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)  # proposals refused, and why
    fallbacks: list[Change] = field(default_factory=list)  # safe alternatives to unsafe changes, trialled too
    epochs: float | None = None
    epoch_s: float | None = None
    nbs: float = 64.0  # the run's nominal batch: whether a batch accumulates gradients (CUDA graphs cannot)

    def run_saving(self) -> dict[str, float | None]:
        """Upper bound over the planned run: the most one change with an estimated gain can save, its gain x epochs
        less its own one-off cost (gains do not add up; a change's one-off cost is paid only where it is applied, so
        another change's compilation does not cut what a larger batch alone saves)."""
        gains = [c for c in self.changes if c.seconds_saved_per_epoch]
        if not gains or not self.epochs:
            return {"best_single_per_epoch": max((c.seconds_saved_per_epoch or 0.0 for c in gains), default=None),
                    "one_off": 0, "planned_run_upper_bound": None}
        epochs = self.epochs
        best = max(gains, key=lambda c: (c.seconds_saved_per_epoch or 0.0) * epochs - (c.one_off_seconds or 0))
        one_off = best.one_off_seconds or 0
        return {"best_single_per_epoch": best.seconds_saved_per_epoch, "one_off": one_off,
                "planned_run_upper_bound": (best.seconds_saved_per_epoch or 0.0) * epochs - one_off}

    def to_dict(self) -> dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.changes], "dropped": self.dropped,
                "fallbacks": [c.to_dict() for c in self.fallbacks], "args": self.args,
                "env": self.env, "torch_flags": self.torch_flags, "epochs": self.epochs, "epoch_s": self.epoch_s,
                "saving": self.run_saving()}


def _precision(amp: Any) -> str:
    v = str(amp).lower()
    return "bf16" if v == "bf16" else "fp32" if v in ("false", "fp32", "0", "none") else "fp16"


def changes_training(c: Change, nbs: float | None) -> bool:
    """Whether a change alters what is optimised: the effective batch above nbs, nbs itself,
    or the precision. Such a change is unsafe and is kept only after a loss-parity trial."""
    if c.kind != "args":
        return False
    if c.key == "batch":  # Ultralytics accumulates to nbs: what is optimised changes with batch x accumulate
        nbs = nbs or 64
        if not isinstance(c.after, (int, float)) or c.after < 1:
            return False  # autobatch: the batch is chosen at run time (and fix --verify reports what ran)
        if isinstance(c.before, (int, float)) and c.before >= 1:
            return effective_batch(nbs, c.after) != effective_batch(nbs, c.before)
        return effective_batch(nbs, c.after) != nbs
    if c.key == "nbs":
        return c.after != c.before
    if c.key == "amp":
        return c.before is not None and _precision(c.after) != _precision(c.before)
    return False


def mark_training_change(c: Change, nbs: float | None) -> Change:
    """Mark a change that alters the optimisation unsafe, whatever its source said: it then needs --allow-unsafe
    and a loss-parity trial."""
    if changes_training(c, nbs):
        c.safety, c.changes_training = "unsafe", True
    return c


def _nbs(facts: dict[str, Any], settings: Settings) -> float:
    return facts.get("settings.nbs") or settings.get("nbs") or 64


def _queue_fits(workers: float, batch: Any, facts: dict[str, Any]) -> bool:
    """Whether the prefetch queue (workers x PREFETCH_FACTOR batches of imgsz^2 x 3 bytes) fits /dev/shm; True where
    a figure is missing."""
    imgsz, shm = facts.get("settings.imgsz"), facts.get("mem.shm_free_min")
    return not (batch and imgsz and shm and workers * PREFETCH_FACTOR * batch * imgsz * imgsz * 3 > shm)


def _current(kind: str, key: str, settings: Settings, args: dict[str, Any]) -> Any:
    if kind == "args":
        if key in args:
            return args[key]
        mapping = {"batch": "batch", "workers": "workers_requested", "amp": "amp_requested",
                   "compile": "compile_requested", "deterministic": "deterministic", "cache": "cache"}
        return settings.get(mapping.get(key, key))
    if kind == "torch_flags":
        return settings.get({"cudnn.benchmark": "cudnn_benchmark", "cudnn.allow_tf32": "tf32_cudnn",
                             "cuda.matmul.allow_tf32": "tf32_matmul"}.get(key, key))
    return None


def plan(findings: list[Finding], facts: dict[str, Any], settings: Settings, args: dict[str, Any] | None = None,
         *, allow_unsafe: bool = False) -> Plan:
    args = args or {}
    p = Plan(epochs=facts.get("run.epochs"), epoch_s=facts.get("run.epoch_s"), nbs=_nbs(facts, settings))
    proposals: dict[tuple[str, str], list[Change]] = {}
    for f in findings:
        if f.fix is None:
            continue
        for kind in ("args", "env", "torch_flags"):
            for key, value in getattr(f.fix, kind).items():
                if value is None:
                    p.dropped.append({"key": key, "reason": f"{f.id}: its value could not be computed"})
                    continue
                proposals.setdefault((kind, key), []).append(
                    Change(kind, key, _current(kind, key, settings, args), value, f"{f.id} {f.name}", f.fix.safety,
                           f.fix.changes_training, f.fix.seconds_saved_per_epoch, f.fix.one_off_seconds, f.fix.note))
    # per key, the proposal with the largest estimated gain among those this machine and --allow-unsafe permit
    # (batch first: the workers' /dev/shm check needs the planned batch)
    chosen: dict[tuple[str, str], Change] = {}
    for kk in sorted(proposals, key=lambda kk: kk != ("args", "batch")):
        ranked = sorted(proposals[kk], key=lambda c: -(c.seconds_saved_per_epoch or 0))
        pick = None
        for c in ranked:
            mark_training_change(c, facts.get("settings.nbs"))  # whatever the rule said: a loss-parity trial
            why = ("not on the allow-list of what yolodoctor may change" if c.key not in ALLOWED[c.kind]
                   else _refuse(c, facts, settings, allow_unsafe, chosen))
            if pick is not None:
                p.dropped.append({"key": c.key, "value": c.after, "reason": f"{c.reason}: {pick.reason} proposes "
                                  "more gain" if not why else f"{c.reason}: {why}"})
            elif why:
                p.dropped.append({"key": c.key, "value": c.after, "reason": f"{c.reason}: {why}"})
            elif c.before == c.after:  # the best permitted proposal is what runs now: nothing to change
                p.dropped.append({"key": c.key, "value": c.after, "reason": f"{c.reason}: already set"})
                pick = c
            else:
                pick = chosen[kk] = c
                p.changes.append(c)
        if pick is not None and pick.changes_training and kk in chosen:
            # an unsafe winner that fails its loss parity must not cost the key: trial the best safe one too
            safe = next((c for c in ranked if c is not pick and not c.changes_training and c.before != c.after
                         and c.key in ALLOWED[c.kind] and not _refuse(c, facts, settings, allow_unsafe, chosen)),
                        None)
            if safe is not None:
                p.fallbacks.append(safe)
    _cache_repays(p, facts)  # before the workers the planner adds to feed the plan: they feed what stays in it
    p.changes.sort(key=lambda c: -(c.seconds_saved_per_epoch or 0))
    _cuda_graphs_without_accumulation(p, facts, settings, args)
    _compile_without_determinism(p)
    _loader_keeps_up(p, facts, settings)
    return p


def _cache_repays(p: Plan, facts: dict[str, Any]) -> None:
    """Keep cache='ram' only where what it saves over the planned epochs repays filling it (its one-off cost, from
    check: every train and val image decoded once before the first step). Where the plan also raises the workers,
    both act on the same data wait and the cache saves only what the workers leave: with the loader setting the
    pace, an epoch of E s (a share w of it waiting for data) takes about max(C, E x before/after) with more workers,
    C = E x (1 - w) being the GPU side's part, and C with the cache. Measured on an H100 host with 16 cores
    (1,500 1080p PNGs, 3 epochs at batch 32, 2026-12-07): the fill took 25 s; 15 workers instead of 8 ran 186
    images/s and the cache with 15 workers 364, so the cache added 3.9 s an epoch, 12 s over the training: less
    than its fill. The cache's gain becomes that remainder, so verify's budget and order see it. Runs on the rules'
    proposals, before the planner adds workers to feed the plan (_loader_keeps_up), which then feed only what is
    kept."""
    cache = next((c for c in p.changes if c.kind == "args" and c.key == "cache" and c.after in ("ram", True)), None)
    if cache is None or not cache.seconds_saved_per_epoch:
        return
    gain, why, beyond = cache.seconds_saved_per_epoch, None, ""
    workers = next((c for c in p.changes if c.kind == "args" and c.key == "workers"), None)  # on the same wait
    epoch_s, wait = facts.get("run.epoch_s"), facts.get("run.data_wait_share")
    if workers is not None and isinstance(workers.before, (int, float)) and isinstance(workers.after, (int, float)) \
            and workers.before > 0 and workers.after > workers.before and epoch_s and wait is not None:
        gpu_side = epoch_s * (1.0 - wait)
        left = max(gpu_side, epoch_s * workers.before / workers.after) - gpu_side
        if left < gain:
            gain = cache.seconds_saved_per_epoch = round(left, 2)
            _add_note(cache, f"the gain is what it adds to workers={workers.after}")
            beyond = f" (what it saves beyond workers={workers.after})"
            if gain <= 0:
                why = f"workers={workers.after} leave it no data wait to remove (at the measured rate per worker)"
    if why is None and p.epochs and cache.one_off_seconds and gain * p.epochs < cache.one_off_seconds:
        why = (f"{gain:.1f} s an epoch x {p.epochs:.0f} epochs does not repay the {cache.one_off_seconds:.0f} s "
               f"filling the cache takes{beyond}")
    if why is None:
        return
    p.changes.remove(cache)
    p.dropped.append({"key": "cache", "value": cache.after, "reason": f"{cache.reason}: {why}"})


def _compile_without_determinism(p: Plan) -> None:
    """Where the plan turns deterministic off, its compile change requires that, so that compile is trialled the way it
    would run. Under torch.use_deterministic_algorithms(True) (Ultralytics' deterministic=True) inductor neither splits
    reductions nor picks reduction kernels by benchmark (torch/_inductor/ir.py: supports_split;
    runtime/triton_heuristics.py: filtered reduction configs), so a compiled trial at deterministic=True measures a
    handicapped compile. Measured on an NVIDIA H100 with 16 cores (2026-12-05, one bounded run each): batch 64 with
    16 workers ran 1332 images/s eager, 1124 compiled and 1144 with CUDA graphs at deterministic=True, while batch
    64, 14 workers, CUDA graphs and deterministic=False ran 1448."""
    comp = next((c for c in p.changes if c.kind == "args" and c.key == "compile" and c.after), None)
    det = next((c for c in p.changes if c.kind == "args" and c.key == "deterministic" and c.after is False), None)
    if comp is None or det is None or "deterministic" in comp.requires:
        return
    comp.requires.append("deterministic")
    _add_note(comp, "tried with deterministic=False: in deterministic mode inductor neither splits reductions nor "
                    "autotunes them")


def _loader_keeps_up(p: Plan, facts: dict[str, Any], settings: Settings) -> None:
    """The plan's changes can lift the GPU side above what the loader delivers: at batch 16 the H200 defaults are
    host-bound with no data wait, and batch 64 then meets the 8 workers' ~550 images/s (27% data wait after fix
    --apply). Where the throughput the plan projects (images per epoch / (epoch time - the largest estimated saving))
    exceeds 90% of the loader's measured capacity, plan enough workers for 1.1x the projection at the measured rate
    per worker, at most the usable cores minus 2 (the training thread and the pin-memory thread
    keep a core: DL205), within /dev/shm. The change requires the one that creates the demand, so its trial runs on
    top of it (and fix --verify trials the plan's other changes on top of both: fixing/candidates.candidates)."""
    if facts.get("run.device") != "cuda":
        return
    cap, now = facts.get("loader.capacity_images_per_s"), facts.get("settings.workers")
    epoch_s, images = facts.get("run.epoch_s"), facts.get("run.images_per_epoch")
    driver = max((c for c in p.changes if c.seconds_saved_per_epoch), key=lambda c: c.seconds_saved_per_epoch or 0.0,
                 default=None)
    if not (cap and now and epoch_s and images and driver) or driver.key == "workers" \
            or any(c.kind == "args" and c.key == "workers" for c in p.changes):
        return
    projected = images / max(epoch_s - driver.seconds_saved_per_epoch, 1e-9)
    if projected <= 0.9 * cap:
        return
    per_worker = cap / now
    cores = facts.get("cpu.usable") or facts.get("cpu.count") or 0
    want = min(math.ceil(1.1 * projected / per_worker), int(cores) - 2)
    batch = next((c.after for c in p.changes if c.kind == "args" and c.key == "batch"), facts.get("run.batch"))
    while want > now and not _queue_fits(want, batch, facts):
        want -= 1
    if want <= now:
        p.dropped.append({"key": "workers", "reason": f"loader capacity: the plan projects {projected:.0f} images/s, "
                          f"above the {cap:.0f} that {now:.0f} workers deliver, and no more workers fit "
                          f"({cores:.0f} cores less 2, /dev/shm)"})
        return
    c = Change("args", "workers", settings.get("workers_requested", now), want, LOADER_REASON,
               note=(f"the plan projects up to {projected:.0f} images/s ({driver.key}={driver.after}); {now:.0f} "
                     f"workers deliver {cap:.0f} alone, {per_worker:.0f} each"),
               requires=[driver.key] if driver.kind == "args" else [])
    p.changes.append(c)


def requirements(c: Change, changes: list[Change], seen: tuple = ()) -> list[Change]:
    """The changes ``c`` requires, and theirs, in plan order (a cycle stops where it closes)."""
    out: list[Change] = []
    for d in changes:
        if d is not c and d.key in c.requires and d.key not in seen:
            for x in [*requirements(d, changes, (*seen, c.key)), d]:
                if all(x is not y for y in out):
                    out.append(x)
    return out


def accumulate(nbs: float, batch: float) -> int:
    """Ultralytics' gradient accumulation for a batch (trainer.py: max(round(nbs / batch), 1))."""
    return max(round(nbs / batch), 1)


def effective_batch(nbs: float, batch: float) -> float:
    """Images per optimizer step."""
    return batch * accumulate(nbs, batch)


def cuda_graphs_refusal(p: Plan, facts: dict[str, Any], settings: Settings) -> str | None:
    """Why the plan's compile='reduce-overhead' would crash (gradient accumulation at the planned batch), or None."""
    if not any(c.kind == "args" and c.key == "compile" and c.after == "reduce-overhead" for c in p.changes):
        return None
    nbs = _nbs(facts, settings)
    planned = next((c.after for c in p.changes if c.kind == "args" and c.key == "batch"), None)
    if not isinstance(planned, (int, float)) or planned < 1:
        planned = facts.get("run.batch") or settings.get("batch")
    if not isinstance(planned, (int, float)) or planned < 1:
        return "the batch is chosen at run time (autobatch), so gradient accumulation cannot be ruled out"
    if accumulate(nbs, planned) > 1:
        return (f"at batch {planned:.0f} Ultralytics accumulates {accumulate(nbs, planned)} micro-batches "
                f"(nbs={nbs:.0f}) and CUDA graphs crash with gradient accumulation (pytorch/pytorch#169545)")
    return None


def _cuda_graphs_without_accumulation(p: Plan, facts: dict[str, Any], settings: Settings,
                                      args: dict[str, Any]) -> None:
    ro = next((c for c in p.changes if c.kind == "args" and c.key == "compile" and c.after == "reduce-overhead"),
              None)
    if ro is None:
        return
    why = cuda_graphs_refusal(p, facts, settings)
    if why:
        if str(ro.before).lower() in ("true", "default"):  # already compiled without CUDA graphs: nothing left
            p.changes.remove(ro)
            p.dropped.append({"key": "compile", "value": "reduce-overhead", "reason": f"{ro.reason}: {why}"})
            return
        ro.after = True
        ro.note = f"compile='reduce-overhead' becomes compile=True: {why}"
        return
    nbs = _nbs(facts, settings)
    now = facts.get("run.batch") or _current("args", "batch", settings, args)
    if any(c.kind == "args" and c.key == "batch" for c in p.changes) and isinstance(now, (int, float)) \
            and now >= 1 and accumulate(nbs, now) > 1:
        ro.requires = ["batch"]
        _add_note(ro, f"needs the batch change: at batch {now:.0f} gradient accumulation would crash CUDA graphs "
                      "(pytorch/pytorch#169545)")


def _add_note(c: Change, text: str) -> None:
    """Append to a change's note (notes are joined with '; ')."""
    c.note = f"{c.note}; {text}" if c.note else text


def _refuse_workers(c: Change, facts: dict[str, Any], proposals: dict) -> str | None:
    cores = facts.get("cpu.usable") or facts.get("cpu.count")
    if cores and c.after > cores - 1:
        return f"{c.after} workers exceed the {cores:.0f} cores minus one"
    batch = proposals[("args", "batch")].after if ("args", "batch") in proposals else facts.get("run.batch")
    if not _queue_fits(c.after, batch, facts):
        return "the prefetch queue would not fit /dev/shm"
    return None


def _refuse_batch(c: Change, facts: dict[str, Any], allow_unsafe: bool) -> str | None:
    nbs = facts.get("settings.nbs") or 64
    if c.after > nbs and not allow_unsafe:
        return f"batch above nbs={nbs:.0f} changes the effective batch (unsafe)"
    device = facts.get("run.device")
    frac, now = facts.get("gpu.mem_fraction_peak"), facts.get("run.batch")
    if device == "cuda" and frac and now and frac * c.after / now > MEMORY_CEILING:
        return (f"peak memory {frac:.0%} at batch {now:.0f} scales to {frac * c.after / now:.0%} at "
                f"{c.after}, above {MEMORY_CEILING:.0%}")
    if device == "cuda" and not frac:
        return "GPU memory per image was not measured"
    return None


def _refuse_cache(c: Change, facts: dict[str, Any]) -> str | None:
    if c.after not in ("ram", True):
        return None
    fits = facts.get("check.cache_ram_fits")
    if fits is None:
        return "RAM for the cache was not measured (run yolodoctor check with the same data=)"
    if not fits:
        return "the cache does not fit in RAM"
    return None


def _refuse_compile(c: Change, facts: dict[str, Any]) -> str | None:
    if not c.after:
        return None
    if facts.get("run.device") != "cuda":
        return "compile pays off only on CUDA"
    epochs, gain, epoch_s = facts.get("run.epochs"), c.seconds_saved_per_epoch, facts.get("run.epoch_s")
    if gain is not None and epochs and c.one_off_seconds and gain * epochs < c.one_off_seconds:
        return f"{gain:.1f} s/epoch x {epochs:.0f} epochs does not repay {c.one_off_seconds:.0f} s of compilation"
    if gain is None and epochs and epoch_s and c.one_off_seconds and epoch_s * epochs < c.one_off_seconds:
        # no estimate of the gain, but it cannot exceed the epochs' whole time
        return (f"the whole training ({epochs:.0f} epochs x {epoch_s:.0f} s) is shorter than the "
                f"{c.one_off_seconds:.0f} s compilation costs: it cannot repay it")
    return None


def _refuse_arg(c: Change, facts: dict[str, Any], allow_unsafe: bool, proposals: dict) -> str | None:
    """Why this machine or this run rules out a train argument's change, if it does."""
    if c.key == "workers":
        return _refuse_workers(c, facts, proposals)
    if c.key == "batch":
        return _refuse_batch(c, facts, allow_unsafe)
    if c.key == "cache":
        return _refuse_cache(c, facts)
    if c.key == "amp" and c.after == "bf16" and (facts.get("gpu.cc_major") or 0) < 8:
        return "bf16 needs compute capability 8.0 or newer"
    if c.key == "compile":
        return _refuse_compile(c, facts)
    return None


def _refuse(c: Change, facts: dict[str, Any], settings: Settings, allow_unsafe: bool,
            proposals: dict) -> str | None:
    why = _refuse_arg(c, facts, allow_unsafe, proposals) if c.kind == "args" else None
    if why is not None:
        return why
    if c.safety == "unsafe" and not allow_unsafe:
        return "unsafe (changes training or needs a trial): only with --allow-unsafe"
    return None
