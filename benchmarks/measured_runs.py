"""The command line and output file shared by the scripts that measure trained runs.

``factor_balance.py``, ``shift_errors.py`` and ``evidence_split.py`` each take ``--out``
folders of ``train`` runs and write one JSON file ``{"device", "threads", "runs": [...]}``
(the form ``benchmarks/generated_docs/results_sections.py`` renders).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from laplace_equivariance.experiment import device_name


def parser(description: str) -> argparse.ArgumentParser:
    """A parser taking the runs, ``--out`` and ``--threads`` (add a script's own options)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("runs", type=Path, nargs="+", help="--out folders of learned runs")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--threads", type=int, default=1)
    return parser


def parse(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The parsed arguments, with torch's CPU threads set to ``--threads``."""
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    return args


def write(out: Path, threads: int, measured: list[dict[str, Any]]) -> None:
    """Write the measurements of every run, with the CPU and thread count, to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"device": device_name("cpu"), "threads": threads, "runs": measured}, indent=1)
    )
