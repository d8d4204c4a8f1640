"""How often fix --verify keeps a change that does nothing, and how often it misses a change of known effect.

    python bench/decision_errors.py [--runs 20] [--work bench/out/decision-errors]

Each of --runs verify runs trials, as `fix --verify` does (interleaved, two repeats with other seeds, extra repeats
for what is undecided up to four), three candidates on a CPU training in script mode (bench/known_effect_train.py):
the baseline; cache=False, which changes nothing (the training caches nothing already); and deterministic=False,
which that script makes exactly 25% faster in images/s (every step under deterministic=True sleeps a quarter of its
own time). Counted: the verify runs that kept cache=False (false keeps) and those that did not keep
deterministic=False (misses). Resumable: a verify run already recorded in --work is read back. Results to
bench/results/decision-errors.json and a table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
SCRIPT = Path(__file__).resolve().parent / "known_effect_train.py"


def one(work: Path, data: Path, i: int) -> dict:
    from yolodoctor.fixing.candidates import Candidate
    from yolodoctor.fixing.planner import Change, Plan
    from yolodoctor.fixing.trials import run_trials

    done = work / f"verify-{i}.json"
    if done.exists():
        return json.loads(done.read_text())
    noop, known = Change("args", "cache", None, False, "no-op"), Change("args", "deterministic", True, False, "+25%")
    plan = Plan(changes=[noop, known])
    cands = [Candidate("baseline", []), Candidate("cache=False", [noop]), Candidate("deterministic=False", [known])]
    out = work / f"verify-{i}"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    t = run_trials({}, plan, out_dir=out, reps=2, max_reps=4, seed=100 * i, cands=cands,
                   command=[sys.executable, str(SCRIPT), str(data), str(work / "ul")])
    v = {x.candidate: {"kept": x.kept, "gain": x.gain, "runs": x.runs, "why": x.why} for x in t.verdicts}
    rec = {"verdicts": v, "kept": [c.key for c in t.kept], "wall_s": t.wall_s}
    done.write_text(json.dumps(rec))
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--work", type=Path, default=Path("bench/out/decision-errors"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/decision-errors.json"))
    a = ap.parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    a.work.mkdir(parents=True, exist_ok=True)
    from yolodoctor.datasets.synth import make_dataset

    data = a.work / "data" / "data.yaml"
    if not data.exists():
        make_dataset(a.work / "data", images=200, val_images=4, width=160, height=120, workers=1)
    recs = []
    for i in range(a.runs):
        recs.append(one(a.work, data, i))
        print(f"verify {i}: kept {recs[-1]['kept']}", file=sys.stderr)
    noop = sum(r["verdicts"]["cache=False"]["kept"] for r in recs)
    miss = sum(not r["verdicts"]["deterministic=False"]["kept"] for r in recs)
    gains = sorted(r["verdicts"]["deterministic=False"]["gain"] or 0 for r in recs)
    res = {"runs": len(recs), "noop_kept": noop, "known_missed": miss, "known_gain_median": gains[len(gains) // 2],
           "verify_s_median": sorted(r["wall_s"] or 0 for r in recs)[len(recs) // 2], "records": recs}
    a.out.write_text(json.dumps(res, indent=1))
    print("| verify runs | no-op kept | +25% change missed | its measured gain (median) | verify wall (median) |")
    print("|---|---|---|---|---|")
    print(f"| {len(recs)} | {noop} ({noop / len(recs):.0%}) | {miss} ({miss / len(recs):.0%}) | "
          f"{res['known_gain_median']:+.1%} | {res['verify_s_median']:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
