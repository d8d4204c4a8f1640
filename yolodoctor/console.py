"""The terminal consoles every command writes to: results on stdout, progress and messages on stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False)
