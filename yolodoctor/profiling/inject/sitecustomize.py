"""Loaded by Python at start-up in programs that `yolodoctor profile -- COMMAND` runs (this folder is first on
PYTHONPATH). It installs yolodoctor's import hook, then runs the sitecustomize it shadows, if there is one."""

import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("YOLODOCTOR_RUN_DIR"):
    try:
        from yolodoctor.profiling.inject import install

        install()
    except Exception as e:  # never stop the user's program
        sys.stderr.write(f"yolodoctor: could not attach the profiler: {type(e).__name__}: {e}\n")

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
