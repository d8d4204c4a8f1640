"""`yolodoctor check [KEY=VALUE ...]`."""

from __future__ import annotations

from collections.abc import Iterable

from yolodoctor.findings import Severity, exit_code
from yolodoctor.presentation import report

SUMMARY = [
    ("python", "env.python"), ("torch", "env.torch"), ("CUDA (torch build)", "env.torch_cuda_build"),
    ("cuDNN", "env.cudnn"), ("driver", "env.driver"), ("GPU", "gpu.name"), ("ultralytics", "env.ultralytics"),
    ("device", "env.device_kind"), ("dataset", "dataset.yaml"), ("dataset folder", "dataset.cls.folder"),
    ("task", "dataset.task"), ("classes", "dataset.classes"),
    ("train images", "dataset.images.train"), ("val images", "dataset.images.val"),
    ("usable cores", "cpu.usable"), ("workers (effective)", "loader.workers_effective"),
    ("read speed", "io.read_mb_s"), ("read cache state", "io.cache_state"), ("decode per image", "io.decode_ms_median"),
    ("images/s per loader core", "io.images_per_s_per_core"),
]


TORCH_FLAGS = {"cudnn.benchmark", "cudnn.deterministic", "cudnn.allow_tf32", "cuda.matmul.allow_tf32"}


def parse_torch_flags(words: Iterable[str]) -> dict[str, bool]:
    from yolodoctor.errors import UsageError

    out = {}
    for w in words:
        name, _, value = w.partition("=")
        if name not in TORCH_FLAGS or value.lower() not in ("true", "false", "1", "0"):
            raise UsageError(f"--torch-flag takes NAME=true|false with NAME one of {', '.join(sorted(TORCH_FLAGS))}")
        out[name] = value.lower() in ("true", "1")
    return out


def run(words: list[str], *, as_json: bool, fail_on: Severity, cold: bool = True,
        torch_flags: dict[str, bool] | None = None, rule_dirs: list | None = None) -> int:
    from yolodoctor import trainargs
    from yolodoctor.check.run import run_check
    from yolodoctor.console import stderr_console, stdout_console
    from yolodoctor.diagnosis.rules import load_rules

    rules = load_rules(rule_dirs) if rule_dirs else None  # a bad rule file: exit 2 before anything runs
    user = trainargs.parse_kv(words)
    args = trainargs.effective(user)
    err = stderr_console()
    with err.status("checking...") as status:
        rep = run_check(user, args, cold=cold, torch_flags=torch_flags, log=lambda m: status.update(m), rules=rules)
    if as_json:
        report.dump_json(report.envelope("check", rep.findings, rep.facts, args=user))
    else:
        out = stdout_console()
        out.rule("[bold]yolodoctor check")
        report.render_facts(out, rep.facts, SUMMARY)
        report.render_findings(out, rep.findings, "Findings")
    return exit_code(rep.findings, fail_on)
