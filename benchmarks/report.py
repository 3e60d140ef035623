"""What every benchmark records beside its figures, and how it writes them."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from laplace_equivariance.cli import device_name


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


def environment(script: str, device: str) -> dict[str, Any]:
    """The command that reproduces the run, the machine and the versions."""
    return {
        "command": " ".join(["python", script, *sys.argv[1:]]),
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
