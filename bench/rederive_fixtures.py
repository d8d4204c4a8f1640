"""Derive the recorded profiles' summaries again from their own event streams (record/rederive.py), so that each
fixture's profile.json states what the current rules of a steady window make of its steps.

    python bench/rederive_fixtures.py            # rewrite fixtures/profiles/*/profile.json, print old -> new
    python bench/rederive_fixtures.py --check    # exit 1 where a profile.json differs from its streams

The streams themselves are never touched; only ``summary`` and ``ranks`` are rewritten.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from yolodoctor.record import profile as record
from yolodoctor.record.rederive import resummarise

PROFILES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"


def rederive(run: Path) -> tuple[record.Profile, dict, dict]:
    """(the profile with its summary derived again, the old summary, the new one)."""
    prof = record.load(run)
    old = prof.summary
    prof.summary, rows = resummarise(run, {k: v for k, v in old.items() if k in ("bounded", "phases")})
    if rows:
        prof.ranks = rows
    return prof, old, prof.summary


def _rate(s: dict) -> str:
    r = s.get("images_per_s")
    return f"{r:.1f}" if isinstance(r, (int, float)) else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say which profile.json differs from its streams")
    args = ap.parse_args(argv)
    differs = 0
    for run in sorted(p for p in PROFILES.iterdir() if (p / "profile.json").exists()):
        prof, old, new = rederive(run)
        same = json.dumps(old, sort_keys=True, default=str) == json.dumps(new, sort_keys=True, default=str)
        differs += not same
        w = new.get("window") or {}
        print(f"{run.name}: {_rate(old)} -> {_rate(new)} images/s, window {w.get('stretches')} "
              f"{'valid' if w.get('valid') else 'invalid: ' + str(w.get('why'))}{'' if same else ' (changed)'}")
        if not args.check and not same:
            text = (run / "profile.json").read_text()
            raw = json.loads(text)
            second = text.splitlines()[1] if "\n" in text else ""
            indent = len(second) - len(second.lstrip()) or 2  # as the file was written
            raw["summary"] = new
            if prof.ranks:
                raw["ranks"] = prof.ranks
            (run / "profile.json").write_text(json.dumps(raw, indent=indent) + "\n")
    return 1 if args.check and differs else 0


if __name__ == "__main__":
    sys.exit(main())
