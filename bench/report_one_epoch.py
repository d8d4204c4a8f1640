"""The one-epoch GPU case in a table: what profile found, what fix --verify kept and why, what verify cost, and the
applied training against the original one, each run whole.

    python bench/report_one_epoch.py COLLECTED_DIR

COLLECTED_DIR holds what bench/gpu_one_epoch.sh collects: fix.json, profile-defaults.json, profile-original.json,
profile-applied.json and trials.tar.gz (the trials' run directories, whose profile.json give verify's wall time).
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from datetime import datetime
from pathlib import Path


def _t(s: str | None) -> float | None:
    return datetime.fromisoformat(s).timestamp() if s else None


def verify_seconds(tar: Path) -> float | None:
    """First trial's start to last trial's end, from the trials' profile.json."""
    if not tar.exists():
        return None
    spans = []
    with tarfile.open(tar) as tf:
        for m in tf.getmembers():
            if m.name.endswith("/profile.json"):
                p = json.load(io.TextIOWrapper(tf.extractfile(m)))
                if p.get("created") and p.get("finished"):
                    spans.append((_t(p["created"]), _t(p["finished"])))
    return max(e for _, e in spans) - min(s for s, _ in spans) if spans else None


def whole(path: Path) -> dict:
    if not path.exists():
        return {}
    p = json.loads(path.read_text())
    s = p.get("summary") or {}
    return {"status": p.get("status"), "images_per_s": s.get("images_per_s"), "train_s": s.get("seconds"),
            "run_s": (_t(p.get("finished")) or 0) - (_t(p.get("created")) or 0), "steps": s.get("steps"),
            "settings": {k: (p.get("settings") or {}).get(k) for k in ("batch", "workers", "epochs")}}


def main(argv: list[str]) -> int:
    c = Path(argv[0])
    fix = json.loads((c / "fix.json").read_text())
    prof = json.loads((c / "profile-defaults.json").read_text())
    print(f"profile: {prof['summary'].get('images_per_s') or 0:.0f} images/s steady, window "
          f"{(prof['summary'].get('window') or {}).get('valid')}, findings "
          f"{[f['id'] for f in fix.get('findings', [])]}")
    print("| candidate | runs | median images/s | gain | kept | saved over the training | why |")
    print("|---|---|---|---|---|---|---|")
    for v in fix["trials"]["verdicts"]:
        saved = f"{v['saved_s']:.0f} s" if v.get("saved_s") is not None else "-"
        gain = f"{v['gain']:+.0%}" if v.get("gain") is not None else "-"
        med = f"{v['median']:.0f}" if v.get("median") else "-"
        print(f"| {v['candidate']} | {v['runs']} | {med} | {gain} | {'yes' if v['kept'] else 'no'} | {saved} | "
              f"{v['why']} |")
    print(f"kept: {[(k['key'], k['after']) for k in fix['trials']['kept']]}")
    vs = verify_seconds(c / "trials.tar.gz")
    print(f"verify wall time: {vs:.0f} s" if vs else "verify wall time: unknown")
    o, a = whole(c / "profile-original.json"), whole(c / "profile-applied.json")
    for name, r in (("original", o), ("applied", a)):
        if r:
            print(f"{name}: {r['status']}, {r['settings']}, {r['steps']} steps, {r['images_per_s'] or 0:.0f} images/s "
                  f"steady, training {r['train_s'] or 0:.1f} s, whole run (process start to end, validation "
                  f"included) {r['run_s']:.1f} s")
    if o.get("images_per_s") and a.get("images_per_s"):
        print(f"applied / original: {a['images_per_s'] / o['images_per_s']:.2f}x steady images/s, "
              f"{o['train_s'] / a['train_s']:.2f}x training time, {o['run_s'] / a['run_s']:.2f}x whole run")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
