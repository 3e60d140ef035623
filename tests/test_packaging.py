"""The wheel a user installs: the package only, with its metadata (built offline)."""

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import laplace_equivariance

ROOT = Path(__file__).resolve().parents[1]


def _source_copy(folder: Path) -> Path:
    """The files a wheel is built from, copied: setuptools reuses a checkout's ``build/lib``,
    whose modules deleted or moved since would otherwise ship too."""
    source = folder / "source"
    shutil.copytree(
        ROOT / "laplace_equivariance",
        source / "laplace_equivariance",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    return source


def test_the_wheel_holds_the_package_alone_with_its_version_licence_and_pins(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path), str(_source_copy(tmp_path))],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    version = laplace_equivariance.__version__
    names = zipfile.ZipFile(wheel).namelist()
    info = f"laplace_equivariance-{version}.dist-info"
    assert {n.split("/")[0] for n in names} == {"laplace_equivariance", info}
    package = ROOT / "laplace_equivariance"
    modules = {f"laplace_equivariance/{p.relative_to(package)}" for p in package.rglob("*.py")}
    assert {n for n in names if n.endswith(".py")} == modules  # every module, nothing else
    metadata = Parser().parsestr(zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode())
    assert metadata["Version"] == version and metadata["License"] == "MIT"
    requires = metadata.get_all("Requires-Dist")
    assert "laplace-torch==0.3" in requires and "asdfghjkl==0.1a4" in requires
    assert not any(r.split(";")[0].strip().startswith("asdl") for r in requires)
    assert f"{info}/licenses/LICENSE" in names or f"{info}/LICENSE" in names
