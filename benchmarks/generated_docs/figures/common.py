"""Shared by the figure families: how numbers are written and placeholder options read."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.generated_docs.common import RESULTS


def seed_list(values: list[float], digits: int = 1) -> str:
    return " / ".join(f"{v:,.{digits}f}" for v in values)


def count_list(values: list[int]) -> str:
    """Per-seed counts as prose: ``"5, 6 and 6"``."""
    words = [str(v) for v in values]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def layer_slice(spec: str | None) -> slice:
    """``"7"`` -> layer 7 alone, ``"1-6"`` -> layers 1 to 6 (numbered from 1), None -> all."""
    if spec is None:
        return slice(None)
    first, _, last = spec.partition("-")
    return slice(int(first) - 1, int(last or first))


def span(values: list[float], digits: int) -> str:
    """``"lo-hi"`` at ``digits`` decimals, one value where both round alike."""
    low, high = f"{min(values):,.{digits}f}", f"{max(values):,.{digits}f}"
    return low if low == high else f"{low}-{high}"


def scientific(value: float) -> str:
    """``2.8e5``, ``164``, ``6.5``, ``5e-5``: two significant digits below 100 (whole numbers
    from 100), with an exponent outside ``[0.01, 1e4)``."""
    if 100 <= value < 1e4:
        return f"{value:,.0f}"
    if 0.01 <= value < 100:
        return f"{value:.2g}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def parse_options(words: list[str], allowed: tuple[str, ...]) -> dict[str, str]:
    """``key=value`` words as a dict.

    Raises:
        ValueError: If a key is not one of ``allowed``.
    """
    options = dict(w.split("=", 1) for w in words)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown keys {unknown}; keys: {list(allowed)}.")
    return options


def results_file(name: str) -> Any:
    """The JSON of ``benchmarks/results/NAME.json``.

    Raises:
        ValueError: If there is no such file.
    """
    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise ValueError(f"benchmarks/results/{name}.json does not exist.")
    return json.loads(path.read_text())


def signed(value: float, digits: int) -> str:
    """``+1.4`` or ``\u22121.4`` (a minus sign, not a hyphen), thousands separated."""
    return f"{value:+,.{digits}f}".replace("-", "\u2212")
