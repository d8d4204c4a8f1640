"""What `profile` refuses before it starts a training, each in one sentence (exit 2): a program whose Python cannot
import Ultralytics, no data= (Ultralytics would fall back to its own sample dataset), a model file that is not there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from yolodoctor.errors import UsageError

PYTHON = re.compile(r"python(\d+(\.\d+)*)?$")
FINDS_ULTRALYTICS = "import importlib.util, sys; sys.exit(importlib.util.find_spec('ultralytics') is None)"


def interpreter_of(command: list[str]) -> tuple[str, str | None]:
    """(the program as the shell would run it, the Python interpreter that runs it or None where that cannot be told):
    the program itself when it is named python*, else the Python its ``#!`` line names (a console script such as
    `yolo`, an executable train.py). A program not found is a usage error."""
    exe = shutil.which(command[0])
    if exe is None:
        raise UsageError(f"cannot run {command[0]!r}: command not found (the program after `--` runs as the shell "
                         "would run it)")
    if PYTHON.match(Path(command[0]).name) or PYTHON.match(Path(exe).name):
        return exe, exe
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return exe, None
    if not first.startswith(b"#!"):
        return exe, None
    try:
        words = shlex.split(first[2:].decode("utf-8", "replace"))
    except ValueError:
        return exe, None
    if words and Path(words[0]).name == "env":  # #!/usr/bin/env [-S] python3
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not words or not PYTHON.match(Path(words[0]).name):
        return exe, None
    return exe, shutil.which(words[0]) or (words[0] if os.path.isabs(words[0]) else None)


def check_interpreter(command: list[str]) -> None:
    """`profile -- COMMAND`: the Python that will run the program must be able to import Ultralytics, else the run
    would end as a crash with no training seen."""
    exe, python = interpreter_of(command)
    if python is None:
        return
    try:
        r = subprocess.run([python, "-c", FINDS_ULTRALYTICS], stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"cannot run {python} to see whether it has Ultralytics: {e}") from None
    if r.returncode != 0:
        via = "" if python == exe else f" (the Python that runs {command[0]})"
        raise UsageError(f"{python}{via} cannot import ultralytics: install it there, or name the Python that has it "
                         f"(activate its environment, or write its path after `--`)")


def require_data(user: dict) -> None:
    """KEY=VALUE mode: without data= Ultralytics trains on its own sample dataset (coco8.yaml; imagenet10 for
    classification: cfg/__init__.py TASK2DATA; downloaded if missing), which measures nothing of the user's training
    and, offline, fails."""
    if user.get("data") in (None, ""):
        raise UsageError("give data=DATA.yaml (data=FOLDER for a classification training), the dataset of the "
                         "training to profile (without it Ultralytics would train on its own sample dataset: "
                         "data=coco8.yaml asks for that)")


def missing_model(model: str, offline: bool) -> str | None:
    """Why model= names a file that is not there (None where it is, or may be downloaded): a model .yaml that is
    neither a file nor one of Ultralytics' model configurations (found as Ultralytics finds them: yolo11n.yaml is
    yolo11.yaml at scale n), or weights that are neither here nor in Ultralytics' weights folder and are not one of its
    release assets (offline, check's own test refuses those too)."""
    if "://" in model:
        return None
    p = Path(model)
    if p.suffix in (".yaml", ".yml"):
        if p.is_file():
            return None
        from ultralytics.utils.checks import check_yaml

        if p.stem in (f"yolov{d}{x}6" for x in "nsmlx" for d in (5, 8)):
            p = p.with_name(re.sub(r"(\d+)([nslmx])6(.+)?$", r"\1\2-p6\3", p.stem) + p.suffix)
        unified = re.sub(r"(\d+)([nslmx])(.+)?$", r"\1\3", str(p))
        try:
            found = check_yaml(str(p), hard=False) or check_yaml(unified, hard=False)
        except Exception:  # Ultralytics' search refused the name: it is not there either
            found = None
        return None if found else (f"model={model}: no such file, and not one of Ultralytics' model configurations "
                                   "(yolo11n.yaml, yolov8s.yaml, ...)")
    if p.suffix in (".pt", ".pth") and not offline:
        from yolodoctor.check.environment import weights_facts

        f = weights_facts(model)
        if f.get("env.weights_missing") and not f.get("env.weights_release_asset"):
            return (f"model={model}: no such file here or in Ultralytics' weights folder, and not one of the weights "
                    "Ultralytics can download")
    return None
