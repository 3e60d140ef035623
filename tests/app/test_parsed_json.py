import json
import os

import pytest

from laplace_equivariance.app import parsed_json
from laplace_equivariance.app.parsed_json import read_json


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The texts ``json.loads`` parsed during the test (the cache emptied first)."""
    monkeypatch.setattr(parsed_json, "_parsed", type(parsed_json._parsed)())
    seen, original = [], json.loads

    def counting(text, *args, **kwargs):
        seen.append(text)
        return original(text, *args, **kwargs)

    monkeypatch.setattr(parsed_json.json, "loads", counting)
    return seen


def test_a_file_read_again_unchanged_is_parsed_once(tmp_path, parses):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"test": {"accuracy": 0.5}, "epochs": [1, 2]}))
    assert read_json(path) == read_json(path) == {"test": {"accuracy": 0.5}, "epochs": [1, 2]}
    assert len(parses) == 1


def test_every_read_returns_its_own_object(tmp_path, parses):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"epochs": [1, 2]}))
    first = read_json(path)
    first["epochs"].append(3)
    second = read_json(path)
    assert second == {"epochs": [1, 2]}
    second["epochs"].clear()
    assert read_json(path) == {"epochs": [1, 2]}


def test_a_rewritten_file_is_parsed_again(tmp_path, parses):
    path = tmp_path / "results.json"
    path.write_text('{"seed": 0}')
    assert read_json(path) == {"seed": 0}
    path.write_text('{"seed": 10}')  # another size
    assert read_json(path) == {"seed": 10}
    stat = path.stat()
    path.write_text('{"seed": 11}')  # the same size, a later modification time
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert read_json(path) == {"seed": 11}
    same = path.stat()
    path.write_text('{"seed": 12}')  # the same size and modification time: told apart by content
    os.utime(path, ns=(same.st_atime_ns, same.st_mtime_ns))
    assert read_json(path) == {"seed": 12}
    assert len(parses) == 4


def test_the_least_recently_read_file_is_dropped_beyond_max_files(tmp_path, parses, monkeypatch):
    monkeypatch.setattr(parsed_json, "MAX_FILES", 2)
    paths = [tmp_path / f"{i}.json" for i in range(3)]
    for i, path in enumerate(paths):
        path.write_text(json.dumps(i))
    read_json(paths[0])
    read_json(paths[1])
    read_json(paths[0])  # now paths[1] is the least recently read
    read_json(paths[2])
    assert len(parses) == 3
    read_json(paths[0])
    assert len(parses) == 3
    read_json(paths[1])
    assert len(parses) == 4


def test_a_missing_or_corrupt_file_raises_as_json_would(tmp_path, parses):
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"seed": ')
    with pytest.raises(json.JSONDecodeError):
        read_json(corrupt)
