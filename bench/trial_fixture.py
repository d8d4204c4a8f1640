"""A recorded `fix --verify` trial set from the H200 benchmark, as a fixture for the judge's tests.

    python bench/trial_fixture.py PART LOGS [--results bench/results/h200-benchmark] [--out fixtures/trials]

PART is fix-safe or fix-unsafe; LOGS is the folder `h200-logs.tgz` was unpacked into (its trials' events.jsonl
under .../PART/run/trials-profile/RUN/). Writes fixtures/trials/NAME.json (the plan, the defaults'
findings and facts, every trial with the steady step's median compute time and data-wait share, the verdicts and
what was kept) and fixtures/trials/NAME-events/RUN/events.jsonl.gz (each trial's step events: the loss
curves that loss parity reads, the rates that bench/window_noise.py reads). NAME (--name) defaults to
GPU-PART-DATE, e.g. h200-fix-safe-2026-12-04: the GPU model, the part and the day the fix was recorded.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from window_noise import steady_steps

ROOT = Path(__file__).resolve().parents[1]
PROFILE_SETTINGS = ("device", "batch", "workers", "precision", "amp", "compile_requested", "compile_active", "cache",
                    "accumulate", "epochs", "images_per_epoch", "mosaic", "deterministic", "torch")


def trial_events(logs: Path, part: str) -> dict[str, Path]:
    """Each trial's events.jsonl in the unpacked logs, by run directory name."""
    return {p.parent.name: p for p in logs.rglob("events.jsonl") if p.parent.parent.name == "trials-profile"
            and p.parent.parent.parent.parent.name == part}


def steady(path: Path) -> dict[str, float | None]:
    steps = steady_steps(path.parent)
    if not steps:
        return {"steady_compute_ms_median": None, "steady_wait_share": None}
    total = sum((s.get("wait") or 0) + s["compute"] for s in steps)
    return {"steady_compute_ms_median": round(1000 * statistics.median(s["compute"] for s in steps), 1),
            "steady_wait_share": round(sum(s.get("wait") or 0 for s in steps) / total, 4) if total else None}


def default_name(part: str, rec: dict) -> str:
    """GPU-PART-DATE: the GPU's model (h200 for "NVIDIA H200"), the part, the day the fix was recorded."""
    gpu = ((rec.get("machine") or {}).get("gpu") or "cpu").split()
    model = next((w for w in gpu if any(c.isdigit() for c in w)), gpu[-1]).lower()
    return f"{model}-{part}-{(rec.get('finished') or 'undated')[:10]}"


def build(part: str, logs: Path, results: Path, out: Path, source: str, name: str | None = None) -> Path:
    rec = json.loads((results / f"{part}.json").read_text())["units"]["fix"]
    events = trial_events(logs, part)
    missing = [r["run_dir"] for r in rec["trials"]["runs"] if r["run_dir"] not in events]
    if missing:
        raise SystemExit(f"no events.jsonl under {logs} for the trials {', '.join(missing)}")
    runs = [{**{k: v for k, v in r.items() if k != "phases"}, **steady(events[r["run_dir"]])}
            for r in rec["trials"]["runs"]]
    prof = rec.get("profile") or {}
    doc = {"source": source, "machine": rec["machine"], "max_reps": rec.get("max_reps"), "plan": rec["plan"],
           "dropped": rec["dropped"], "findings": rec["findings"], "profile_facts": prof.get("facts") or {},
           "profile_settings": {k: (prof.get("settings") or {}).get(k) for k in PROFILE_SETTINGS},
           "trials": {**rec["trials"], "runs": runs}, "kept": rec["kept"], "applied": rec["applied"]["args"]}
    name = name or default_name(part, rec)
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    for run in runs:
        d = out / f"{name}-events" / run["run_dir"]
        d.mkdir(parents=True, exist_ok=True)
        # mtime 0: the same bytes when made again
        (d / "events.jsonl.gz").write_bytes(gzip.compress(events[run["run_dir"]].read_bytes(), mtime=0))
    return out / f"{name}.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["fix-safe", "fix-unsafe"])
    ap.add_argument("logs", type=Path, help="the folder h200-logs.tgz was unpacked into")
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "h200-benchmark")
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures" / "trials")
    ap.add_argument("--source", default="", help="how the trials were recorded (the command, the rules' commit)")
    ap.add_argument("--name", help="the fixture's name (default GPU-PART-DATE)")
    a = ap.parse_args(argv)
    try:
        print(build(a.part, a.logs, a.results, a.out, a.source, a.name))
    except SystemExit as e:  # a trial without events in the logs: said in one line, exit 2
        print(e.code, file=sys.stderr)
        return 2
    except (OSError, KeyError, json.JSONDecodeError) as e:
        print(f"cannot read the {a.part} record in {a.results}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
