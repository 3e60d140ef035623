"""The GPU run lists (studies/runs/) name runs that `train` accepts, each once."""

import shlex
from pathlib import Path

import pytest

from laplace_equivariance.app import cli

LISTS = sorted((Path(__file__).resolve().parents[2] / "studies" / "runs").glob("*.txt"))


def _runs(path: Path) -> list[tuple[str, list[str]]]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return [(line.split()[0], shlex.split(line)[1:]) for line in lines]


@pytest.mark.parametrize("path", LISTS, ids=[p.stem for p in LISTS])
def test_every_line_of_a_run_list_is_a_train_command_with_its_own_name(path):
    runs = _runs(path)
    assert runs, f"{path.name} names no run"
    names = [name for name, _ in runs]
    assert len(set(names)) == len(names), f"{path.name} repeats a run name"
    parser = cli._parser()
    for name, args in runs:
        # gpu_side_by_side.sh adds the device, threads, seed and output folder
        line = ["train", *args, "--device", "cuda", "--threads", "1", "--seed", "0", "--out", "x"]
        parsed = parser.parse_args(line)
        assert parsed.command == "train", name
