"""Injection into an unmodified program: an import hook that registers yolodoctor's callbacks the moment
``ultralytics.utils.callbacks.base`` is imported. Started by ``sitecustomize.py`` in this folder, which the runner
puts first on PYTHONPATH together with YOLODOCTOR_RUN_DIR."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

TARGET = "ultralytics.utils.callbacks.base"


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            from yolodoctor.profiling import hooks

            hooks.register(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    if TARGET in sys.modules:  # already imported (unusual for sitecustomize): register directly
        from yolodoctor.profiling import hooks

        hooks.register(sys.modules[TARGET])
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
