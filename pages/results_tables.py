"""Write the generated documentation pages from the committed results (or check them).

The pages (docs/results.md and its three pages, findings.md, learned_structure.md,
data_size.md, speed.md, models.md, relaxed-resnet.md) are Jinja2 templates under
``pages/templates/`` rendered by :mod:`pages.render_pages` over one pandas table of every
committed run (:mod:`pages.runs_table`); its docstring says why they are rendered ahead of time
into committed Markdown. No table or figure in them is typed by hand:
``tests/pages/test_results_tables.py`` runs ``--check`` in ``make test``, which renders
every page again and fails while one differs from the committed file.

Usage (from the repository root):
    python -m pages.results_tables            # writes the files
    python -m pages.results_tables --check    # exits 1 if one is stale
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path

from pages import render_pages


def documents() -> dict[Path, Callable[[], str]]:
    """Every generated page's path and the function that renders its text."""
    return {
        render_pages.DOCS / name: functools.partial(render_pages.render, name)
        for name in render_pages.PAGES
    }


def stale(pages: dict[Path, Callable[[], str]]) -> list[Path]:
    """The pages whose committed text differs from what they render (or that are missing)."""
    return [
        path for path, render in pages.items() if not path.exists() or path.read_text() != render()
    ]


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) every generated document; 1 if one is stale."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    pages = documents()
    if args.check:
        found = stale(pages)
        if found:
            names = ", ".join(map(str, found))
            print(f"stale: {names}; run python -m pages.results_tables")
        return int(bool(found))
    for path, render in pages.items():
        path.write_text(render())
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
