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


def test_the_readme_and_usage_list_where_results_differ_from_laplace_torch():
    """The drop-in's deliberate differences are stated where users read of the drop-in: in
    docs/usage.md's section, which the README links by its anchor."""
    usage = (ROOT / "docs" / "usage.md").read_text()
    section = usage.split("### Where the results differ from laplace-torch's", 1)[1]
    section = section.split("\n#", 1)[0]
    for case in ("drop_last", "SubsetRandomSampler", "model.train()", "dropout"):
        assert case in section, case
    readme = (ROOT / "README.md").read_text()
    assert "docs/usage.md#where-the-results-differ-from-laplace-torchs" in readme
