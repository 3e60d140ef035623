"""``benchmarks/measured_runs.py``: the command line and JSON file of the scripts that measure
trained runs."""

import json
import sys
from pathlib import Path

from benchmarks import measured_runs


def test_the_parser_takes_runs_out_and_threads(monkeypatch, tmp_path):
    parser = measured_runs.parser("measure")
    parser.add_argument("--images", type=int, default=3)
    argv = ["script", "a", "b", "--out", str(tmp_path / "m.json"), "--threads", "2"]
    monkeypatch.setattr(sys, "argv", argv)
    args = measured_runs.parse(parser)
    assert args.runs == [Path("a"), Path("b")] and args.threads == 2 and args.images == 3


def test_the_file_names_the_machine_and_threads_beside_the_runs(tmp_path):
    out = tmp_path / "deeper" / "m.json"
    measured_runs.write(out, 2, [{"run": "a"}])
    written = json.loads(out.read_text())
    assert written["threads"] == 2 and written["runs"] == [{"run": "a"}]
    assert isinstance(written["device"], str) and written["device"]
