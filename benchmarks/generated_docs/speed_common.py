"""What every section of docs/speed.md shares: its fragment, its reports' commands, targets."""

from __future__ import annotations

from benchmarks.generated_docs import figures
from benchmarks.generated_docs.common import ROOT, machine

FRAGMENTS = ROOT / "benchmarks" / "generated_docs" / "fragments" / "speed"


def met(value: float, target: float) -> str:
    """``"yes"`` where ``value`` is at most ``target``, else a bold ``"no"``."""
    return "yes" if value <= target else "**no**"


def speed_section(name: str, reports: list[dict], table: str, **inserts: str) -> str:
    """The section of fragment ``speed/NAME.md`` (title and what was measured, its figures
    rendered, ``inserts`` at its table markers), the reports' commands and machines, ``table``."""
    runs = [
        f"`{report.get('environment', report)['command']}` ({machine(report)})"
        for report in reports
    ]
    text = figures.render_fragment(FRAGMENTS / f"{name}.md", **inserts).rstrip("\n")
    return "\n".join([text, "", "; ".join(runs), "", table])
