"""The Markdown writer of every table in the documentation (``benchmarks.markdown_table``)."""

import pandas as pd

from benchmarks.markdown_table import rows_table, table


def test_table_writes_the_cells_as_they_are():
    frame = pd.DataFrame({"model": ["conv", "fc"], "acc": ["82.0 ± 2.0", "1,000"]})
    assert table(frame) == ("| model | acc |\n|---|---|\n| conv | 82.0 ± 2.0 |\n| fc | 1,000 |")


def test_rows_table_pads_a_short_row_with_empty_cells():
    # a failed run's row (speed_tables' compiled section: code, model, mode, error) is short
    rows = [
        ["e474c36", "conv", "default", "error text"],
        ["e474c36", "fc", "default", "1 s", "2 s"],
    ]
    assert rows_table(["code", "model", "mode", "epoch", "training"], rows) == (
        "| code | model | mode | epoch | training |\n|---|---|---|---|---|\n"
        "| e474c36 | conv | default | error text |  |\n| e474c36 | fc | default | 1 s | 2 s |"
    )
