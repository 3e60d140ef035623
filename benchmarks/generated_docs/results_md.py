"""docs/results.md: the index of the results, one page per table of the paper.

Each page (``results_table1_md``, ``results_table2_md``, ``results_table3_md``) lists its
sections (which runs, their command, the claims judged, the narrative) and renders them with
:mod:`benchmarks.generated_docs.results_sections`; this page says how to read a row and links
every section of every page.
"""

from __future__ import annotations

from benchmarks.generated_docs import results_table1_md, results_table2_md, results_table3_md
from benchmarks.generated_docs.common import ROOT
from benchmarks.generated_docs.results_sections import anchor

DOCUMENT = ROOT / "docs" / "results.md"

HEADER = ROOT / "benchmarks" / "generated_docs" / "fragments" / "results" / "header.md"

PAGES = (results_table1_md, results_table2_md, results_table3_md)
"""The results' pages in the paper's order, each a module with ``DOCUMENT``, ``TITLE``,
``SECTIONS`` and ``render()``."""


def render() -> str:
    """The whole of docs/results.md: how to read a row, then every page's sections as links."""
    lines = [HEADER.read_text().removesuffix("\n")]
    for page in PAGES:
        name = page.DOCUMENT.name
        lines += ["", f"## [{page.TITLE}]({name})", ""]
        lines += [f"- [{s.title}]({name}#{anchor(s.title)})" for s in page.SECTIONS]
    return "\n".join(lines) + "\n"
