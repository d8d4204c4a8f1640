"""The package list in pyproject.toml names every package folder, and a built wheel carries the rules."""

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "yolodoctor").rglob("__init__.py")}
    assert found | {"yolodoctor.builtin_rules"} == listed


def test_wheel_ships_the_rules(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("yolodoctor-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("yolodoctor/builtin_rules/") and n.endswith(".yaml")}
    assert shipped == {p.name for p in (ROOT / "rules").glob("*.yaml")}
    assert "yolodoctor/profiling/inject/sitecustomize.py" in names
