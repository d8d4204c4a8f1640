"""The H200 smoke run of `yolodoctor fix --verify --apply` from Ultralytics defaults, as a report.

    bash bench/gpu_fix_smoke.sh                  # on the GPU (twice: fix runs detached and outlives one command)
    python bench/report_fix_smoke.py [DIR]       # DIR: bench/results/fix-smoke-h200-2026-12-03 (what came back)

DIR holds fix.json (`fix --verify --apply --json`), defaults/ (the profile fixed) and applied/ (the applied run),
both run directories with their events and samples gzipped. The before/after table is `yolodoctor compare`'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_report

DEFAULT = Path(__file__).resolve().parent / "results" / "fix-smoke-h200-2026-12-03"


def fmt(v, spec=".1f") -> str:
    return "n/a" if v is None else format(v, spec)


def main() -> None:
    d = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    fix = json.loads((d / "fix.json").read_text())
    rel = d.resolve().relative_to(Path(__file__).resolve().parents[1])
    cmp_ = json.loads(subprocess.run([sys.executable, "-m", "yolodoctor", "compare", str(d / "defaults"),
                                      str(d / "applied"), "--json"], capture_output=True, text=True).stdout)
    plan = fix["plan"]
    changes = "\n".join(f"| `{c['key']}` | {c['before']} -> {c['after']} | {c['reason']} | {c['safety']} |"
                        for c in plan["changes"])
    dropped = "; ".join(f"{x['key']}: {x['reason']}" for x in plan["dropped"])
    runs = "\n".join(f"| {r['rep'] + 1} | {r['candidate']} | {r['status']} | {fmt(r['images_per_s'])} |"
                     for r in fix["trials"]["runs"])
    verdicts = "\n".join(f"| {v['candidate']} | {fmt(v['median'])} | {fmt(v['gain'], '+.1%')} | "
                         f"{'**kept**' if v['kept'] else 'no'} | {v['why'].splitlines()[0][:160]} |"
                         for v in fix["trials"]["verdicts"])
    ap = fix["applied"]
    delta_rows = "\n".join(f"| {x['label']} | {x['a']:.4g} | {x['b']:.4g} | x{x['ratio']:.2f} |"
                           for x in cmp_["deltas"].values() if x.get("a") is not None and x.get("b") is not None)
    body = f"""## `fix --verify --apply` from Ultralytics defaults on the H200 (smoke run)

Date: 2026-12-03, an NVIDIA H200 (16 cores, torch 2.11, Ultralytics 8.4.190). `bash bench/gpu_fix_smoke.sh`:
`profile model=yolo11n.yaml imgsz=640 epochs=1 close_mosaic=0` on the 8,000-image dataset (bounded, default
`--steps`), then `fix --verify --apply` on it (safe changes only); 661 s for trials and the applied epoch.
Results: `{rel}`; this report: `python bench/report_fix_smoke.py`.

Plan (from the findings of the defaults profile; dropped: {dropped}):

| change | before -> after | reason | safety |
|---|---|---|---|
{changes}

Trials (bounded profiles of the same dataset, mosaic on; interleaved A B C D P, then P D C B A):

| repeat | candidate | status | images/s |
|---|---|---|---|
{runs}

| candidate | median images/s | gain over baseline | kept | why |
|---|---|---|---|---|
{verdicts}

Applied: {ap['applied']} ({', '.join(f"{c['key']}={c['after']}" for c in ap['changes'])}), status {ap['status']},
rolled back: {ap['rolled_back']}. `yolodoctor compare` of the defaults profile (A, bounded) and the applied whole
epoch (B):

| measure | A | B | B / A |
|---|---|---|---|
{delta_rows}

Findings resolved: {', '.join(cmp_['resolved'])}; new: {', '.join(cmp_['new']) or 'none'};
persisting: {', '.join(cmp_['persisting'])}.

What it showed:
- batch 16 -> 64 (= nbs, so the optimisation is unchanged) was kept in both repeats (+138% in trials). Applied, the
  whole epoch ran at about 1.8x the bounded defaults profile, and the bottleneck moved: 27% data wait with the 8
  workers each using a whole core (~105%). The applied run had not timed its loader, and DL201 (too few workers)
  needs that figure, so no rule named it (`fix --apply` has since timed the loader at the end of the applied run).
- compile='reduce-overhead' alone crashed at the second step in both repeats: "accessing tensor output of
  CUDAGraphs that has been overwritten by a subsequent run". At batch 16 Ultralytics accumulates 4 micro-batches
  (nbs 64) and CUDA graphs do not survive gradient accumulation (pytorch/pytorch#169545). The trial caught it and
  the change was not applied, as designed (the planner proposes reduce-overhead only where the planned batch does
  not accumulate, otherwise compile=True, and tries it on top of the batch change it needs).
- deterministic=False: +3.5%, inside the noise threshold (twice the baseline's 17% spread between two repeats):
  not kept. The whole plan (batch 64 + reduce-overhead + deterministic off) ran at about 520 images/s, below batch
  64 alone at about 620. Why is not established: both sit near what 8 workers deliver alone (527-585 images/s,
  bench/results/h200-benchmark/loader.json and the profile's own loader timing), so at 8 workers the loader, not
  the GPU side, caps both (bench/h200_benchmark.py's sweep measures compile at batch 64 with 16 workers).
- The baseline's two repeats differ by 17% (282 vs 238 images/s): that spread, not a fixed margin, sets what a
  change must beat, which is why only large effects are kept from two repeats on this machine.
"""
    print(body)
    print(f"written: {write_report('fix-smoke', body)}", file=sys.stderr)


if __name__ == "__main__":
    main()
