"""Every results file, benchmark script and fixture that README, docs and BENCHMARKS name as a figure's source is in
the repository: a figure must be re-derivable from what the repository holds."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
NAMED = re.compile(r"\b((?:bench|fixtures)/[A-Za-z0-9_.*/-]+)")


def named() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for m in NAMED.finditer(page.read_text()):
            path = m.group(1).rstrip(".,;:)")
            if not path.startswith("bench/out"):  # where a script writes locally (git-ignored), not a source
                out.append((page.name, path))
    return out


def test_every_source_the_pages_name_is_in_the_repository():
    missing = [f"{page}: {path}" for page, path in named()
               if not (list(ROOT.glob(path)) if "*" in path else (ROOT / path).exists())]
    assert not missing, "named but not in the repository:\n" + "\n".join(missing)


def test_the_pages_name_their_sources():
    paths = {p for _, p in named()}
    assert any(p.startswith("bench/results/") for p in paths) and any(p.endswith(".py") for p in paths)
    assert len(paths) > 20
