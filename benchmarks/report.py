"""What every benchmark records beside its figures, and how it writes them."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import laplace_equivariance
from laplace_equivariance.app.experiment import device_name

RESULTS = Path(__file__).resolve().parent / "results"
"""Where the speed benchmarks' reports are committed."""


def benchmark_parser(doc: str) -> argparse.ArgumentParser:
    """The options every timing benchmark takes: ``--device`` and ``--out``.

    Args:
        doc: The script's docstring; its first line describes the command.

    Returns:
        A parser to which the script adds its own options.
    """
    arguments = argparse.ArgumentParser(description=doc.splitlines()[0])
    arguments.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    arguments.add_argument("--out", type=Path, help="JSON file for the figures")
    return arguments


def package_commit() -> str:
    """The git commit of the imported ``laplace_equivariance`` (``+dirty`` with local changes),
    or ``"unknown"`` outside a git checkout."""
    folder = Path(laplace_equivariance.__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if changes else "")


def environment(script: str, device: str) -> dict[str, Any]:
    """The command that reproduces the run, the code it ran, the machine and the versions."""
    return {
        "command": " ".join(["python", script, *sys.argv[1:]]),
        "package_commit": package_commit(),
        "device": device_name(device),
        "cpu_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def timings(run: Callable[[], object], repeats: int, device: str) -> list[float]:
    """Seconds of ``repeats`` calls of ``run`` after one warm-up call, synchronising CUDA."""
    run()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times


def write(report: dict[str, Any], out: Path | None) -> None:
    """Write ``report`` as JSON to ``out`` (if given) and say so."""
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
