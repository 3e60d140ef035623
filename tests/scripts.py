"""Load a benchmark or example script (not a package module) as a module, for its tests."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(folder: str, name: str) -> ModuleType:
    """``ROOT/folder/name.py`` as module ``name`` (registered: dataclasses look it up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
