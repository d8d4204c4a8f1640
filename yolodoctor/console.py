"""The terminal consoles every command writes to: results on stdout, progress and messages on stderr."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


@contextlib.contextmanager
def status(console: Console, text: str) -> Iterator[Callable[[str], None]]:
    """A spinner on ``console`` (stderr) while a step runs, with the time it has taken so far; yields a function that
    replaces its text. Transient: nothing of it stays on the terminal, and nothing shows where stderr is not one."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    if not console.is_terminal:  # a log or a pipe: no spinner (nor the blank line Rich ends one with there)
        yield lambda new: None
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task(text, total=None)
        yield lambda new: bar.update(task, description=new)


@contextlib.contextmanager
def training_status(console: Console, label: str) -> Iterator[Callable[[Any], None]]:
    """A spinner for a training a command launched: ``label: step 12/35, 8.1 images/s`` (what the run's event stream
    says so far, from profiling/watch.RunProgress), refreshed while it runs."""
    with status(console, f"{label}: starting the training process") as update:
        def show(progress: Any) -> None:
            update(f"{label}: {progress.describe()}")

        yield show


def echo_to(console: Console) -> Callable[[str], None]:
    """Print a training process's output line (ANSI colours kept) on ``console``, above any spinner."""
    from rich.text import Text

    def echo(line: str) -> None:
        console.print(Text.from_ansi(line), soft_wrap=True)

    return echo
