"""The GPU scenario matrix (bench/scenarios.yaml): for each training shape, `profile`, a sweep over the grid fixed in
the YAML, `fix --verify --apply` and the original training run whole; then one table.

    python3 bench/scenarios.py run [--only NAME,...] [--seconds 540]   (repo root, on the GPU machine)
    python3 bench/scenarios.py report [DIR]                            (default: bench/results/scenarios)
    python3 bench/scenarios.py plan [--budget-s 1500]                   what is left, from the measured stage costs

``run`` is resumable at two levels (its state lives under $SCENARIOS_WORK, default bench/out). On one machine, every
stage runs detached (its own process session) in the scenario's folder there, not in the repository, and leaves
``STAGE.rc`` when it ends; a call waits at most ``--seconds`` and exits 3 while a stage still runs, so the next call
goes on where this one stopped. Across machines, a scenario whose results are already in
bench/results/scenarios/NAME (committed) is not run again if they were measured on this code (code_version, kept in
its machine.json); `plan` lists the others. What a finished scenario leaves (profiles' records, fix's
JSON, no traces or weights) is copied to bench/results/scenarios/NAME. Where $OUT is set (a folder of your choice),
every call leaves there two archives: scenarios.tgz (the finished scenarios, as under bench/results/) and
stages.tgz (the stages' logs, return codes and JSON so far, and each finished run directory's profile.json, step
events and samples, so a machine taken back mid-scenario still leaves the runs it finished, and a window can be
derived again).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "bench" / "scenarios.yaml"
WORK = Path(os.environ.get("SCENARIOS_WORK") or ROOT / "bench" / "out")  # datasets/ and scenarios/: the stages' state
RESULTS = ROOT / "bench" / "results" / "scenarios"
STAGES = ("profile", "grid", "fix", "original")
LIGHT_HZ = 1.0  # the original whole training is recorded as lightly as fix's applied run (fixing/apply.LIGHT_HZ)
NOISE = 0.05  # "never slower than the original beyond the measured noise": the default when trials measured none


def code_version() -> str:
    """The product's code as the matrix measures it: a digest of yolodoctor/'s Python and the rule files (the same
    on the GPU machine's copy of the tree, which has no git history). A scenario counts as measured on this code
    only where its machine.json names this digest."""
    import hashlib

    h = hashlib.sha256()
    files = sorted([*(ROOT / "yolodoctor").rglob("*.py"), *(ROOT / "rules").rglob("*.yaml")])
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def current(name: str) -> bool:
    """Whether scenario ``name`` has results measured on this code (code_version)."""
    return (RESULTS / name / "scenario.json").exists() and _j(RESULTS / name / "machine.json").get("code") == \
        code_version()


def load(path: Path = GRID) -> list[dict]:
    return yaml.safe_load(path.read_text())["scenarios"]


def kv(args: dict) -> list[str]:
    return [f"{k}={v}" for k, v in args.items()]


def dataset_dir(ds: dict) -> Path:
    return WORK / "datasets" / f"{ds['images']}-{ds['format']}-{ds['size']}"


def stage_commands(sc: dict, d: Path) -> dict[str, str]:
    """The shell command of each stage of scenario ``sc`` working in ``d``."""
    ds = dataset_dir(sc["dataset"])
    yd = f"{sys.executable} -m yolodoctor"
    def train(over: dict | None = None) -> str:
        return " ".join(kv({**sc["args"], **(over or {}), "data": ds / "data.yaml", "plots": False,
                            "project": d / "ul"}))

    make = (f"[ -f {ds}/.yolodoctor-dataset ] || {yd} make-dataset {ds} --images {sc['dataset']['images']} "
            f"--format {sc['dataset']['format']} --size {sc['dataset']['size']} --force > /dev/null")
    grid = "; ".join(f"rm -rf {d}/grid-{i}; {yd} profile {train(g)} name=grid-{i} --no-trace "
                     f"--loader-seconds 0 --out {d}/grid-{i} --json > {d}/grid-{i}.json"
                     for i, g in enumerate(sc["grid"]))
    return {"profile": f"{make} && rm -rf {d}/profile && {yd} profile {train()} name=profile --out {d}/profile --json "
                       f"> {d}/profile.out.json",
            "grid": grid + "; true",
            "fix": f"{yd} fix {d}/profile --verify --apply --json > {d}/fix.json",
            "original": f"rm -rf {d}/original; {yd} profile {train()} name=original --all --no-trace "
                        f"--loader-seconds 0 --sample-hz {LIGHT_HZ:g} --out {d}/original --json > {d}/original.json"}


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
        return True
    except (OSError, ValueError):
        return False


def step(d: Path, stage: str, command: str) -> bool:
    """Start ``stage`` detached unless it runs or ran; True once it has ended."""
    if (d / f"{stage}.rc").exists():
        return True
    pid = d / f"{stage}.pid"
    if pid.exists() and _alive(pid):
        return False
    t0 = time.time()
    wrapped = f"({command}) 2> {d}/{stage}.log; echo $? > {d}/{stage}.rc.tmp; " \
              f"echo {{\\\"seconds\\\": $(( $(date +%s) - {int(t0)} ))}} > {d}/{stage}.time.json; " \
              f"mv {d}/{stage}.rc.tmp {d}/{stage}.rc"
    p = subprocess.Popen(["bash", "-c", wrapped], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, cwd=d,
                         env={**os.environ, "YOLO_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    pid.write_text(str(p.pid))
    print(f"{d.name}: {stage} started", flush=True)
    return False


def collect(sc: dict, d: Path, dest: Path) -> None:
    """The small records of a finished scenario: each run's profile.json, step events and sampler stream
    (``_keep_run``; a window can be derived again from the steps), the commands' JSON, fix's log tail."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("profile", "original", *(f"grid-{i}" for i in range(len(sc["grid"])))):
        _keep_run(d / name, dest, name)
    for f in ("profile.out.json", "fix.json", *(f"{s}.time.json" for s in STAGES)):
        if (d / f).exists():
            shutil.copy(d / f, dest / f)
    if (d / "fix.log").exists():
        (dest / "fix.log").write_bytes((d / "fix.log").read_bytes()[-100_000:])
    try:
        applied = (json.loads((d / "fix.json").read_text()).get("applied") or {}).get("run_dir")
    except (OSError, ValueError):
        applied = None
    applied = (d / applied) if applied else None  # fix writes it relative to where it ran: the scenario's folder
    if applied:
        _keep_run(applied, dest, "applied")
    (dest / "machine.json").write_text(json.dumps(machine(d / "original"), indent=1) + "\n")
    (dest / "scenario.json").write_text(json.dumps(sc, indent=1) + "\n")


def _keep_run(run_dir: Path, dest: Path, name: str) -> None:
    """A run directory's record as ``NAME.profile.json``, its step events as ``NAME.events.jsonl.gz`` and its
    sampler's stream (CPU, workers, GPU) as ``NAME.samples.jsonl.gz``."""
    if (run_dir / "profile.json").exists():
        shutil.copy(run_dir / "profile.json", dest / f"{name}.profile.json")
    for stream in ("events", "samples"):
        if (run_dir / f"{stream}.jsonl").exists():
            with open(run_dir / f"{stream}.jsonl", "rb") as src, \
                    gzip.open(dest / f"{name}.{stream}.jsonl.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)


def machine(run_dir: Path) -> dict:
    """The machine a run directory was recorded on: its GPU's name and the CPUs it saw (the sampler's first record),
    and the day it started (its profile.json)."""
    start: dict = {}
    for name in ("samples.jsonl", "samples.jsonl.gz"):
        if (run_dir / name).exists():
            opener = gzip.open if name.endswith(".gz") else open
            with opener(run_dir / name, "rt") as fh:
                start = next((r for r in map(json.loads, fh) if r.get("type") == "sampler_start"), {})
            break
    gpu = start.get("gpu") or {}
    return {"gpu": gpu.get("name"), "cpus": start.get("cpu_count"),
            "date": str(_j(run_dir / "profile.json").get("created") or "")[:10] or None, "code": code_version()}


SCENARIO_LIMIT_S = 480  # no scenario above 8 minutes on one machine


def cost(sc: dict) -> float | None:
    """A scenario's measured seconds, all stages (``cost_s`` in scenarios.yaml), or None until every stage has run
    (a part is no plan: the stages left are often the long ones)."""
    c = sc.get("cost_s") or {}
    return float(sum(c[k] for k in STAGES)) if all(k in c for k in STAGES) else None


def cost_so_far(sc: dict) -> str:
    """The stages measured of a scenario not measured whole ("profile 140 s, grid 194 s so far"), else ""."""
    part = sc.get("cost_s") or {}
    if not part or cost(sc) is not None:
        return ""
    return ", ".join(f"{k} {v:.0f} s" for k, v in part.items()) + " so far"


def plan(budget_s: float | None = None) -> list[str]:
    """What is left to run (never run, or run on other code than this), in order, each with its measured cost (or
    "not measured yet"), whether it stays within SCENARIO_LIMIT_S, and which fit ``budget_s`` (known costs first
    come, first served; an unmeasured one is run only where a measured one does not take the budget first)."""
    lines, left = [], budget_s
    for sc in load():
        if current(sc["name"]):
            continue
        c = cost(sc)
        what = f"{c:.0f} s" + (" (over the 8-minute limit)" if c > SCENARIO_LIMIT_S else "") if c is not None else \
            "not measured yet" + (f" ({part})" if (part := cost_so_far(sc)) else "")
        if (RESULTS / sc["name"] / "scenario.json").exists():
            what += ", ran on other code"
        fits = ""
        if left is not None:
            if c is None or c <= left:
                fits = " - fits" if c is not None else " - runs if time is left"
                left -= c or 0.0
            else:
                fits = " - does not fit"
        lines.append(f"{sc['name']}: {what}{fits}")
    return lines


def run(only: list[str] | None, seconds: float, stages: tuple[str, ...] = STAGES,
        budget_s: float | None = None, again: tuple[str, ...] = ()) -> int:
    """Run the scenarios (``only``: those named, in that order) stage by stage; ``stages``: run only these now (the
    others are left for a later call), in the order of STAGES. A scenario is collected once all its stages have
    ended. ``budget_s``: the seconds the scenarios may take in all; a scenario not yet started whose measured cost
    exceeds what is left is not started. A scenario whose kept results were measured on other code (``current``)
    runs again; ``again``: scenarios run again although their results are on this code. New results replace the kept
    ones."""
    t0 = time.monotonic()
    scenarios = load()
    if only:  # in the order given: the scenarios that matter most this call first
        scenarios = sorted((sc for sc in scenarios if sc["name"] in only), key=lambda sc: only.index(sc["name"]))
    for sc in scenarios:
        if current(sc["name"]) and sc["name"] not in again:
            continue  # finished on this code, on an earlier machine
        d = WORK / "scenarios" / sc["name"]
        started = d.exists() and any(d.glob("*.pid"))
        left = budget_s - (time.monotonic() - t0) if budget_s is not None else None
        if not started and left is not None and (c := cost(sc)) is not None and c > left:
            print(f"{sc['name']}: not started, its {c:.0f} s exceed the {left:.0f} s left", flush=True)
            continue
        d.mkdir(parents=True, exist_ok=True)
        cmds = stage_commands(sc, d)
        for stage in (s for s in STAGES if s in stages):
            while not step(d, stage, cmds[stage]):
                if time.monotonic() - t0 > seconds:
                    print(f"{sc['name']}: {stage} still running; call again to go on", flush=True)
                    return 3
                time.sleep(5)
            rc = (d / f"{stage}.rc").read_text().strip()
            print(f"{sc['name']}: {stage} rc={rc}", flush=True)
        if not _ended(d):
            continue
        _collect_anew(sc, d)
        print(row_text(read(RESULTS / sc["name"])), flush=True)
    return 0


def finished() -> list[str]:
    """Collect again every scenario whose stages have all ended under WORK but whose results under RESULTS are not on
    this code: on a machine kept between calls, the next call's copy of the tree puts the committed results back, and
    a scenario collected by an earlier call would otherwise be missing from this call's archive. Returns their names."""
    names = []
    for sc in load():
        d = WORK / "scenarios" / sc["name"]
        if _ended(d) and not current(sc["name"]):
            _collect_anew(sc, d)
            names.append(sc["name"])
    return names


def _ended(d: Path) -> bool:
    """Whether every stage of the scenario working in ``d`` has ended."""
    return all((d / f"{st}.rc").exists() for st in STAGES)


def _collect_anew(sc: dict, d: Path) -> None:
    """Collect scenario ``sc`` from ``d`` into RESULTS, replacing what was kept: every record of a row from one run."""
    if (RESULTS / sc["name"]).exists():
        shutil.rmtree(RESULTS / sc["name"])
    collect(sc, d, RESULTS / sc["name"])


def export(out: Path) -> None:
    """The two archives of a call (the module's docstring): the finished scenarios, and the stages so far."""
    import tarfile

    out.mkdir(parents=True, exist_ok=True)
    finished()
    with tarfile.open(out / "scenarios.tgz", "w:gz") as tar:
        if RESULTS.exists():
            tar.add(RESULTS, arcname="scenarios")
    with tarfile.open(out / "stages.tgz", "w:gz") as tar:
        stage_files = (WORK / "scenarios").glob("*/*")  # logs, return codes, the commands' JSON
        run_records = (WORK / "scenarios").glob("*/*/profile.json")  # each finished run's record, the applied one too
        # and its steps (windows can be derived again) and samples (what the CPUs and the GPU did meanwhile)
        streams = [*(WORK / "scenarios").glob("*/*/events*.jsonl"), *(WORK / "scenarios").glob("*/*/samples.jsonl")]
        records = [f for f in [*stage_files, *run_records] if f.suffix in (".log", ".rc", ".json")]
        for f in sorted([*records, *streams]):
            if f.is_file() and f.stat().st_size < 5_000_000:
                tar.add(f, arcname=str(f.relative_to(WORK)))


# ---------------------------------------------------------------------------------------------------- the table

def _j(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _rate(p: dict) -> float | None:
    return (p.get("summary") or {}).get("images_per_s")


def _steady(p: dict) -> bool:
    return bool(((p.get("summary") or {}).get("window") or {}).get("valid"))


def _average(p: dict) -> float | None:
    """A whole run's images/s over all its training steps (pauses left out): what it ran at, steady or not."""
    s = p.get("summary") or {}
    return s["images"] / s["training_s"] if s.get("bounded") is False and s.get("images") and s.get("training_s") \
        else None


def _wall(p: dict) -> float | None:
    return ((p.get("summary") or {}).get("phases") or {}).get("total")


def read(d: Path) -> dict:
    """One scenario's figures from its collected records."""
    sc = _j(d / "scenario.json")
    prof, fix = _j(d / "profile.out.json"), _j(d / "fix.json")
    orig, app = _j(d / "original.profile.json"), _j(d / "applied.profile.json")
    grid = [_j(d / f"grid-{i}.profile.json") for i in range(len(sc.get("grid", [])))]
    points = [("original", orig)] + [(" ".join(kv(g)), p) for g, p in zip(sc.get("grid", []), grid, strict=True)]
    # the best point is the best steady one: a window the queue still fed (or that had not settled) is no rate to
    # hold the applied training to; unsteady points that read higher are named beside it
    rated = [(n, r, _steady(p)) for n, p in points if (r := _rate(p))]
    best = max(((n, r) for n, r, steady in rated if steady), key=lambda x: x[1], default=(None, None))
    unsteady = [f"{n} {r:.0f}" for n, r, steady in rated if not steady and r > (best[1] or 0)]
    trials = fix.get("trials") or {}
    kept = [f"{k['key']}={k['after']}" for k in trials.get("kept") or []]
    applied = fix.get("applied") or {}
    relaunched = applied.get("relaunched", bool(applied))
    changes = [f"{c['key']}={c['after']}" if isinstance(c, dict) else str(c) for c in applied.get("changes") or []]
    verify = fix.get("verify") or {}
    o_wall = _wall(orig)
    a_wall = _wall(app) if relaunched else o_wall
    spread = trials.get("baseline_spread")
    m = _j(d / "machine.json")
    return {"name": sc.get("name", d.name), "bottleneck": sc.get("bottleneck"),
            "machine": ", ".join(x for x in (str(m.get("gpu") or "").replace("NVIDIA ", ""),
                                             f"{m['cpus']} CPUs" if m.get("cpus") else "", m.get("date") or "",
                                             f"code {m['code']}" if m.get("code") else "") if x)
            or "-",
            "epochs": sc.get("args", {}).get("epochs"),
            "primary": ((prof.get("findings") or [{}])[0]).get("id"), "kept": kept, "relaunched": relaunched,
            "plan": [f"{c['key']}={c['after']}" for c in (fix.get("plan") or {}).get("changes") or []],
            "applied": changes, "verified": bool(applied.get("verified")),
            "rolled_back": (applied.get("rollback_reason") or "rolled back").split(". Stack")[0][:90]
            if applied.get("rolled_back") else None,
            "verify_skipped": verify.get("fits") is False,
            "verify_estimate": (verify.get("trials"), verify.get("verify_s"), verify.get("budget_s"))
            if verify.get("fits") is False else None,
            "orig_rate": _rate(orig), "app_rate": _rate(app) if relaunched else _rate(orig),
            "app_steady": _steady(app) if relaunched else _steady(orig),
            "app_average": _average(app) if relaunched else _average(orig),
            "orig_wall": o_wall, "app_wall": a_wall, "best": best, "unsteady_points": unsteady,
            "verify_s": trials.get("wall_s"),
            "noise": spread if spread is not None else NOISE}


def goals(r: dict) -> list[str]:
    out = []
    if r["app_rate"] and r["best"][1] and not r.get("app_steady", True):
        out.append("best not measured (the applied training's window is not steady)")
    elif r["app_rate"] and r["best"][1]:
        out.append(f"best {'met' if r['app_rate'] >= 0.9 * r['best'][1] else 'missed'}")
    if r["app_wall"] and r["orig_wall"]:
        out.append(f"not slower {'met' if r['app_wall'] <= r['orig_wall'] * (1 + r['noise']) else 'missed'}")
    if r["bottleneck"] and r["bottleneck"].startswith("none"):
        out.append(f"nothing applied {'met' if not r['relaunched'] else 'missed'}")
    saved = (r["orig_wall"] - r["app_wall"]) if r["orig_wall"] and r["app_wall"] else None
    if (r["epochs"] or 0) >= 10 and r["verify_skipped"]:
        # fix judged that no design of trials could pay for itself and ran none: no time went to verify
        out.append("verify <= 25% of saved met (skipped: 0 s)")
    elif (r["epochs"] or 0) >= 10 and r["verify_s"] and saved is not None:
        out.append(f"verify <= 25% of saved {'met' if saved > 0 and r['verify_s'] <= 0.25 * saved else 'missed'}")
    return out


def _f(x: float | None, fmt: str) -> str:
    return format(x, fmt) if x is not None else "-"


def row_text(r: dict) -> str:
    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}x" if a and b else "-"

    saved = (r["orig_wall"] - r["app_wall"]) if r["orig_wall"] and r["app_wall"] else None
    kept = ", ".join(r["kept"]) or "nothing"
    if r["verify_skipped"]:
        n, est, budget = r.get("verify_estimate") or (None, None, None)
        kept = (f"verify skipped: {n} trials, about {est:.0f} s, against a budget of {budget:.0f} s"
                if n and est is not None and budget is not None else "verify skipped (budget)")
    applied = ", ".join(r["applied"]) or "nothing"
    if r.get("rolled_back"):
        applied = f"nothing: rolled back to the original arguments ({r['rolled_back']})"
    if r["applied"] and not r["verify_skipped"]:
        applied += " (as measured)" if sorted(r["applied"]) == sorted(r["kept"]) else " (not as measured)"
    elif r["applied"]:
        applied += " (unverified)"
    return (f"| {r['name']} | {r.get('machine', '-')} | {r['bottleneck']} | {r['primary'] or '-'} | "
            f"{', '.join(r['plan']) or '-'} | {kept} | "
            f"{applied} | "
            f"{ratio(r['app_rate'], r['orig_rate'])} ({_f(r['orig_rate'], '.0f')} -> {_f(r['app_rate'], '.0f')}"
            + ("" if r.get("app_steady", True) else
               f", not steady; {_f(r.get('app_average'), '.0f')} over all its training steps") + ") | "
            f"{ratio(r['orig_wall'], r['app_wall'])} ({_f(r['orig_wall'], '.0f')} -> {_f(r['app_wall'], '.0f')} s) | "
            f"{ratio(r['app_rate'], r['best'][1])} of {r['best'][0] or '-'}"
            + (f" (not steady, left out: {', '.join(r['unsteady_points'])})" if r.get("unsteady_points") else "")
            + f" | {_f(r['verify_s'], '.0f')} s / "
            f"{_f(saved, '.0f')} s | {'; '.join(goals(r)) or '-'} |")


HEADER = ("| scenario | machine | bottleneck | primary finding | plan | kept by verify | applied | "
          "applied / original, steady images/s | original / applied, wall time | "
          "applied / best swept point | verify / saved | goals |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def report(d: Path) -> int:
    rows = [read(p) for p in sorted(d.iterdir()) if (p / "scenario.json").exists()] if d.exists() else []
    order = [s["name"] for s in load()]
    rows.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
    print(HEADER)
    for r in rows:
        print(row_text(r))
    other = [r["name"] for r in rows if r["name"] in order and not current(r["name"])]
    if other:
        print(f"\nMeasured on other code than this tree's ({code_version()}): " + ", ".join(other) + ".")
    missing = [sc for sc in load() if sc["name"] not in {r["name"] for r in rows}]
    if missing:
        print("\nNot run yet: " + ", ".join(
            sc["name"] + (f" (about {c:.0f} s)" if (c := cost(sc)) is not None else
                          f" ({part})" if (part := cost_so_far(sc)) else "") for sc in missing)
            + ".")
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--only", default=None, help="comma-separated scenario names")
    r.add_argument("--seconds", type=float, default=540.0, help="wait at most this long, then exit 3")
    r.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    r.add_argument("--again", default="", help="comma-separated scenarios to run again on this code, their kept "
                   "results replaced")
    r.add_argument("--budget-s", type=float, default=None,
                   help="seconds the scenarios may take in all: start no scenario whose measured cost exceeds what "
                   "is left")
    p = sub.add_parser("report")
    p.add_argument("dir", nargs="?", type=Path, default=RESULTS)
    q = sub.add_parser("plan")
    q.add_argument("--budget-s", type=float, default=None)
    a = ap.parse_args(argv)
    if a.cmd == "plan":
        print("\n".join(plan(a.budget_s)) or "nothing left to run")
        return 0
    if a.cmd == "run":
        try:
            return run(a.only.split(",") if a.only else None, a.seconds, tuple(a.stages.split(",")), a.budget_s,
                       tuple(x for x in a.again.split(",") if x))
        finally:
            if os.environ.get("OUT"):
                export(Path(os.environ["OUT"]))
    return report(a.dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
