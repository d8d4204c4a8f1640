"""A real "disk full" while yolodoctor writes its run directory. Run inside a private mount namespace:

    unshare --user --map-root-user --mount python fill_disk.py KEEP -- yolodoctor ARGS (with --out @RUN)

It mounts a small tmpfs, runs the command with @RUN replaced by a run directory on it, and as soon as the training has
recorded its first step fills the tmpfs to the last byte (from then on every write there fails with ENOSPC). When the
command ends it copies the run directory to KEEP/run (the tmpfs goes with the namespace) and writes KEEP/result.json;
it exits with the command's exit code."""

import errno
import json
import os
import shutil
import subprocess
import sys
import time


def fill(path: str) -> None:
    """Write zeros until the file system refuses even one more page."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 20, 1 << 16, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)


def main() -> int:
    keep, _, *command = sys.argv[1:]
    mnt = os.path.join(keep, "mnt")  # the tmpfs is seen only inside this namespace
    os.makedirs(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt], check=True)
    run = os.path.join(mnt, "run")
    proc = subprocess.Popen([run if w == "@RUN" else w for w in command])
    filled, free_after = None, None
    events = os.path.join(run, "events.jsonl")
    while proc.poll() is None:
        try:
            with open(events) as fh:
                stepped = '"type": "step"' in fh.read()
        except OSError:
            stepped = False
        if stepped:
            fill(os.path.join(mnt, "filler"))
            filled = time.monotonic()
            free_after = shutil.disk_usage(mnt).free
            break
        time.sleep(0.02)
    rc = proc.wait()
    shutil.copytree(run, os.path.join(keep, "run"))
    with open(os.path.join(keep, "result.json"), "w") as fh:
        json.dump({"rc": rc, "filled": filled is not None, "free_after_fill": free_after}, fh)
    return rc


if __name__ == "__main__":
    sys.exit(main())
