"""Helpers of the timing-check tests (imported as ``check_helpers``; conftest.py only holds fixtures).

The tests use the FC-MNIST scenario (simulates in a few ms) copied into a temporary folder, so every
test owns its scenario and baselines and nothing under the work tree is written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
FC_MNIST = SCENARIOS / "fc_mnist.yaml"

#: Run ``wss`` through its real entry point function in a fresh interpreter.
WIRED_MAIN = "import sys; from wss.cli import main; sys.exit(main(sys.argv[1:]))"


def copy_scenario(dest_dir: Path, source: Path = FC_MNIST, name: str | None = None) -> Path:
    """Copy a shipped scenario into ``dest_dir`` (optionally renamed); return the copy's path."""
    dest = dest_dir / (name or source.name)
    shutil.copyfile(source, dest)
    return dest


def check_cli(argv: list[str]) -> int:
    """Run ``wss baseline|check`` in-process through the real entry point."""
    from wss.cli import main

    return main([str(a) for a in argv])


def edit_metrics(path: Path, **scale: float) -> None:
    """Multiply recorded metrics of a baseline file (``step_time_s=0.5`` makes the baseline twice as fast)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    for key, factor in scale.items():
        data["metrics"][key.replace("__", ".")] *= factor
    path.write_text(json.dumps(data, sort_keys=True, indent=1) + "\n", encoding="utf-8")


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    env["PYTHONHASHSEED"] = "random"
    return env


def run_python(code: str, *args: Any, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -c code args...`` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=subprocess_env(),
    )

