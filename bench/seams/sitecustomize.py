"""A benchmark-only seam: on the PYTHONPATH of `yolodoctor profile`, BENCH_SAMPLER_DUTY=ON,OFF starts the sampler
with `--duty ON,OFF` (it samples ON seconds, pauses OFF seconds, and so on), so that bench/profiler_overhead.py
measures the sampler's cost within one training. Python imports the first sitecustomize on its path at start-up;
nothing happens unless BENCH_SAMPLER_DUTY is set."""

import os

if os.environ.get("BENCH_SAMPLER_DUTY"):
    import subprocess

    from yolodoctor.profiling import sampler_process

    _start, _duty = sampler_process.start_sampler, os.environ["BENCH_SAMPLER_DUTY"]

    class _DutyPopen(subprocess.Popen):
        def __init__(self, cmd, *args, **kwargs):
            super().__init__([*cmd, "--duty", _duty], *args, **kwargs)

    def start_sampler(*args, **kwargs):
        popen, sampler_process.subprocess.Popen = sampler_process.subprocess.Popen, _DutyPopen
        try:
            return _start(*args, **kwargs)
        finally:
            sampler_process.subprocess.Popen = popen

    sampler_process.start_sampler = start_sampler
