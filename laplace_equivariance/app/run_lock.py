"""One writer per run folder: ``train`` holds a lock file in ``--out`` while it writes there.

Two processes training into the same ``--out`` (a resumable sweep started twice, a job
restarted while its first copy still runs) would both resume from the same checkpoint and
overwrite each other's checkpoints, fit trace and results: a run's files would then mix
two runs without any error. :func:`run_lock` makes the second writer stop at once instead,
naming the first.

The lock is the file :data:`LOCK_FILE`, created atomically (``O_CREAT | O_EXCL``), holding
the host name and process id of its owner, and removed when the run ends, normally or by
an exception. A lock left by a process that no longer exists on this host (killed with
SIGKILL, a crashed machine) is stale and taken over; a lock of another host cannot be
checked and is respected.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LOCK_FILE", "run_lock"]

LOCK_FILE = ".train.lock"
"""File in ``--out`` that a running ``train`` holds."""


def _alive(pid: int) -> bool:
    """Whether a process with this id exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _owner(path: Path) -> dict | None:
    """The owner recorded in a lock file; None if it is unreadable (being written, or torn)."""
    try:
        owner = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def _create(path: Path) -> bool:
    """Create the lock file with this process as owner; False if it exists."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w") as lock:
        json.dump({"host": socket.gethostname(), "pid": os.getpid()}, lock)
    return True


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold ``out``/:data:`LOCK_FILE` for the duration of the block.

    Creates ``out`` if needed. A stale lock (its process gone from this host) is replaced.

    Args:
        out: The run folder.

    Raises:
        SystemExit: If another live process, or a process on another host, holds the lock
            (naming it and the file to delete if that process is known to be gone), ``out``
            is a file, or ``out`` cannot be written.
    """
    path = out / LOCK_FILE
    if out.exists() and not out.is_dir():
        raise SystemExit(f"--out {out} is a file, not a folder: give a folder for the run's files.")
    try:
        out.mkdir(parents=True, exist_ok=True)
        created = _create(path)
        if not created:
            owner = _owner(path)
            stale = (
                owner is not None
                and owner.get("host") == socket.gethostname()
                and isinstance(owner.get("pid"), int)
                and not _alive(owner["pid"])
            )
            if not stale:
                who = (
                    f"process {owner.get('pid')} on {owner.get('host')}"
                    if owner
                    else "another process"
                )
                raise SystemExit(
                    f"--out {out} is in use: {who} is training there ({path}). Wait for it to "
                    f"finish, or use another --out; if that process is gone, delete {path}."
                )
            path.unlink(missing_ok=True)
            created = _create(path)
            if not created:
                raise SystemExit(
                    f"--out {out} was taken by another process while its stale lock was "
                    f"being replaced ({path}): use another --out, or try again."
                )
    except OSError as error:
        raise SystemExit(f"--out {out}: cannot write there ({error.strerror}).") from None
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
