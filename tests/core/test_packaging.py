"""The built wheel carries what a plain ``pip install`` needs: presets, example scenarios, py.typed.

A non-editable install has no checkout beside it, so the presets under ``configs/`` and the
validation cases under ``scenarios/validation/`` must be inside the package (setup.py copies them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _source_copy(dest: Path) -> Path:
    """What the sdist holds, copied, so building leaves no build/ or egg-info in the checkout."""
    dest.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    for name in ("wss", "configs", "scenarios"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_the_wheel_ships_presets_scenarios_and_py_typed(tmp_path: Path):
    source = _source_copy(tmp_path / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
         str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    (wheel,) = tmp_path.glob("wss-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "wss/py.typed" in names
    presets = {p.relative_to(REPO).as_posix() for p in (REPO / "configs").rglob("*.yaml")}
    assert {f"wss/{p}" for p in presets} <= names
    cases = {p.relative_to(REPO).as_posix() for p in (REPO / "scenarios").rglob("*.yaml")}
    assert {f"wss/{p}" for p in cases} <= names
    assert not any("__pycache__" in n for n in names)
