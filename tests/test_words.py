"""The project's text speaks of the product alone: no tracked file tells how the project was built.

Every tracked text file (`git ls-files`, binary files skipped) is searched for words about the making of the project
rather than the product: how and when a machine was obtained or accounted for, numbered work items and work
periods, a design document the repository does not have, the build machine's host name, dated work logs (the
patterns below name each). File and folder
names are searched for machine ids too. User-facing texts (the rule files, which `yolodoctor rules` shows) must not
send the user to files a user does not have (the benchmarks, the fixtures, the tests).

The patterns are built from pieces, and named in other words, so that this file does not match itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEX8 = "[0-9a-f]{8}"
# an 8-digit hex token with a letter and a digit in it, not part of a UUID (GPU-xxxxxxxx or xxxxxxxx-xxxx-...)
MACHINE_ID = (r"(?<![0-9a-z])(?<!GPU-)(?=[0-9a-f]{0,7}[a-f])(?=[0-9a-f]{0,7}[0-9])" + HEX8
              + r"(?![0-9a-z])(?!-[0-9a-f]{4})")

PATTERNS = {
    "a machine rental": r"\b" + "lea" + r"ses?\b",
    "a borrowed machine": r"\b" + "le" + r"nt\b",
    "a tracker reference": r"\b" + "iss" + r"ues?[- ]?#?\d+",
    "a brief the repository lacks": "DES" + r"IGN\.md",
    "accelerator-time accounting": r"\b" + "dev" + r"ice[- ](time|minutes?|seconds?|hours?)\b",
    "accelerator-minute accounting": r"\bgpu[- ]" + "min" + r"utes\b",
    "the build machine's host name": r"\b" + "v" + r"m[:/]",
    "a numbered work period": r"\b" + "sess" + r"ions? \d+\b|\b(this|that|next|previous|earlier|later|first|last|gpu|"
                              r"work) " + "sess" + r"ion\b",
    "a dated work log": r"\b(done|found|written by hand)[ ,]+(on |in )?\d{4}-\d\d-\d\d",
    "a machine id": MACHINE_ID,
}
# what the rule files (shown by `yolodoctor rules`) must not send a user to
USER_FACING = {"rules/": r"BENCH" + r"MARKS\.md|\b(bench|fixtures|tests|docs)/"}


def tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:  # not a git checkout (an sdist): nothing to check
        pytest.skip(f"git ls-files: {e}")
    return [p for p in out.decode().split("\0") if p]


def text_of(path: str) -> str | None:
    try:
        data = (ROOT / path).read_bytes()
    except OSError:  # deleted in the working tree, not yet committed
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def hits(patterns: dict[str, str], files: list[str]) -> list[str]:
    compiled = {what: re.compile(p, re.I) for what, p in patterns.items()}
    found = []
    for path in files:
        text = text_of(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for what, rx in compiled.items():
                m = rx.search(line)
                if m:
                    found.append(f"{path}:{n}: {what}: {m.group(0)!r} in {line.strip()[:140]!r}")
    return found


def test_no_tracked_file_tells_how_the_project_was_built():
    found = hits(PATTERNS, tracked())
    assert not found, "words about how the project was built:\n" + "\n".join(found)


def test_no_tracked_path_carries_a_machine_id():
    rx = re.compile(MACHINE_ID.replace("(?<!GPU-)", ""), re.I)
    found = [p for p in tracked() if any(rx.search(part) for part in p.split("/"))]
    found += [p for p in tracked() if re.search(r"(?<![0-9])\d{8}(?![0-9])", p)]  # an all-digit id
    assert not found, "machine ids in file names:\n" + "\n".join(found)


def test_rule_texts_cite_no_file_a_user_lacks():
    found = []
    for prefix, pattern in USER_FACING.items():
        found += hits({"a file the user lacks": pattern}, [p for p in tracked() if p.startswith(prefix)])
    assert not found, "rule texts citing files a user does not have:\n" + "\n".join(found)


@pytest.mark.parametrize("line,what", [
    ("recorded on " + "le" + "ase 5d8a" + "742d", "a machine rental"),
    ("the " + "le" + "nt H200", "a borrowed machine"),
    ("(" + "iss" + "ue 6, BENCHMARKS.md)", "a tracker reference"),
    ("the " + "iss" + "ue-6 notes", "a tracker reference"),
    ("see " + "DES" + "IGN.md section 3", "a brief the repository lacks"),
    ("25 " + "dev" + "ice minutes", "accelerator-time accounting"),
    ("Machine: " + "v" + "m: 2 cores", "the build machine's host name"),
    ("Done in " + "sess" + "ion 10", "a numbered work period"),
    ("Done " + "2026-12-03: the sweep", "a dated work log"),
    ("fixtures/trials/h200-fix-safe-" + "5d8a" + "742d.json", "a machine id"),
])
def test_the_patterns_catch_what_they_name(line, what):
    assert re.search(PATTERNS[what], line, re.I), (what, line)


@pytest.mark.parametrize("line", [
    "from yolodoctor.profiling import session",       # the profiling Session is a code concept
    "a new process session (setsid)",
    'H200_UUID = "GPU-5e6f' + '7a8b-1111-2222-3333-444455556666"',
    '("GPU-5e6f' + '7a8b", [1])',
    "the release notes; a released version",
    "GPU time by CUDA events",
])
def test_the_patterns_spare_the_product_words(line):
    assert not [w for w, p in PATTERNS.items() if re.search(p, line, re.I)], line
