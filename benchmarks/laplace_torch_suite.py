"""A pytest plugin: laplace-torch's own test suite with EquivariantKFAC for its Kron backends.

Every ``KronLaplace`` (and subclass) that laplace-torch's tests build with the default,
``AsdlGGN`` or ``AsdlEF`` backend gets the backend named by ``SWAP_TO`` instead:
``EquivariantKFAC``, or ``AsdlGGN`` for the control run. The two runs' outcomes, test by
test, say where the drop-in differs from laplace-torch's own backend. The tests are
laplace-torch's (those of the installed release, fetched from its repository; they are not
part of this one)::

    git clone https://github.com/aleximmer/Laplace laplace-tests && git -C laplace-tests \\
        checkout 44ea62a          # the tests of laplace-torch 0.3
    cd laplace-tests
    SWAP_TO=EquivariantKFAC PYTHONPATH=/path/to/this/repository \\
        python -m pytest -q -p benchmarks.laplace_torch_suite tests --junitxml=ours.xml
    SWAP_TO=AsdlGGN PYTHONPATH=/path/to/this/repository \\
        python -m pytest -q -p benchmarks.laplace_torch_suite tests --junitxml=control.xml

The summary line counts the swaps (constructions whose backend was replaced) and the tests
that made them. ``python -m benchmarks.laplace_torch_suite ours.xml control.xml`` compares
the two runs' outcomes.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import xml.etree.ElementTree as ET

SWAPS: list[str] = []


def _swap_backends() -> None:
    """Wrap ``BaseLaplace.__init__`` so that Kron approximations get ``SWAP_TO``'s backend."""
    import laplace.baselaplace as baselaplace
    from laplace.curvature import AsdlEF, AsdlGGN

    target = os.environ.get("SWAP_TO")
    if target not in ("EquivariantKFAC", "AsdlGGN"):
        raise RuntimeError("Set SWAP_TO to EquivariantKFAC or AsdlGGN (the control).")
    original = baselaplace.BaseLaplace.__init__
    signature = inspect.signature(original)

    def backend():
        if target == "AsdlGGN":
            return AsdlGGN
        from laplace_equivariance import EquivariantKFAC

        return EquivariantKFAC

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        if isinstance(self, baselaplace.KronLaplace) and bound.arguments.get("backend") in (
            None,
            AsdlGGN,
            AsdlEF,
        ):
            bound.arguments["backend"] = backend()
            SWAPS.append(os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0])
        original(*bound.args, **bound.kwargs)

    baselaplace.BaseLaplace.__init__ = __init__


def pytest_configure(config) -> None:
    """Install the swap before the tests are collected."""
    _swap_backends()


def pytest_terminal_summary(terminalreporter) -> None:
    """Say how many constructions were swapped, in how many tests."""
    terminalreporter.write_line(f"swaps: {len(SWAPS)} in {len(set(SWAPS))} tests")


def outcomes(junit_xml: str) -> dict[str, str]:
    """Test id -> passed, failed, error or skipped, from a ``--junitxml`` report."""
    result = {}
    for case in ET.parse(junit_xml).iter("testcase"):
        tags = {child.tag for child in case}
        status = next((t for t in ("failure", "error", "skipped") if t in tags), "passed")
        result[f"{case.get('classname')}::{case.get('name')}"] = status.replace("ure", "ed")
    return result


def main() -> None:
    """Compare two runs' outcomes: counts of each, and the tests whose outcome differs."""
    ours, control = (outcomes(path) for path in sys.argv[1:3])
    counts = {
        name: {s: list(run.values()).count(s) for s in sorted(set(run.values()))}
        for name, run in (("ours", ours), ("control", control))
    }
    differ = sorted(t for t in ours.keys() | control.keys() if ours.get(t) != control.get(t))
    print(json.dumps({"counts": counts, "differ": differ}, indent=1))


if __name__ == "__main__":
    main()
