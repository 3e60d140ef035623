import json
import os
import socket
import subprocess
import sys

import pytest

from laplace_equivariance.app.cli import main
from laplace_equivariance.app.run_lock import LOCK_FILE, run_lock

TINY_MAP_RUN = [
    "train",
    "--model",
    "conv",
    "--method",
    "map",
    "--subset",
    "32",
    "--test-subset",
    "16",
    "--epochs",
    "1",
    "--alpha",
    "1",
    "--device",
    "cpu",
]


@pytest.fixture
def other_process():
    """A live process that is not this one."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process.pid
    process.kill()
    process.wait()


def dead_pid() -> int:
    """The id of a process of this host that has exited."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def write_lock(folder, host: str, pid: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOCK_FILE).write_text(json.dumps({"host": host, "pid": pid}))


def test_the_lock_names_this_process_while_held_and_is_gone_after(tmp_path):
    out = tmp_path / "new" / "run"
    with run_lock(out):
        owner = json.loads((out / LOCK_FILE).read_text())
        assert owner == {"host": socket.gethostname(), "pid": os.getpid()}
    assert not (out / LOCK_FILE).exists()


def test_the_lock_is_released_when_the_block_raises(tmp_path):
    with pytest.raises(RuntimeError, match="inside"), run_lock(tmp_path):
        raise RuntimeError("inside")
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_folder_held_by_a_live_process_is_refused_naming_it(tmp_path, other_process):
    write_lock(tmp_path, socket.gethostname(), other_process)
    with pytest.raises(SystemExit, match=rf"in use: process {other_process} on .*delete"):
        with run_lock(tmp_path):
            pytest.fail("entered a folder another process holds")
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == other_process


def test_a_second_lock_of_the_same_folder_is_refused(tmp_path):
    with run_lock(tmp_path), pytest.raises(SystemExit, match=f"process {os.getpid()}"):
        with run_lock(tmp_path):
            pytest.fail("entered a folder held twice")


def test_a_stale_lock_of_a_process_that_is_gone_is_taken_over(tmp_path):
    write_lock(tmp_path, socket.gethostname(), dead_pid())
    with run_lock(tmp_path):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert not (tmp_path / LOCK_FILE).exists()


@pytest.mark.parametrize(
    "content", [json.dumps({"host": "another-host", "pid": 1}), "", "not json"]
)
def test_a_lock_that_cannot_be_checked_is_respected(tmp_path, content):
    """Another host's process cannot be looked up; an unreadable lock names no process."""
    (tmp_path / LOCK_FILE).write_text(content)
    with pytest.raises(SystemExit, match="in use: (process 1 on another-host|another process)"):
        with run_lock(tmp_path):
            pytest.fail("entered a folder whose lock cannot be checked")


def test_train_refuses_a_folder_in_use_and_leaves_no_lock_when_it_ends(tmp_path, other_process):
    busy, free = tmp_path / "busy", tmp_path / "free"
    write_lock(busy, socket.gethostname(), other_process)
    with pytest.raises(SystemExit, match="is in use"):
        main([*TINY_MAP_RUN, "--out", str(busy)])
    assert not (busy / "run.json").exists()
    assert main([*TINY_MAP_RUN, "--out", str(free)]) == 0
    assert (free / "results.json").exists() and not (free / LOCK_FILE).exists()
