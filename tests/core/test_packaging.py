"""The built wheel carries what a plain ``pip install`` needs: presets, example scenarios, py.typed.

A non-editable install has no checkout beside it, so the presets under ``configs/`` and the
validation cases under ``scenarios/validation/`` must be inside the package (setup.py copies them).
The standard build (``python -m build``) makes the sdist first and the wheel from it, so the sdist
must carry them too (MANIFEST.in); both paths are built here from the files git tracks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _source_copy(dest: Path) -> Path:
    """The checkout as a fresh clone has it (the files git tracks, or the source folders where there is
    no git), copied, so building leaves no build/ or egg-info in the checkout."""
    dest.mkdir()
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=False)
    names = [n for n in tracked.stdout.split("\0") if n] if tracked.returncode == 0 else []
    if not names:
        for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
            shutil.copy2(REPO / name, dest / name)
        for name in ("wss", "configs", "scenarios"):
            shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        return dest
    for name in names:
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def _shipped(names: set[str], prefix: str) -> None:
    """Every preset and scenario of the checkout is in ``names`` under ``prefix``."""
    presets = {p.relative_to(REPO).as_posix() for p in (REPO / "configs").rglob("*.yaml")}
    assert {f"{prefix}{p}" for p in presets} <= names
    cases = {p.relative_to(REPO).as_posix() for p in (REPO / "scenarios").rglob("*.yaml")}
    assert {f"{prefix}{p}" for p in cases} <= names


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
    _shipped(names, "wss/")
    assert not any("__pycache__" in n for n in names)


def test_the_standard_build_makes_an_sdist_and_a_wheel_that_carry_the_presets(tmp_path: Path):
    """``python -m build``: the sdist holds configs/ and scenarios/, and the wheel built from it has them."""
    source = _source_copy(tmp_path / "src")
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                   check=True, capture_output=True, text=True, timeout=300)
    (sdist,) = out.glob("wss-*.tar.gz")
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        _shipped({n.removeprefix(f"{top}/") for n in tar.getnames()}, "")
    (wheel,) = out.glob("wss-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "wss/py.typed" in names
    _shipped(names, "wss/")
