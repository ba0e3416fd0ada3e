"""A killed run's private dir is removed by a later run, and nothing else is: real processes, real dirs.

(tests/test_scheduler.py SIGKILLs a real sweep and watches its children die and their dirs go.)
"""
import os
import subprocess
import sys
import time

from ort_gpu_matrix.util.orphans import clean_stale_workdirs, new_workdir, owner
from ort_gpu_matrix.util.voice import Voice, unheard


def _start_time(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]


def test_only_the_dirs_of_runs_that_are_gone_are_removed(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone_start = _start_time(gone.pid)
    gone.wait()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exits, and is not reaped until the end
    zombie_start = _start_time(zombie.pid)
    while open(f"/proc/{zombie.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)
    me, mine = os.getpid(), _start_time(os.getpid())
    made = {
        "dead": tmp_path / f"ort-matrix-s-normal-p{gone.pid}.{gone_start}-abc123de",
        "zombie": tmp_path / f"ort-matrix-s-teeth-p{zombie.pid}.{zombie_start}-abc123de",
        "reused pid": tmp_path / f"ort-matrix-s-normal-p{me}.{int(mine) + 1}-abc123de",  # this pid, another process
        "live": tmp_path / f"ort-matrix-s-normal-p{me}.{mine}-abc123de",
        "unstamped": tmp_path / "ort-matrix-s-normal-abc123de",  # an older version's: its owner is unknown
        "not ours": tmp_path / f"other-s-normal-p{gone.pid}.{gone_start}-abc123de",
    }
    for d in made.values():
        d.mkdir()
        (d / "junit.xml").write_text("x")
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / f"ort-matrix-link-p{gone.pid}.{gone_start}-abc123de"
    link.symlink_to(target)  # a symlink named like a stale dir is never followed
    plain = tmp_path / f"ort-matrix-file-p{gone.pid}.{gone_start}-abc123de"
    plain.write_text("a file")

    removed = clean_stale_workdirs(tmp_path)
    zombie.wait()
    assert sorted(removed) == sorted([made["dead"], made["zombie"], made["reused pid"]])
    assert not made["dead"].exists() and not made["zombie"].exists() and not made["reused pid"].exists()
    assert all(made[k].is_dir() for k in ("live", "unstamped", "not ours"))
    assert link.is_symlink() and target.is_dir() and plain.is_file()


def test_a_run_dir_is_private_and_named_for_its_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    d = new_workdir("gpu-3.12-x-teeth", Voice.plain(log=unheard))
    assert d.parent == tmp_path and d.name.startswith("ort-matrix-gpu-3.12-x-teeth-p")
    assert owner(d.name) == (os.getpid(), _start_time(os.getpid()))
    assert d.stat().st_mode & 0o777 == 0o700
    assert clean_stale_workdirs(tmp_path) == [] and d.is_dir()  # its maker (this process) runs
