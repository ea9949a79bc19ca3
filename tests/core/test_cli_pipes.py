"""Output piped into a reader that stops early (``wss presets | head -1``) ends quietly with exit 0.

Each command runs in its own process with its stdout on a pipe; the test reads one line and closes the
pipe, as ``head -1`` does, while the command still has output to write.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"


@pytest.fixture(scope="module")
def result_file(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pipes")
    from wss.cli import main

    assert main(["simulate", str(SCENARIOS / "bert_large.yaml"), "-o", str(out), "--quiet"]) == 0
    return out / "result.json"


COMMANDS = [
    ["presets"],
    ["schema"],
    ["plan", str(SCENARIOS / "gpt3_175b.yaml"), "--json"],
    ["estimate", str(SCENARIOS / "gpt3_175b.yaml"), "--json"],
    ["report", "{result}"],
    ["report", "{result}", "--by", "pass"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_reader_that_stops_early_ends_the_command_quietly(argv, result_file):
    argv = [a.format(result=result_file) for a in argv]
    with subprocess.Popen([sys.executable, "-m", "wss", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=REPO) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # the reader goes away, as `head -1` does
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 0, err
    assert first and "Traceback" not in err and "BrokenPipe" not in err
