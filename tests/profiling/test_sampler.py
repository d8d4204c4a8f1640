"""The side-process sampler: driven with fakes (psutil, /proc, NVML), then for real against a busy child process."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from fakes import H200, T4, FakeNvmlLib

from yolodoctor.api.nvml import Nvml
from yolodoctor.profiling.procfs import ProcReader, parse_stat
from yolodoctor.profiling.roles import role_from_cmdline
from yolodoctor.profiling.sampler import Sampler, read_records, write_record
from yolodoctor.profiling.sampler_process import start_sampler, stop_sampler

CpuTimes = namedtuple("CpuTimes", "user nice system idle iowait irq softirq steal guest guest_nice")
PCpu = namedtuple("PCpu", "user system children_user children_system")
Io = namedtuple("Io", "read_count write_count read_bytes write_bytes read_chars write_chars")
DiskIo = namedtuple("DiskIo", "read_count write_count read_bytes write_bytes")

MAIN = 1000
BOOT = 1_700_000_000.0


class FakeProc:
    """One process of the fake world. ``vanish_on`` names a method that raises NoSuchProcess (it died mid-read)."""

    def __init__(self, world: FakePsutil, pid: int) -> None:
        self.world, self.pid = world, pid

    @property
    def spec(self) -> dict:
        if self.pid not in self.world.procs:
            raise psutil.NoSuchProcess(self.pid)
        return self.world.procs[self.pid]

    def _get(self, what: str):
        s = self.spec
        if s.get("vanish_on") == what:
            raise psutil.NoSuchProcess(self.pid)
        if s.get("deny") == what:
            raise psutil.AccessDenied(self.pid)
        return s

    def __eq__(self, other):
        return isinstance(other, FakeProc) and other.pid == self.pid

    def __hash__(self):
        return self.pid

    def oneshot(self):
        import contextlib
        return contextlib.nullcontext()

    def cpu_times(self):
        s = self._get("cpu_times")
        return PCpu(s["cpu"], 0.0, 0.0, 0.0)

    def memory_info(self):
        return SimpleNamespace(rss=self._get("memory_info").get("rss", 100 << 20))

    def io_counters(self):
        s = self._get("io_counters")
        rb = s.get("read_bytes", 0)
        return Io(0, 0, rb, 0, rb, 0)

    def name(self):
        return self._get("name").get("name", "python")

    def ppid(self):
        return self._get("ppid")["ppid"]

    def num_threads(self):
        return 4

    def cmdline(self):
        return self._get("cmdline").get("cmdline", ["python", "train.py"])

    def create_time(self):
        return self._get("create_time").get("create_time", BOOT)

    def is_running(self):
        return self.pid in self.world.procs and not self.world.procs[self.pid].get("dead")

    def status(self):
        return self._get("status").get("status", psutil.STATUS_RUNNING)

    def children(self, recursive=False):
        self._get("children")
        out, stack = [], [self.pid]
        while stack:
            p = stack.pop()
            for pid, s in self.world.procs.items():
                if s.get("ppid") == p:
                    out.append(FakeProc(self.world, pid))
                    if recursive:
                        stack.append(pid)
        return out


class FakePsutil:
    """Just enough of the psutil module for the sampler; the test moves time and counters by hand."""

    NoSuchProcess = psutil.NoSuchProcess
    AccessDenied = psutil.AccessDenied
    ZombieProcess = psutil.ZombieProcess
    STATUS_ZOMBIE = psutil.STATUS_ZOMBIE

    def __init__(self, ncpu: int = 4) -> None:
        self.procs: dict[int, dict] = {MAIN: {"ppid": 1, "cpu": 0.0, "cmdline": ["python", "train.py"]}}
        self.cores = [CpuTimes(0, 0, 0, 0, 0, 0, 0, 0, 0, 0) for _ in range(ncpu)]
        self.disk = DiskIo(0, 0, 0, 0)
        self.vm = SimpleNamespace(total=64 << 30, used=8 << 30, available=56 << 30, percent=12.5)

    def Process(self, pid):
        if pid not in self.procs:
            raise psutil.NoSuchProcess(pid)
        return FakeProc(self, pid)

    def cpu_count(self):
        return len(self.cores)

    def cpu_times(self, percpu=False):
        return list(self.cores)

    def virtual_memory(self):
        return self.vm

    def disk_usage(self, path):
        return SimpleNamespace(total=32 << 30, used=1 << 30)

    def disk_io_counters(self):
        return self.disk

    def advance_core(self, i: int, **delta: float) -> None:
        self.cores[i] = self.cores[i]._replace(**{k: getattr(self.cores[i], k) + v for k, v in delta.items()})


def write_stat(root: Path, pid: int, tid: int, name: str, utime: int, stime: int, core: int = 3) -> None:
    """A /proc/PID/task/TID/stat line in the kernel's layout (52 fields; 14 utime, 15 stime, 39 processor)."""
    fields = ["S", "1", str(pid), str(pid), "0", "-1", "4194304", "0", "0", "0", "0", str(utime), str(stime)]
    fields += ["0"] * (36 - len(fields)) + [str(core)] + ["0"] * 13
    d = root / str(pid) / "task" / str(tid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "stat").write_text(f"{tid} ({name}) " + " ".join(fields) + "\n")


def write_proc(root: Path, pid: int, *, ppid: int, ticks: int, rss_pages: int = 25_600, state: str = "S",
               starttime: int = 500, threads: int = 1, name: str = "python", read_bytes: int | None = 0) -> None:
    """/proc/PID/stat (14 utime, 15 stime, 20 num_threads, 22 starttime, 24 rss) and /proc/PID/io."""
    f = [state, str(ppid)] + ["0"] * 9 + [str(ticks), "0"] + ["0"] * 4 + [str(threads), "0", str(starttime), "0",
                                                                          str(rss_pages)] + ["0"] * 28
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "stat").write_text(f"{pid} ({name}) " + " ".join(f) + "\n")
    if read_bytes is not None:
        (d / "io").write_text(f"rchar: {read_bytes * 2}\nwchar: 0\nsyscr: 1\nsyscw: 0\nread_bytes: {read_bytes}\n"
                              "write_bytes: 0\ncancelled_write_bytes: 0\n")


class ClockedProcReader(ProcReader):
    """A ProcReader over a fake root whose boot clock the test sets."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, clk_tck=100, page_size=4096)
        self.bt = 100.0

    def boottime(self) -> float:
        return self.bt


def no_gpu() -> Nvml:
    return Nvml.open(FakeNvmlLib([], init_error="Driver Not Loaded"))


def make(world: FakePsutil, tmp_path: Path, **kw) -> Sampler:
    kw.setdefault("nvml", no_gpu())
    kw.setdefault("proc", ProcReader(tmp_path / "proc", clk_tck=100))
    return Sampler(MAIN, psutil_mod=world, rescan_s=0.0, **kw)


# ---------------------------------------------------------------------------------------------------------------------
# /proc per-thread CPU


def test_parse_stat_handles_names_with_spaces_and_parens():
    raw = b"77 (pt (data) 1) R " + b" ".join([b"0"] * 10) + b" 250 50 " + b" ".join([b"0"] * 23) + b" 5 0 0\n"
    st = parse_stat(raw, 77)
    assert st is not None and st.name == "pt (data) 1" and st.ticks == 300 and st.core == 5


def test_training_thread_cpu_from_two_proc_readings(tmp_path):
    world = FakePsutil()
    root = tmp_path / "proc"
    write_stat(root, MAIN, MAIN, "python", 1000, 100)
    write_stat(root, MAIN, 1234, "pt_main_thread", 5000, 500, core=2)
    s = make(world, tmp_path, tid=1234)
    first = s.sample(10.0, wall=BOOT + 10)
    assert first["proc"]["thread"]["tid"] == 1234 and first["proc"]["thread"]["cpu"] is None  # no prior reading
    # 0.5 s later: the training thread used 45 + 3 ticks = 0.48 s of CPU -> 96 % of one core
    write_stat(root, MAIN, 1234, "pt_main_thread", 5045, 503, core=7)
    write_stat(root, MAIN, MAIN, "python", 1001, 100)
    rec = s.sample(10.5, wall=BOOT + 10.5)
    th = rec["proc"]["thread"]
    assert th == {"tid": 1234, "name": "pt_main_thread", "cpu": 96.0, "core": 7, "source": "tid"}
    assert rec["proc"]["threads_top"] is None  # full thread scans only once a second when --tid is given


def test_busiest_thread_without_tid(tmp_path):
    world = FakePsutil()
    root = tmp_path / "proc"
    for tid, ticks in ((MAIN, 0), (1001, 0), (1002, 0)):
        write_stat(root, MAIN, tid, f"t{tid}", ticks, 0)
    s = make(world, tmp_path)
    s.sample(1.0, wall=BOOT + 1)
    write_stat(root, MAIN, MAIN, "python", 10, 0)
    write_stat(root, MAIN, 1001, "pt_data_pin", 30, 0)
    write_stat(root, MAIN, 1002, "worker", 95, 5)
    rec = s.sample(2.0, wall=BOOT + 2)
    assert rec["proc"]["thread"]["tid"] == 1002 and rec["proc"]["thread"]["cpu"] == 100.0
    assert rec["proc"]["thread"]["source"] == "busiest"
    assert [t["tid"] for t in rec["proc"]["threads_top"]] == [1002, 1001, MAIN]


def test_missing_thread_reads_null_not_crash(tmp_path):
    world = FakePsutil()
    s = make(world, tmp_path, tid=4242)  # no /proc files at all
    rec = s.sample(1.0, wall=BOOT + 1)
    assert rec["proc"]["thread"] == {"tid": 4242, "name": None, "cpu": None, "core": None, "source": "tid"}
    assert "errors" not in rec


# ---------------------------------------------------------------------------------------------------------------------
# system CPU, memory, disk


def test_per_core_cpu_iowait_memory_and_disk_rates(tmp_path):
    world = FakePsutil(ncpu=2)
    s = make(world, tmp_path)
    s.sample(0.0, wall=BOOT)
    world.advance_core(0, user=0.9, idle=0.1)  # core 0: 90 % busy
    world.advance_core(1, system=0.2, iowait=0.6, idle=0.2)  # core 1: 20 % busy, 60 % iowait
    world.disk = DiskIo(10, 20, 50_000_000, 10_000_000)
    rec = s.sample(1.0, wall=BOOT + 1)
    cpu = rec["cpu"]
    assert cpu["percpu"] == [90.0, 20.0]
    assert cpu["total"] == 55.0 and cpu["iowait"] == 30.0 and cpu["user"] == 45.0
    assert rec["disk"] == {"read_bps": 50_000_000, "write_bps": 10_000_000, "read_iops": 10.0, "write_iops": 20.0}
    assert rec["mem"]["available"] == 56 << 30 and rec["mem"]["shm_used"] == 1 << 30
    assert rec["dt"] == 1.0


# ---------------------------------------------------------------------------------------------------------------------
# processes and roles


def _tree(world: FakePsutil) -> None:
    world.procs.update({
        1001: {"ppid": MAIN, "cpu": 0.0, "name": "pt_data_worker"},
        1002: {"ppid": MAIN, "cpu": 0.0, "name": "pt_data_worker"},
        1003: {"ppid": MAIN, "cpu": 0.0, "name": "pt_data_worker"},
        # torch inductor's SubprocPool sidecar and one of its forked pool workers (same command line)
        1004: {"ppid": MAIN, "cpu": 0.0, "cmdline": [
            sys.executable, "/venv/lib/python3.11/site-packages/torch/_inductor/compile_worker/__main__.py",
            "--pickler=torch._inductor.compile_worker.subproc_pool.SubprocPickler", "--kind=fork",
            "--workers=16", f"--parent={MAIN}"]},
        1005: {"ppid": 1004, "cpu": 0.0, "cmdline": [sys.executable, "-c", "from multiprocessing.spawn ..."]},
        1006: {"ppid": MAIN, "cpu": 0.0, "cmdline": ["/bin/sh", "-c", "nvidia-smi"]},
        1007: {"ppid": 1001, "cpu": 0.0, "cmdline": ["python", "-c", "helper"]},  # a worker's own subprocess
    })


def test_roles_from_file_cmdline_heuristic_ancestry_and_default(tmp_path):
    world = FakePsutil()
    _tree(world)
    roles = tmp_path / "roles.json"
    roles.write_text(json.dumps({"1001": "train_worker", "1002": "train_worker", "1003": "val_worker"}))
    s = make(world, tmp_path, roles_path=roles)
    s.sample(0.0, wall=BOOT)
    for pid, cpu in ((MAIN, 1.2), (1001, 0.8), (1002, 0.6), (1003, 0.1), (1004, 0.0), (1005, 1.0), (1006, 0.0)):
        world.procs[pid]["cpu"] += cpu
    world.procs[1001]["read_bytes"] = 4_000_000
    rec = s.sample(1.0, wall=BOOT + 1)
    by_pid = {c["pid"]: c for c in rec["children"]}
    assert {p: c["role"] for p, c in by_pid.items()} == {
        1001: "train_worker", 1002: "train_worker", 1003: "val_worker", 1004: "compile_worker",
        1005: "compile_worker", 1006: "other", 1007: "train_worker"}
    assert by_pid[1001]["cpu"] == 80.0 and by_pid[1001]["name"] == "pt_data_worker"
    assert rec["proc"]["cpu"] == 120.0 and rec["proc"]["num_threads"] == 4
    agg = rec["roles"]
    assert agg["train_worker"]["count"] == 3 and agg["train_worker"]["cpu"] == 140.0
    assert agg["train_worker"]["read_bps"] == 4_000_000
    assert agg["val_worker"] == {"count": 1, "cpu": 10.0, "rss": 100 << 20, "read_bps": 0}
    assert agg["compile_worker"]["count"] == 2 and agg["compile_worker"]["cpu"] == 100.0
    assert agg["other"]["count"] == 1


def test_roles_file_is_reread_when_it_changes(tmp_path):
    world = FakePsutil()
    _tree(world)
    roles = tmp_path / "roles.json"
    s = make(world, tmp_path, roles_path=roles)  # file not there yet: heuristics only
    rec = s.sample(0.0, wall=BOOT)
    assert {c["pid"]: c["role"] for c in rec["children"]}[1001] == "other"
    tmp = tmp_path / "roles.json.tmp"
    tmp.write_text(json.dumps({"1001": "val_worker", "1006": "bogus-role"}))
    os.replace(tmp, roles)  # the trainer's atomic rewrite
    rec = s.sample(0.2, wall=BOOT + 0.2)
    got = {c["pid"]: c["role"] for c in rec["children"]}
    assert got[1001] == "val_worker" and got[1007] == "val_worker" and got[1006] == "other"


def test_role_from_cmdline():
    assert role_from_cmdline(["python", "-m", "torch._inductor.compile_worker", "--workers=4"]) == "compile_worker"
    assert role_from_cmdline(["python", "/x/torch/_inductor/compile_worker/__main__.py"]) == "compile_worker"
    assert role_from_cmdline(["python", "train.py"]) is None
    assert role_from_cmdline([]) is None


def test_compile_worker_marker_matches_installed_torch():
    """The heuristic rests on how torch starts its compile sidecar: keep it honest against the installed source."""
    import importlib.util

    spec = importlib.util.find_spec("torch")  # locates torch without importing it (seconds)
    cw = Path(spec.origin).parent / "_inductor" / "compile_worker" if spec and spec.origin else None
    if cw is None or not (cw / "subproc_pool.py").exists():
        pytest.skip("torch inductor not installed")
    src = (cw / "subproc_pool.py").read_text()
    assert 'entry = os.path.join(os.path.dirname(__file__), "__main__.py")' in src
    assert role_from_cmdline([sys.executable, str(cw / "__main__.py"), "--kind=fork"]) == "compile_worker"


@pytest.mark.parametrize("method", ["cpu_times", "memory_info", "name", "ppid"])
def test_vanished_processes_are_skipped(tmp_path, method):
    world = FakePsutil()
    _tree(world)
    s = make(world, tmp_path)
    s.sample(0.0, wall=BOOT)
    world.procs[1002]["vanish_on"] = method  # dies between listing and reading
    world.procs[1003]["deny"] = "cpu_times"  # someone else's process
    world.procs[1006]["cpu"] += 0.5
    rec = s.sample(1.0, wall=BOOT + 1)
    pids = {c["pid"] for c in rec["children"]}
    assert 1002 not in pids and 1003 not in pids and {1001, 1004, 1006} <= pids
    assert {c["pid"]: c["cpu"] for c in rec["children"]}[1006] == 50.0
    assert "errors" not in rec


def test_process_gone_from_the_table_mid_iteration_and_children_listing_failing(tmp_path):
    world = FakePsutil()
    _tree(world)
    s = make(world, tmp_path)
    s.sample(0.0, wall=BOOT)
    del world.procs[1001]  # exited after the listing of the previous tick
    world.procs[MAIN]["vanish_on"] = "children"
    rec = s.sample(1.0, wall=BOOT + 1)
    assert 1001 not in {c["pid"] for c in rec["children"]}
    assert rec["proc"] is not None and "errors" not in rec


def test_the_sampler_itself_is_not_a_training_child(tmp_path):
    world = FakePsutil()
    world.procs[os.getpid()] = {"ppid": MAIN, "cpu": 0.0}  # start_sampler(os.getpid()) from the training process
    world.procs[2001] = {"ppid": MAIN, "cpu": 0.0}
    rec = make(world, tmp_path).sample(0.0, wall=BOOT)
    assert [c["pid"] for c in rec["children"]] == [2001]


def test_new_child_cpu_counts_from_its_birth(tmp_path):
    world = FakePsutil()
    s = make(world, tmp_path)
    s.sample(0.0, wall=BOOT + 100)
    world.procs[2001] = {"ppid": MAIN, "cpu": 0.3, "create_time": BOOT + 100.5}  # born within this interval
    world.procs[2002] = {"ppid": MAIN, "cpu": 9.0, "create_time": BOOT}  # older, merely unseen so far
    rec = s.sample(1.0, wall=BOOT + 101)
    got = {c["pid"]: c["cpu"] for c in rec["children"]}
    assert got == {2001: 30.0, 2002: None}


def test_target_liveness(tmp_path):
    world = FakePsutil()
    s = make(world, tmp_path)
    assert s.target_alive()
    world.procs[MAIN]["status"] = psutil.STATUS_ZOMBIE  # exited, not yet reaped by its parent
    assert not s.target_alive()
    del world.procs[MAIN]
    assert not s.target_alive()
    gone = Sampler(999_999, psutil_mod=world, nvml=no_gpu(), proc=ProcReader(tmp_path))
    assert gone.tree.target is None and not gone.target_alive()
    assert gone.sample(0.0)["proc"] is None


def _fast_world(tmp_path: Path) -> tuple[FakePsutil, ClockedProcReader, Path]:
    world = FakePsutil()
    _tree(world)
    root = tmp_path / "proc"
    for pid, spec in world.procs.items():
        write_proc(root, pid, ppid=spec["ppid"], ticks=0, name=spec.get("name", "python"))
    return world, ClockedProcReader(root), root


def test_fast_path_reads_proc_directly(tmp_path):
    world, reader, root = _fast_world(tmp_path)
    roles = tmp_path / "roles.json"
    roles.write_text(json.dumps({"1001": "train_worker", "1002": "val_worker"}))
    s = make(world, tmp_path, proc=reader, roles_path=roles)
    assert s.tree.fast and s.start_record(0.0, BOOT)["proc_source"] == "proc"
    write_proc(root, MAIN, ppid=1, ticks=150, threads=12, rss_pages=262_144)  # 1.5 s of CPU in 2 s, 1 GiB
    write_proc(root, 1001, ppid=MAIN, ticks=190, name="pt_data_worker", read_bytes=20_000_000)
    write_proc(root, 1004, ppid=MAIN, ticks=40)
    reader.bt += 2.0
    rec = s.sample(2.0, BOOT + 2)
    assert rec["proc"]["cpu"] == 75.0 and rec["proc"]["rss"] == 1 << 30 and rec["proc"]["num_threads"] == 12
    assert rec["proc"]["read_chars_ps"] == 0
    by = {c["pid"]: c for c in rec["children"]}
    assert by[1001]["cpu"] == 95.0 and by[1001]["read_bps"] == 10_000_000 and by[1001]["name"] == "pt_data_worker"
    assert by[1001]["role"] == "train_worker" and by[1002]["role"] == "val_worker"
    assert by[1004]["role"] == by[1005]["role"] == "compile_worker" and by[1004]["cpu"] == 20.0
    assert rec["roles"]["train_worker"]["cpu"] == 95.0 and rec["roles"]["train_worker"]["count"] == 2  # +1007


def test_fast_path_skips_vanished_zombie_and_reused_pids(tmp_path):
    world, reader, root = _fast_world(tmp_path)
    s = make(world, tmp_path, proc=reader)
    s.sample(0.0, BOOT)
    for f in (root / "1001").iterdir():  # exited after the listing: its /proc entry is gone
        f.unlink()
    write_proc(root, 1002, ppid=MAIN, ticks=5, state="Z")  # exited, not yet reaped
    write_proc(root, 1003, ppid=MAIN, ticks=5, starttime=9_999)  # the pid went to a new process
    write_proc(root, 1006, ppid=MAIN, ticks=5, read_bytes=None)
    (root / "1006" / "io").unlink()  # io unreadable (another user's process)
    reader.bt += 1.0
    rec = s.sample(1.0, BOOT + 1)
    by = {c["pid"]: c for c in rec["children"]}
    assert not {1001, 1002, 1003} & set(by) and {1004, 1005, 1006, 1007} <= set(by)
    assert by[1006]["cpu"] == 5.0 and by[1006]["read_bps"] is None
    assert "errors" not in rec


def test_fast_path_liveness_and_new_process_cpu(tmp_path):
    world, reader, root = _fast_world(tmp_path)
    s = make(world, tmp_path, proc=reader)
    s.sample(0.0, BOOT)
    world.procs[3001] = {"ppid": MAIN, "cpu": 0.0}
    write_proc(root, 3001, ppid=MAIN, ticks=40, starttime=int(100.5 * 100))  # born 0.5 s into this interval
    world.procs[3002] = {"ppid": MAIN, "cpu": 0.0}
    write_proc(root, 3002, ppid=MAIN, ticks=40, starttime=50 * 100)  # older, merely unseen so far
    reader.bt += 1.0
    got = {c["pid"]: c["cpu"] for c in s.sample(1.0, BOOT + 1)["children"]}
    assert got[3001] == 40.0 and got[3002] is None
    assert s.target_alive()
    write_proc(root, MAIN, ppid=1, ticks=0, state="Z")
    assert not s.target_alive()
    write_proc(root, MAIN, ppid=1, ticks=0, starttime=777)  # pid reused by another process
    assert not s.target_alive()
    (root / str(MAIN) / "stat").unlink()
    assert not s.target_alive()


# ---------------------------------------------------------------------------------------------------------------------
# GPU


def test_no_nvml_means_gpu_null_with_reason(tmp_path):
    s = make(FakePsutil(), tmp_path, nvml=no_gpu())
    start = s.start_record(0.0, BOOT)
    assert start["type"] == "sampler_start" and start["gpu"] is None
    assert "Driver Not Loaded" in start["gpu_unavailable"]
    assert s.sample(0.2, BOOT + 0.2)["gpu"] is None


def test_gpu_uuid_picks_the_right_device_among_two(tmp_path):
    lib = FakeNvmlLib([dict(T4, util=5), dict(H200, util=97, mem_used=40 << 30, sm_clock=1980, power_mw=612_345,
                                               temp=61, pcie_rx=120_000, pcie_tx=3_000, throttle=0x4)])
    s = make(FakePsutil(), tmp_path, nvml=Nvml.open(lib), gpu_uuid=H200["uuid"].removeprefix("GPU-").lower())
    start = s.start_record(0.0, BOOT)
    assert start["gpu"]["name"] == "NVIDIA H200" and start["gpu"]["index"] == 1 and start["gpu"]["match"] == "uuid"
    between = s.sample(0.2, BOOT + 0.2)["gpu"]  # PCIe (slow) and the sample buffer (costly) are read once a second
    assert between["util"] == 97 and between["pcie_rx_kbps"] is None and between["util_samples"] is None
    g = s.sample(1.0, BOOT + 1.0)["gpu"]
    assert g == {"index": 1, "util": 97, "mem_util": 0, "mem_used": 40 << 30, "mem_total": H200["memory"],
                 "sm_clock_mhz": 1980, "power_w": 612.3, "temp_c": 61, "pcie_rx_kbps": 120_000, "pcie_tx_kbps": 3_000,
                 "throttle_mask": 4, "throttle": ["sw_power_cap"], "util_samples": []}


def test_unknown_gpu_uuid_is_a_reason_not_a_crash(tmp_path):
    s = make(FakePsutil(), tmp_path, nvml=Nvml.open(FakeNvmlLib([T4])), gpu_uuid="GPU-deadbeef")
    start = s.start_record(0.0, BOOT)
    assert start["gpu"] is None and "deadbeef" in start["gpu_unavailable"]


def test_without_uuid_the_first_visible_gpu(tmp_path):
    lib = FakeNvmlLib([T4, H200])
    s = make(FakePsutil(), tmp_path, nvml=Nvml.open(lib), environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert s.start_record(0.0, BOOT)["gpu"]["name"] == "NVIDIA H200"
    assert s.gpu.match == "first_visible"


def test_nvml_call_failing_mid_run_nulls_that_field_only(tmp_path):
    lib = FakeNvmlLib([dict(H200, util=80, temp=55, pcie_rx=10, pcie_tx=20, throttle=0x60)])
    s = make(FakePsutil(), tmp_path, nvml=Nvml.open(lib), gpu_uuid=H200["uuid"])
    s.start_record(0.0, BOOT)
    g = s.sample(1.0, BOOT + 1.0)["gpu"]
    assert g["util"] == 80 and g["pcie_rx_kbps"] == 10 and g["util_samples"] == []
    lib.fail = {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetSamples",
                "nvmlDeviceGetCurrentClocksEventReasons"}
    g = s.sample(2.0, BOOT + 2.0)["gpu"]
    assert g["util"] is None and g["mem_util"] is None and g["pcie_rx_kbps"] is None and g["util_samples"] is None
    assert g["temp_c"] == 55 and g["sm_clock_mhz"] == 345 and g["mem_total"] == H200["memory"]
    assert g["throttle"] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]  # fell back to the deprecated call
    lib.fail = {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetSamples",
                "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"}
    g = s.sample(3.0, BOOT + 3.0)["gpu"]
    assert g["throttle"] is None and g["throttle_mask"] is None and g["temp_c"] == 55


def test_fine_grained_utilisation_samples_only_new_ones_on_the_monotonic_axis(tmp_path):
    wall0 = BOOT + 50.0
    old = [(int((wall0 - 5) * 1e6), 10)]  # in the driver's buffer before the sampler started
    lib = FakeNvmlLib([dict(H200, samples=list(old))])
    s = make(FakePsutil(), tmp_path, nvml=Nvml.open(lib), gpu_uuid=H200["uuid"])
    s.start_record(100.0, wall0)
    lib.gpus[0]["samples"] += [(int((wall0 + 0.05) * 1e6), 90), (int((wall0 + 0.15) * 1e6), 100)]
    assert s.sample(100.6, wall0 + 0.6)["gpu"]["util_samples"] is None  # not read at this tick
    g = s.sample(101.0, wall0 + 1.0)["gpu"]  # a second later: everything since the last read
    assert [v for _, v in g["util_samples"]] == [90, 100]
    assert [round(t, 3) for t, _ in g["util_samples"]] == [100.05, 100.15]
    assert s.sample(102.0, wall0 + 2.0)["gpu"]["util_samples"] == []  # nothing new: NOT_FOUND reads as empty


# ---------------------------------------------------------------------------------------------------------------------
# the loop


def run_on_a_fake_clock(tmp_path, dies_after: int, stall_at: int | None = None, cost: float = 0.0, **kw):
    """Run the sampler loop on a fake clock until the target dies after ``dies_after`` ticks; its records."""
    world = FakePsutil()
    s = make(world, tmp_path)
    out = tmp_path / "s.jsonl"
    clock = [100.0]
    calls = []

    def wait(seconds):
        clock[0] += seconds

    def stop():
        calls.append(clock[0])
        if len(calls) == stall_at:
            clock[0] += 0.45  # a stall (swap, a stopped VM) of more than two periods
        if len(calls) == dies_after:
            world.procs[MAIN]["dead"] = True
        clock[0] += cost  # each sample costs a little time
        return None

    with open(out, "w") as f:
        assert s.run(f, hz=5, stop=stop, wait=wait, clock=lambda: clock[0], **kw) == "target exited"
    return read_records(out)


def test_run_writes_start_samples_on_a_fixed_grid_and_end(tmp_path):
    recs = run_on_a_fake_clock(tmp_path, dies_after=8, stall_at=3, cost=0.013)
    assert recs[0]["type"] == "sampler_start" and recs[0]["t"] == 100.0
    assert recs[-1]["type"] == "sampler_end" and recs[-1]["reason"] == "target exited"
    samples = [r for r in recs if r["type"] == "sample"]
    assert recs[-1]["samples"] == len(samples) == 7
    ts = [round(r["t"] - 0.013, 6) for r in samples]
    # on the 0.2 s grid from the start, however long the samples take; the stall skips ticks instead of shifting
    assert ts == [100.2, 100.4, 101.05, 101.2, 101.4, 101.6, 101.8]
    assert recs[-1]["overruns"] == 2


def test_duty_cycle_samples_in_blocks_and_marks_each_switch(tmp_path):
    recs = run_on_a_fake_clock(tmp_path, dies_after=25, duty=(1.0, 1.5))  # 5 s at 5 Hz
    kinds = [r["type"] for r in recs if r["type"] != "sample"]
    assert kinds == ["sampler_start", "sampler_pause", "sampler_resume", "sampler_pause", "sampler_end"]
    switches = [round(r["t"], 6) for r in recs if r["type"] in ("sampler_pause", "sampler_resume")]
    assert switches == [101.0, 102.6, 103.6]  # on [100, 101), off [101, 102.5), on [102.5, 103.5) on the 0.2 s grid
    samples = [round(r["t"], 6) for r in recs if r["type"] == "sample"]
    assert samples == [100.2, 100.4, 100.6, 100.8, 102.6, 102.8, 103.0, 103.2, 103.4]
    assert recs[-1]["samples"] == len(samples)


@pytest.mark.parametrize("text", ["1", "a,b", "0,1", "1,-1", "1,2,3"])
def test_a_bad_duty_is_refused(text):
    from yolodoctor.profiling.sampler_process import parse_duty

    with pytest.raises(ValueError, match="--duty"):
        parse_duty(text)
    assert parse_duty("2,3") == (2.0, 3.0) and parse_duty(None) is None


def test_write_record_is_strict_json(tmp_path):
    import io

    buf = io.StringIO()
    write_record(buf, {"type": "sample", "mem": {"percent": float("nan")}, "x": [float("inf"), 1.5]})
    assert json.loads(buf.getvalue()) == {"type": "sample", "mem": {"percent": None}, "x": [None, 1.5]}


def test_read_records_drops_a_torn_last_line(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"type": "sampler_start"}\n{"type": "sample", "t": 1}\n{"type": "sam')
    assert [r["type"] for r in read_records(p)] == ["sampler_start", "sample"]


# ---------------------------------------------------------------------------------------------------------------------
# for real: a side process against a busy child

BUSY = ("import sys, time\nsys.stdin.readline()\nend = time.monotonic() + float(sys.argv[1])\n"
        "while time.monotonic() < end: pass\n")


def _busy(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUSY, str(seconds)], stdin=subprocess.PIPE, text=True)


def _reap(child: subprocess.Popen) -> None:
    child.kill()
    child.wait()
    child.stdin.close()


def test_real_sampler_against_a_busy_process(tmp_path):
    child = _busy(1.5)
    out = tmp_path / "run" / "sampler.jsonl"
    sampler = start_sampler(child.pid, out, hz=10)
    try:
        assert out.exists() and read_records(out)[0]["type"] == "sampler_start"
        child.stdin.write("go\n")
        child.stdin.flush()
        child.wait(timeout=30)  # until reaped it is a zombie, which the sampler reads as exited too
        assert sampler.wait(timeout=10) == 0
    finally:
        _reap(child)
        stop_sampler(sampler)
    recs = read_records(out)
    start, end = recs[0], recs[-1]
    assert start["pid"] == child.pid and start["sampler_pid"] == sampler.pid
    assert end == {**end, "type": "sampler_end", "reason": "target exited"}
    samples = [r for r in recs if r["type"] == "sample"]
    assert len(samples) >= 8
    ts = [r["t"] for r in samples]
    assert all(b > a for a, b in itertools.pairwise(ts))
    assert abs(ts[0] - time.monotonic()) < 60  # the same CLOCK_MONOTONIC as this process
    busy = [r["proc"]["cpu"] for r in samples if r["proc"] and r["proc"]["cpu"] is not None]
    assert sum(c > 50 for c in busy) >= 5, busy
    threads = [r["proc"]["thread"]["cpu"] for r in samples if r["proc"] and r["proc"]["thread"]["cpu"] is not None]
    assert max(threads) > 50  # the busy thread is seen as such
    assert all(r["cpu"]["percpu"] is not None and len(r["cpu"]["percpu"]) == os.cpu_count() for r in samples)


def test_sigkill_of_target_or_sampler_leaves_a_readable_file(tmp_path):
    child = _busy(60)
    child.stdin.write("go\n")
    child.stdin.flush()
    out = tmp_path / "a.jsonl"
    sampler = start_sampler(child.pid, out, hz=20)
    try:
        time.sleep(0.4)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        assert sampler.wait(timeout=10) == 0
    finally:
        _reap(child)
        stop_sampler(sampler)
    recs = read_records(out)
    assert recs[-1]["type"] == "sampler_end" and recs[-1]["reason"] == "target exited"
    assert sum(r["type"] == "sample" for r in recs) >= 3

    # the sampler itself killed outright: every line written so far still parses
    child = _busy(60)
    out2 = tmp_path / "b.jsonl"
    sampler = start_sampler(child.pid, out2, hz=20)
    try:
        time.sleep(0.4)
        sampler.kill()
        sampler.wait(timeout=10)
    finally:
        _reap(child)
    lines = out2.read_text().splitlines()
    assert len(lines) >= 3 and all(json.loads(line)["type"] in ("sampler_start", "sample") for line in lines)


def test_stop_sampler_is_graceful(tmp_path):
    child = _busy(60)
    out = tmp_path / "s.jsonl"
    sampler = start_sampler(child.pid, out, hz=5)
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        assert stop_sampler(sampler) == 0
        assert time.monotonic() - t0 < 2.0  # the signal cuts the sleep short
    finally:
        _reap(child)
    recs = read_records(out)
    assert recs[-1]["type"] == "sampler_end" and recs[-1]["reason"] == "stopped"
    assert recs[-1]["self_cpu_pct"] is not None


def test_read_records_of_a_fifo_fails_at_once(tmp_path):
    fifo = tmp_path / "samples.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        read_records(fifo)


def test_ranks_are_told_apart_by_their_environment_and_their_roles_files(tmp_path):
    from types import SimpleNamespace

    from yolodoctor.profiling.procfs import ProcState
    from yolodoctor.profiling.roles import RolesFile, by_rank, read_rank

    class Proc(SimpleNamespace):
        def environ(self):
            return self.env

    st = ProcState(Proc(env={"RANK": "1", "WORLD_SIZE": "2"}))
    read_rank(st, ())
    assert (st.rank, st.rank_read) == (1, True)
    alone = ProcState(Proc(env={}))
    read_rank(alone, ())
    assert alone.rank is None and alone.rank_read
    (tmp_path / "roles.json").write_text(json.dumps({"21": "train_worker"}))
    (tmp_path / "roles-rank1.json").write_text(json.dumps({"31": "train_worker", "32": "val_worker"}))
    roles = RolesFile(tmp_path / "roles.json")
    assert roles.reload() and roles.by_pid == {21: "train_worker", 31: "train_worker", 32: "val_worker"}
    assert not roles.reload()  # unchanged
    rows = [{"pid": 2, "ppid": 1, "rank": 0, "cpu": 95.0, "rss": 100, "role": "other"},
            {"pid": 21, "ppid": 2, "rank": 0, "cpu": 40.0, "rss": 10, "role": "train_worker"},
            {"pid": 3, "ppid": 1, "rank": 1, "cpu": 60.0, "rss": 100, "role": "other"},
            {"pid": 31, "ppid": 3, "rank": 1, "cpu": 20.0, "rss": 10, "role": "train_worker"},
            {"pid": 32, "ppid": 3, "rank": 1, "cpu": 5.0, "rss": 10, "role": "val_worker"},
            {"pid": 4, "ppid": 1, "cpu": 1.0, "rss": 5, "role": "other"}]  # the launcher's helper: no rank
    assert by_rank(rows) == {"0": {"pid": 2, "cpu": 95.0, "workers": 1, "workers_cpu": 40.0, "rss": 110},
                             "1": {"pid": 3, "cpu": 60.0, "workers": 1, "workers_cpu": 20.0, "rss": 120}}
    assert by_rank(rows[-1:]) == {}


def test_each_rank_is_given_the_gpu_its_process_runs_on():
    from yolodoctor.profiling.gpu import RankGpus

    lib = FakeNvmlLib([dict(T4, util=10, pids=[999]), dict(H200, util=97, mem_used=40 << 30, pids=[3]),
                       dict(H200, uuid="GPU-second", util=55, pids=[2, 7])])
    gpus = RankGpus(Nvml.open(lib))
    ranks = {"0": {"pid": 2}, "1": {"pid": 3}, "2": {"pid": 4}}
    gpus.annotate(ranks, now=0.0)
    assert ranks["0"]["gpu"] == {"index": 2, "uuid": "GPU-second", "util": 55, "mem_used": 0}
    assert ranks["1"]["gpu"]["uuid"] == H200["uuid"] and ranks["1"]["gpu"]["util"] == 97
    assert "gpu" not in ranks["2"]  # NVML lists no GPU for that process (another namespace, or not started yet)
    lib.gpus[1]["pids"], lib.gpus[1]["util"] = [4], 12  # rank 2 starts: seen at the next scan, not before
    later = {"2": {"pid": 4}}
    gpus.annotate(later, now=1.0)
    assert "gpu" not in later["2"]
    gpus.annotate(later, now=10.0)
    assert later["2"]["gpu"]["util"] == 12
    RankGpus(Nvml.open(FakeNvmlLib([], init_error="Driver Not Loaded"))).annotate(later, now=0.0)  # no NVML: quiet


def test_the_gpus_nvlink_links_are_counted_where_nvml_reports_them():
    nvml = Nvml.open(FakeNvmlLib([dict(H200, nvlink=[1] * 18), dict(T4), dict(H200, nvlink=[1, 0, 1])]))
    assert [nvml.nvlink_links(h) for h in (0, 1, 2)] == [18, 0, 2]  # a PCIe-only card: NVML says not supported
