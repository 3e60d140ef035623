"""JSON files read again and again, parsed once per version of the file.

The generated docs read the committed runs' ``results.json`` (hundreds of files of about
100 KB) once per table that shows them, about 24,000 reads of 815 files in all: parsing was
most of the generation's time. :func:`read_json` parses a file once per content (a hash of
its bytes, read at every call, so a rewrite is never missed, however coarse the file system's
clock) and gives every later read a fresh copy from a pickle of the parsed value, about four
times cheaper than parsing the text again. Each read returns its
own object, so a caller that changes what it got changes no other caller's.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Any

__all__ = ["MAX_FILES", "read_json"]

MAX_FILES = 2048
"""Files whose parsed value is kept (the least recently read is dropped first)."""

_parsed: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()


def read_json(path: Path) -> Any:
    """``json.loads(path.read_text())``, parsed once while the file's bytes are unchanged.

    Args:
        path: A JSON file.

    Returns:
        The parsed value, a new object at every call.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        json.JSONDecodeError: If ``path`` is not valid JSON.
    """
    key = str(path)
    text = Path(path).read_bytes()
    version = hashlib.blake2b(text).digest()
    cached = _parsed.get(key)
    if cached is not None and cached[0] == version:
        _parsed.move_to_end(key)
        return pickle.loads(cached[1])
    value = json.loads(text.decode())
    _parsed[key] = (version, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    _parsed.move_to_end(key)
    while len(_parsed) > MAX_FILES:
        _parsed.popitem(last=False)
    return value
