"""How the rules did on the recorded H200 profiles: the frozen rules (commit 46d70a1, tag rules-frozen-1) and today's.

    python bench/report_rules_accuracy.py [--frozen COMMIT]   (default 46d70a1: tags do not travel with every clone)

The rules were frozen in a commit before three more H200 scenarios were recorded, so that the frozen rules' verdicts
on them say how the rules do on trainings they were not written for. This script checks the frozen commit out into a
temporary git worktree and runs *its* diagnosis (its code and its rules) on each fixture, then today's, and writes
the table as a report (bench/out/reports/rules-accuracy.md). What the data shows (the reference verdict) is written
below with the measurements it rests on; the figures in the table are read from the fixtures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, write_report

PROFILES = ROOT / "fixtures" / "profiles"
FROZEN = "46d70a1"  # the commit tagged rules-frozen-1, before the last three scenarios were recorded
# fixture -> (recorded after the freeze?, the primary finding the data supports, what the data shows)
TRUTH = {
    "h200-defaults": (False, "LA201", "host-bound: data ready, loader alone far faster, GPU busy a fraction"),
    "h200-workers0": (False, "DL201", "dataloader-bound, too few workers: most of each step waits, cores idle"),
    "h200-fp32": (False, "LA201", "host-bound first; AMP off is real (PR201 must be present) but secondary"),
    "h200-b64w16-reduce-overhead": (False, None, "already tuned: compile active, no bottleneck warning expected"),
    "h200-b128w16-cpu-saturated": (True, "DL205", "no data wait, yet 16 workers hold every core and starve the "
                                   "training thread (steps 80 -> 150-270 ms while they run); validation 1/3 of "
                                   "each epoch"),
    "h200-png-1080p": (True, "DL204", "dataloader-bound by decoding 1080p PNGs; RAM holds the decoded set"),
    "h200-yolo11x-autobatch90": (True, "RN201", "50 steps (--steps 50) cannot outlast 32 prefetched batches: too "
                                 "short to conclude; memory 87% (below the OOM-risk line)"),
}
FACTS = [("ips", "run.images_per_s", "{:.0f}"), ("wait", "run.data_wait_share", "{:.0%}"),
         ("loader alone", "loader.capacity_images_per_s", "{:.0f}"), ("GPU util", "gpu.util_mean", "{:.0f}%"),
         ("CPU sat.", "cpu.saturated_share", "{:.0%}"), ("thread CPU", "cpu.train_thread_pct", "{:.0f}%"),
         ("mem peak", "gpu.mem_fraction_peak", "{:.0%}")]
SNIPPET = """
import json, sys
from pathlib import Path
import yolodoctor.diagnosis.rules as r
r.builtin_dir = lambda: Path(sys.argv[1]) / 'rules'
from yolodoctor.diagnosis.diagnose import diagnose
print(json.dumps({run: [[f.id, f.severity.name] for f in diagnose(run).findings] for run in sys.argv[2:]}))
"""


def verdicts(src: Path, runs: list[Path]) -> dict[str, list[list[str]]]:
    out = subprocess.run([sys.executable, "-c", SNIPPET, str(src), *map(str, runs)], cwd=src, check=True,
                         capture_output=True, text=True, env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"})
    return {Path(k).name: v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def primary(findings: list[list[str]]) -> str | None:
    return next((i for i, sev in findings if sev in ("warning", "error")), None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frozen", default=FROZEN)
    a = ap.parse_args()
    runs = [PROFILES / n for n in TRUTH]
    with tempfile.TemporaryDirectory() as tmp:
        wt = Path(tmp) / "frozen"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(wt), a.frozen], cwd=ROOT, check=True)
        try:
            frozen = verdicts(wt, runs)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=ROOT, check=True)
    now = verdicts(ROOT, runs)
    sys.path.insert(0, str(ROOT))
    from yolodoctor.diagnosis.diagnose import diagnose

    rows, score = [], {"frozen": [0, 0], "now": [0, 0]}
    for name, (after, want, shows) in TRUTH.items():
        facts = diagnose(PROFILES / name).facts
        figures = ", ".join(f"{label} {fmt.format(facts[k])}" for label, k, fmt in FACTS if facts.get(k) is not None)
        cells = []
        for which, v in (("frozen", frozen[name]), ("now", now[name])):
            p = primary(v)
            ok = p == want and (name != "h200-fp32" or "PR201" in [i for i, _ in v])
            if after:
                score[which][0] += ok
                score[which][1] += 1
            extra = [i for i, sev in v if sev in ("warning", "error") and i != p]
            cells.append(f"{p or 'none'}{' + ' + ', '.join(extra) if extra else ''} {'right' if ok else 'WRONG'}")
        rows.append(f"| {name.removeprefix('h200-')} | {'after' if after else 'before'} | {shows} ({figures}) | "
                    f"{want or 'none'} | {cells[0]} | {cells[1]} |")
    sat_facts = diagnose(PROFILES / "h200-b128w16-cpu-saturated").facts

    def pct(key: str, scale: float = 1.0) -> str:
        v = sat_facts.get(key)
        return f"{v * scale:,.0f}%" if isinstance(v, (int, float)) else "n/a"

    sat = {"workers": pct("cpu.train_workers_pct"), "thread": pct("cpu.train_thread_pct"),
           "saturated": pct("cpu.saturated_share", 100), "val": pct("run.val_share", 100)}

    def cells_of(name: str) -> str:
        v = frozen[name]
        return "the frozen rules gave " + (", ".join(i for i, sev in v if sev in ("warning", "error")) or "nothing")

    body = f"""## Rule accuracy on the recorded H200 profiles

Command: `python bench/report_rules_accuracy.py` (the frozen verdicts come from the frozen commit's own code and
rules, run in a temporary git worktree). Rules frozen at commit `{a.frozen}` (tag rules-frozen-1); \
the last three scenarios were recorded
after that (2026-12-02, `PART=scenarios bash bench/gpu_fixtures.sh`) and first diagnosed by the frozen rules. The
primary finding is the first warning or error (findings are ranked by estimated time saved).

| scenario | recorded | what the data shows | reference | frozen rules | rules now |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Frozen rules on the scenarios recorded after the freeze: {score['frozen'][0]} of {score['frozen'][1]} primary findings
right; rules now: {score['now'][0]} of {score['now'][1]}. What the frozen rules got wrong, and what changed:
- **b128w16-cpu-saturated**: {cells_of('h200-b128w16-cpu-saturated')}. DL202 (CPU saturated) needs data wait, and
  there was none: with 16 workers on 16 cores the queue stayed full, but the workers took {sat['workers']} of CPU
  (median over the window) and the training thread {sat['thread']} of a core (machine CPU above 90% in
  {sat['saturated']} of the samples), so the launch-bound steps slowed while they ran. New rule DL205 (workers
  starve the training thread; fix: leave two cores, verified by trials). The frozen facts also dropped the
  validation share of every bounded run; validated epochs inside one now count (VL201: validation
  {sat['val']} of each epoch at this batch). Its epochs (63 batches) are shorter than the loader's queue (64): every
  step after a validation pause is served from batches made during the pause, so the whole run has no steady
  window (RN201), in both codes since its summary is derived again from its steps.
- **yolo11x-autobatch90**: right primary (the window was too short: the scenario's 50 steps were too few), \
but a false MM204
  (fragmentation "55x"): the allocated side was read at batch end, after the activations were freed. The recorder
  now keeps each step's peak (`max_memory_allocated`, reset per step); without it the fact stays missing and the
  rule silent.
- **png-1080p**: right (DL204 cache='ram', then DL201 more workers: 16 cores, none saturated).
"""
    print(body)
    print(f"written: {write_report('rules-accuracy', body)}", file=sys.stderr)


if __name__ == "__main__":
    main()
