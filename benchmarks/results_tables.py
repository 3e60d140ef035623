"""Write docs/results*.md, findings.md, data_size.md, speed.md, models.md from the results.

One module of :mod:`benchmarks.generated_docs` per document, their shared pieces (paths,
loading, the markdown table, the difference of two seed sets) in its ``common``:

- ``results_table1_md``, ``results_table2_md``, ``results_table3_md``: every committed
  training run as mean ± std over seeds, and the paper's claims judged by the seed spread, one
  page per table of the paper (each module lists its sections; ``results_sections`` renders
  them; narrative in ``fragments/results/``), and ``results_md`` their index;
- ``speed_md``: the timing benchmarks' JSON files as tables, with their targets;
- ``findings_md``: what the committed runs show (a Markdown fragment whose figures are
  rendered from the runs, :mod:`benchmarks.generated_docs.figures`);
- ``learned_structure_md``: what is learned and why (a fragment, the same way);
- ``data_size_md``: Table 1 against the training-set size, with the learned row's verdict at
  each size and the structure each learned run chose;
- ``models_md``: every model's parameter count beside the reference code's and the paper's.

No table in these files is typed by hand, and the narrative's figures are placeholders
rendered from the runs (``figures``): ``tests/benchmarks/test_results_tables.py`` regenerates
the files and compares.

Usage (from the repository root):
    python -m benchmarks.results_tables            # writes the files
    python -m benchmarks.results_tables --check    # exits 1 if one is stale
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.generated_docs import (
    data_size_md,
    findings_md,
    learned_structure_md,
    models_md,
    results_md,
    speed_md,
)

DOCUMENTS = (
    results_md,
    *results_md.PAGES,
    findings_md,
    learned_structure_md,
    data_size_md,
    speed_md,
    models_md,
)
"""Each module's ``DOCUMENT`` path and ``render()``."""


def main() -> int:
    """Write (or with ``--check`` compare) every generated document; 1 if one is stale."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    stale = []
    for module in DOCUMENTS:
        path, text = module.DOCUMENT, module.render()
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print("stale: " + ", ".join(map(str, stale)) + "; run python -m benchmarks.results_tables")
    return int(bool(stale))


if __name__ == "__main__":
    sys.exit(main())
