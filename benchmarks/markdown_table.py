"""How the lab's tables are written as Markdown: a pandas frame (:func:`table`), or rows of cells
under a header (:func:`rows_table`).

The speed benchmarks' tables (:mod:`benchmarks.speed_tables`), the studies' and the generated
pages (:mod:`pages.render_pages`, as ``table``) all write theirs with it, so every table in the
documentation has one layout.
"""

from __future__ import annotations

import pandas as pd


def table(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table: its cells as they are, columns neither aligned nor padded
    (the rule under the header ``|---|`` per column, so a changed cell changes one line)."""
    text = frame.to_markdown(index=False, stralign=None, numalign=None, disable_numparse=True)
    header, _, *rows = text.splitlines()
    return "\n".join([header, "|" + "---|" * frame.shape[1], *rows])


def rows_table(header: list[str], rows: list[list[str]]) -> str:
    """``rows`` of cells under ``header`` as a Markdown table (:func:`table`); a short row (a
    failed run's) is padded with empty cells."""
    padded = [row + [""] * (len(header) - len(row)) for row in rows]
    return table(pd.DataFrame(padded, columns=header))
