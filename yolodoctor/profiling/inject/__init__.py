"""Injection into an unmodified program: an import hook that registers yolodoctor's callbacks the moment
``ultralytics.utils.callbacks.base`` is imported, and - when a fix plan or a trial asks for it - merges train
argument overrides into every trainer once ``ultralytics.engine.trainer`` is imported. Started by
``sitecustomize.py`` in this folder, which the runner puts first on PYTHONPATH together with YOLODOCTOR_RUN_DIR."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

TARGET = "ultralytics.utils.callbacks.base"
TRAINER = "ultralytics.engine.trainer"


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        if fullname not in (TARGET, TRAINER):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader  # its exec_module is wrapped below
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            from yolodoctor.profiling import hooks

            hooks.register(module) if fullname == TARGET else hooks.patch_trainer(module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    from yolodoctor.profiling import hooks

    if TARGET in sys.modules:  # already imported (unusual for sitecustomize): register directly
        hooks.register(sys.modules[TARGET])
    if TRAINER in sys.modules:
        hooks.patch_trainer(sys.modules[TRAINER])
    if TARGET in sys.modules and TRAINER in sys.modules:
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
