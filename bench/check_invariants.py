"""Diagnose run directories and check their facts against the invariants (yolodoctor/diagnosis/invariants.py).

    python bench/check_invariants.py RUN_DIR ...

Prints, per run, the findings, the facts the invariants read and every violation; exits 1 if any run violates one.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from yolodoctor.diagnosis.diagnose import diagnose
from yolodoctor.diagnosis.invariants import across, violations
from yolodoctor.record.events import read_events

KEYS = ("run.batch", "run.batch_started", "run.oom_retries", "gpu.torch_allocated_max", "gpu.torch_reserved_max",
        "gpu.mem_total", "trace.kernels_per_step", "trace.syncs_per_step", "run.window_valid", "ul.autobatch_batch",
        "ul.autobatch_miss")


def main(argv: list[str]) -> int:
    bad, seen = 0, []
    for run in map(Path, argv):
        if not (run / "profile.json").exists():
            print(f"{run}: no profile.json")
            continue
        d = diagnose(run)
        events = list(read_events(run / "events.jsonl"))
        v = violations(d.facts, events)
        bad += bool(v)
        seen.append((d.profile.args.get("model", "?"), d.facts))
        print(f"== {run.name}: {d.profile.status} {d.profile.reason or ''}")
        print("   " + ", ".join(f"{k}={d.facts.get(k)}" for k in KEYS if k in d.facts))
        for f in d.findings:
            print(f"   {f.id} {f.message}")
        print("   invariants: " + ("; ".join(v) if v else "hold"))
    cross = across(seen)
    print("across runs: " + ("; ".join(cross) if cross else "hold"))
    return 1 if bad or cross else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
