"""What the generated documents share: paths, loading, the markdown table, statistics."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def difference(x: list[float], y: list[float]) -> tuple[float, float]:
    """Mean of ``x`` minus mean of ``y``, and its standard error over the seeds (>= 2 each)."""
    diff = statistics.fmean(x) - statistics.fmean(y)
    return diff, math.sqrt(statistics.variance(x) / len(x) + statistics.variance(y) / len(y))


def release(version: str) -> tuple[int, ...]:
    """``"0.10.0"`` -> ``(0, 10, 0)``, comparable as release numbers."""
    return tuple(int(part) for part in version.split("."))


def load_json(name: str) -> dict:
    """A results file under benchmarks/results/."""
    return json.loads((RESULTS / name).read_text())


def machine(report: dict) -> str:
    """A timing report's device, threads and torch version."""
    environment = report.get("environment", report)
    return (
        f"{environment['device']}, "
        f"{environment.get('cpu_threads', environment.get('threads'))} threads, "
        f"torch {environment['torch']}"
    )


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table of ``rows`` under ``header``."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def write_between_markers(
    document: Path, markers: tuple[str, str], content: str, check: bool, command: str
) -> None:
    """Put ``content`` between the two marker lines of ``document`` (or check that it is there).

    Args:
        document: A markdown file holding both markers.
        markers: The begin and end marker lines.
        content: The generated text.
        check: Only compare.
        command: The command that regenerates it, for the stale message.

    Raises:
        SystemExit: With ``check``, if the document's text differs.
    """
    begin, end = markers
    text = document.read_text()
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    updated = f"{head}{begin}\n{content}\n{end}{tail}"
    if check:
        if updated != text:
            raise SystemExit(f"{document} is stale: run {command}")
        return
    document.write_text(updated)
