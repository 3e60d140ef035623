"""The documentation site: the manual and the API reference from the docstrings."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_offline_with_warnings_as_errors(tmp_path):
    """A docstring griffe cannot read, a broken link between the docs pages or a page missing
    from the navigation fails the build (``make docs``)."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    reference = (tmp_path / "api" / "index.html").read_text()
    assert "EquivariantKFAC" in reference and "marglik_training" in reference
