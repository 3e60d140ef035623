"""What a user installs: the wheel and the source distribution hold the package alone, with its
metadata (both built offline by ``python -m build``, from a copy of the sources)."""

import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import laplace_equivariance
from laplace_equivariance.app import run_config

ROOT = Path(__file__).resolve().parents[1]
VERSION = laplace_equivariance.__version__
PACKAGE = ROOT / "laplace_equivariance"
MODULES = {f"laplace_equivariance/{p.relative_to(PACKAGE)}" for p in PACKAGE.rglob("*.py")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The wheel and the sdist, built from the package, its metadata files and the tests.

    A copy: setuptools reuses a checkout's ``build/lib``, whose modules deleted or moved since
    would otherwise ship too; the tests are copied so that leaving them out is shown.
    """
    folder = tmp_path_factory.mktemp("dist")
    source = folder / "source"
    for name in ("laplace_equivariance", "tests"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(folder / "out")]
        + [str(source)],
        check=True,
        capture_output=True,
    )
    return folder / "out"


def _check_metadata(text: str) -> None:
    metadata = Parser().parsestr(text)
    assert metadata["Version"] == VERSION and metadata["License-Expression"] == "MIT"
    requires = metadata.get_all("Requires-Dist")
    assert "laplace-torch==0.3" in requires and "asdfghjkl==0.1a4" in requires
    assert not any(r.split(";")[0].strip().startswith("asdl") for r in requires)


def test_the_wheel_holds_the_package_alone_with_its_version_licence_and_pins(dist):
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    info = f"laplace_equivariance-{VERSION}.dist-info"
    assert {n.split("/")[0] for n in names} == {"laplace_equivariance", info}
    assert {n for n in names if n.endswith(".py")} == MODULES  # every module, nothing else
    _check_metadata(zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode())
    assert f"{info}/licenses/LICENSE" in names


def test_the_metadata_links_the_repository_its_documentation_and_changelog(dist):
    """Issue 70: the wheel's pages pointed to files it does not hold, and it had no Project-URL;
    the links are the repository's, the one the help links too."""
    (wheel,) = dist.glob("*.whl")
    info = f"laplace_equivariance-{VERSION}.dist-info"
    metadata = Parser().parsestr(zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode())
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL") or [])
    repository = run_config.REPOSITORY_URL
    assert urls == {
        "Homepage": repository,
        "Documentation": f"{repository}/tree/main/docs",
        "Repository": repository,
        "Changelog": f"{repository}/blob/main/CHANGELOG.md",
    }
    assert (ROOT / "docs").is_dir() and (ROOT / "CHANGELOG.md").is_file()


def test_the_source_distribution_holds_the_package_and_its_metadata_not_the_tests(dist):
    (sdist,) = dist.glob("*.tar.gz")
    top = f"laplace_equivariance-{VERSION}/"
    with tarfile.open(sdist) as archive:
        names = {n.removeprefix(top) for n in archive.getnames() if n.startswith(top)}
        _check_metadata(archive.extractfile(top + "PKG-INFO").read().decode())
    assert {n for n in names if n.endswith(".py")} == MODULES
    assert {"README.md", "LICENSE", "pyproject.toml", "PKG-INFO"} <= names
    assert not any(n.startswith(("tests", "benchmarks", "studies", "pages", "docs")) for n in names)


def test_no_module_of_the_package_is_over_600_lines():
    """One file, one idea: a module past 600 lines is doing more than one job (issue 42.5)."""
    package = ROOT / "laplace_equivariance"
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted(package.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > 600
    }
    assert not long, long
