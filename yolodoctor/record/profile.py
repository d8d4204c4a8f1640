"""The run record: what `yolodoctor profile` writes to a run directory and `diagnose` re-reads.

A run directory holds
  profile.json    this record (schema below), rewritten atomically at start and at the end of the run
  events.jsonl    the training process's live event stream (steps, epochs, settings, errors), flushed per line;
                  under DDP rank 0's, beside events-rank{R}.jsonl of the others and, where yolodoctor started
                  Ultralytics' own DDP launcher (`profile device=0,1`), events-launcher.jsonl of the process that
                  launched the ranks
  samples.jsonl   the sampler's stream (CPU, threads, workers, disk, memory, GPU via NVML), flushed per line
  trace.json.gz   the torch.profiler window, Chrome/Perfetto format (open it at ui.perfetto.dev)
  spec.json       what was asked: the train arguments or the command, and the step bound
Every stream carries ``t`` on time.monotonic(), one clock for all processes of the machine.

Schema 1 of profile.json:
  schema, kind="yolodoctor-profile", yolodoctor (version), created, finished
  status: "running" | "complete" | "incomplete";  reason: why incomplete (crashed, out-of-memory, nan, interrupted,
          terminated) or null;  exit_code: the training process's
  mode: "args" | "script";  args: user KEY=VALUE;  command: argv (script mode);  steps_limit
  settings: the effective settings Ultralytics ran with (see profiling/recorder.py:effective_settings)
  summary: steps, images, seconds, steady-state images/s and its window, data-wait and compute shares
  trace: the torch.profiler window (first_step, steps, wall_s, summary of kernels/launches/copies, file) or the
         reason it was skipped;  loader_capacity: the train loader's own images/s without a model (loader.py)
  check_facts: what `check`'s dataset, resource, storage (warm decode sample) and config probes measured before
         the training (check/run.py:quick_check)
  ranks: a DDP training's ranks side by side, one row each (record/ranks.py): its steady window's images/s, step,
         compute and data-wait times, and its process's and loader workers' CPU; null for a single process. Each
         rank writes its own event stream (events.jsonl for rank 0 or a single process, events-rank{R}.jsonl for the
         others; profiling/session.py), and the summary's images/s is then the sum over the ranks
  files: the names above
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, ValidationError

from yolodoctor.errors import InputError
from yolodoctor.record.rundir import not_a_run_dir, open_regular, write_json_atomic
from yolodoctor.record.settings import Settings
from yolodoctor.version import SCHEMA, __version__

PROFILE = "profile.json"
EVENTS = "events.jsonl"
LAUNCHER_EVENTS = "events-launcher.jsonl"  # `profile device=0,1`: the process that starts Ultralytics' DDP ranks
SAMPLES = "samples.jsonl"
SPEC = "spec.json"


def host_id() -> str:
    """Which machine wrote a record: the hostname and /etc/machine-id (a replayed command must come from here)."""
    import socket

    try:
        mid = Path("/etc/machine-id").read_text().strip()[:12]
    except OSError:
        mid = "?"
    return f"{socket.gethostname()}/{mid}"


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _settings_object(v: Any) -> dict[str, Any]:
    """profile.json's settings as written: a JSON object (null reads as none); anything else is not a profile."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"settings must be an object, not {type(v).__name__}")
    return dict(v)


class Profile(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_: int = Field(SCHEMA, alias="schema")
    kind: Literal["yolodoctor-profile"] = "yolodoctor-profile"
    yolodoctor: str = __version__
    created: str = Field(default_factory=now)
    host: str | None = Field(default_factory=host_id)
    finished: str | None = None
    status: Literal["running", "complete", "incomplete"] = "running"
    reason: str | None = None
    exit_code: int | None = None
    mode: Literal["args", "script", "attach"] = "args"
    args: dict[str, Any] = Field(default_factory=dict)
    command: list[str] | None = None
    steps_limit: int | None = None
    # typed for the code that reads it (record/settings.py); stored and read back as the JSON object it is, whatever
    # keys and values another version wrote
    settings: Annotated[Settings, PlainValidator(_settings_object), PlainSerializer(dict)] = Field(
        default_factory=lambda: Settings())
    summary: dict[str, Any] = Field(default_factory=dict)
    trace: dict[str, Any] | None = None
    loader_capacity: dict[str, Any] | None = None
    check_facts: dict[str, Any] | None = None
    host_probe: dict[str, Any] | None = None  # the host's own speed just before and after the run (hostprobe.py)
    ranks: list[dict[str, Any]] | None = None
    files: dict[str, str] = Field(default_factory=lambda: {"events": EVENTS, "samples": SAMPLES})

    def save(self, run_dir: str | Path) -> None:
        write_json_atomic(Path(run_dir) / PROFILE, self.model_dump(by_alias=True, mode="json"))


def run_file(run_dir: str | Path, profile: Profile, key: str, default: str) -> Path:
    """The file of the run directory that ``profile.files[key]`` names. Only a plain file name counts: a profile from
    elsewhere cannot point yolodoctor at ../ or absolute paths (such a name falls back to ``default``)."""
    name = profile.files.get(key) or default
    if name in (".", "..") or Path(name).name != name or "\\" in name or "\x00" in name:
        name = default
    return Path(run_dir) / name


def load(run_dir: str | Path) -> Profile:
    """Read a run directory's profile.json; anything unreadable is an InputError (exit 2), in one sentence."""
    path = Path(run_dir) / PROFILE
    if not Path(run_dir).is_dir():
        raise InputError(not_a_run_dir(run_dir))
    try:
        with open_regular(path) as fh:  # not a FIFO or a link to /dev/zero from a run directory made elsewhere
            raw = json.loads(fh.read())
    except FileNotFoundError:
        raise InputError(f"{run_dir} is not a yolodoctor run directory (no {PROFILE})") from None
    except (OSError, ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        raise InputError(f"cannot read {path}: {e}") from None
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise InputError(f"{path} has schema {raw.get('schema') if isinstance(raw, dict) else '?'}, "
                         f"this yolodoctor reads schema {SCHEMA}")
    try:
        return Profile.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{path} is not a valid profile: {where}: {first['msg']}") from None
