"""The wheel a user installs: the package only, with its metadata (built offline)."""

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import laplace_equivariance

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_the_package_alone_with_its_version_licence_and_pins(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path), str(ROOT)],
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
