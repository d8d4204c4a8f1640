"""The package's floors hold on its real imports (the contracts in pyproject.toml, checked by import-linter), and no
module imports the package root or the command line."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_floors_hold():
    lint = Path(sys.executable).with_name("lint-imports")  # import-linter's command, beside this interpreter
    p = subprocess.run([str(lint), "--no-cache", str(ROOT / "pyproject.toml")], capture_output=True, text=True,
                       cwd=ROOT)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "floors KEPT" in p.stdout


def test_no_module_imports_the_root_or_the_command_line():
    import grimp

    g = grimp.build_graph("yolodoctor")
    for target in ("yolodoctor", "yolodoctor.cli"):
        importers = g.find_modules_that_directly_import(target) - {"yolodoctor.__main__"}
        assert importers == set(), (target, importers)
