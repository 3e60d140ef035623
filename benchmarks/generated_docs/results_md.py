"""docs/results.md: every committed training run as mean ± std over seeds, and the paper's claims.

The sections (:mod:`benchmarks.generated_docs.results_manifest`) rendered in order
(:mod:`benchmarks.generated_docs.results_sections`), then every figure placeholder of their
narrative replaced by its value (:mod:`benchmarks.generated_docs.figures`).
"""

from __future__ import annotations

from benchmarks.generated_docs import figures
from benchmarks.generated_docs.common import ROOT
from benchmarks.generated_docs.results_manifest import SECTIONS

DOCUMENT = ROOT / "docs" / "results.md"


HEADER = ROOT / "benchmarks" / "generated_docs" / "fragments" / "results" / "header.md"


def render() -> str:
    """The whole of docs/results.md."""
    text = HEADER.read_text() + "\n" + "\n\n".join(section.render() for section in SECTIONS) + "\n"
    return figures.render(text)
