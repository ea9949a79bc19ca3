"""Clean exits: SIGTERM handled like Ctrl-C, no traceback while starting, no worker left behind by a sweep.

Each test runs the real ``wss`` program in a subprocess and signals it.  Exit codes: 130 for Ctrl-C
(SIGINT), 143 for SIGTERM (wss/cli/common.py, README "Exit codes").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wss.cli.common import EXIT_INTERRUPTED, EXIT_TERMINATED

REPO = Path(__file__).resolve().parents[2]
WSS = [sys.executable, "-m", "wss"]

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads child processes from /proc")


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _leftovers(folder: Path) -> list[str]:
    """Temporary files, and empty folders, anywhere under ``folder``."""
    tmp = [str(p) for p in folder.rglob("*.tmp")]
    empty = [str(d) for d in folder.rglob("*") if d.is_dir() and not any(d.iterdir())]
    return tmp + empty


def _wait_until_wss_handles_signals(proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Wait until the child catches SIGTERM (/proc/PID/status, SigCgt): ``wss.cli.main`` has installed its
    handlers and the command is running.  A fixed sleep from launch is not enough on a loaded machine, where
    Python's own start-up can outlast it, and a signal then meets Python's default handling instead of wss's."""
    bit = 1 << (signal.SIGTERM - 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            break
        caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
        if int(caught, 16) & bit:
            return
        time.sleep(0.02)
    raise AssertionError("wss did not install its signal handlers within a minute")


@pytest.mark.parametrize("delay_s", [0.6, 1.5, 3.0, 4.5])
def test_sigterm_during_simulate_leaves_every_output_or_none_and_no_temporary_file(tmp_path, delay_s):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [*WSS, "simulate", str(REPO / "scenarios" / "bert_large.yaml"), "-o", str(out), "--trace", "--plots"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    time.sleep(delay_s)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err
    # -SIGTERM: the signal came after wss had finished and given the signal back to Python's default, as the
    # process exits (seen on a loaded machine); everything was written by then.
    assert proc.returncode in (0, EXIT_TERMINATED, -signal.SIGTERM), err
    assert _leftovers(tmp_path) == []
    if proc.returncode == EXIT_TERMINATED:
        assert err.strip().endswith("terminated")
        assert not out.exists()  # nothing half-written: the outputs appear together or not at all
    else:
        assert (out / "result.json").is_file() and (out / "trace.json").is_file()


def test_sigint_is_still_ctrl_c(tmp_path):
    proc = subprocess.Popen([*WSS, "simulate", str(REPO / "scenarios" / "brain_120t.yaml"), "-o", str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    _wait_until_wss_handles_signals(proc)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED and err.strip().endswith("interrupted") and "Traceback" not in err
    assert _leftovers(tmp_path) == []


#: Runs ``wss ARGS`` as the console script does, with the import of module MODULE held up for 30 s (it
#: prints "importing" first): a signal sent then lands during that import, deterministically.
_SLOW_IMPORT = """
import importlib.abc, sys, time
module, args = sys.argv[1], sys.argv[2:]
class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == module:
            print("importing", flush=True)
            time.sleep(30)
        return None
sys.meta_path.insert(0, Slow())
sys.argv = [sys.argv[0], *args]
from wss.cli import main
sys.exit(main())
"""


def _signal_during_import(module: str, args: list[str], sig: int, tmp_path: Path) -> tuple[int, str]:
    script = tmp_path / "wss"  # named like the console script: wss acts as the program
    script.write_text(_SLOW_IMPORT)
    proc = subprocess.Popen([sys.executable, str(script), module, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "importing"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.parametrize("module", ["wss.errors", "wss.cli.check"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_wss_imports_its_commands_prints_no_traceback(tmp_path, sig, module):
    """Before main() runs: ``import wss`` itself (wss.errors) or the command modules are loading.  Nothing is
    written yet; wss ends at once, quietly."""
    code, err = _signal_during_import(module, ["presets"], sig, tmp_path)
    assert (code, err) == (128 + sig, "")


@pytest.mark.parametrize("sig, words", [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_a_signal_during_a_command_s_own_imports_is_one_line(tmp_path, sig, words):
    """Inside main(): a command imports the model lazily; a signal then stops it like any other moment."""
    code, err = _signal_during_import("wss.model.scenario", ["validate", "scenarios/fc_mnist.yaml"], sig, tmp_path)
    assert code == 128 + sig and err.strip() == words


def test_importing_wss_cli_as_a_library_leaves_signal_handling_alone():
    code = ("import signal, wss.cli; from wss.cli import main; "
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler; "
            "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL; "
            "main(['presets']); "
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler; "
            "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr


def _start_sweep(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(
        [*WSS, "sweep", str(REPO / "scenarios" / "gpt3_175b.yaml"), "--vary", "training.steps=1,2,3,4,5,6,7,8",
         "--workers", "2", "--cache", str(tmp_path / "cache")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_children(proc.pid)) < 3:  # two workers and the resource tracker
        time.sleep(0.1)
    time.sleep(0.5)
    children = _children(proc.pid)
    assert len(children) >= 3, "the sweep's pool did not start"
    return proc, children


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, EXIT_TERMINATED), (signal.SIGINT, EXIT_INTERRUPTED)])
def test_a_terminated_sweep_ends_its_workers(tmp_path, sig, code):
    proc, children = _start_sweep(tmp_path)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code and "Traceback" not in err
    assert _gone_within(children, 30.0) == []  # returns as soon as they are gone; 30 s allows a loaded machine


def test_a_killed_sweep_leaves_no_worker_behind(tmp_path):
    """SIGKILL cannot be handled: the workers notice their parent is gone and end within a second or so."""
    proc, children = _start_sweep(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert _gone_within(children, 30.0) == []  # returns as soon as they are gone; 30 s allows a loaded machine
    # and nothing holds the caller's pipes open any more: reading them reaches the end at once
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read()
    proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()


def test_a_signal_that_a_library_rewraps_still_ends_the_command_as_that_signal(monkeypatch, capsys):
    """SIGTERM while pydantic serializes result.json (seen in CI): the exception the handler raises inside the
    serializer's Python callback comes back as pydantic's own error.  Here a command does what pydantic does."""
    import os

    from wss.cli import app, main

    def rewrapping_run(args):
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises Terminated right here
        except KeyboardInterrupt:
            raise RuntimeError("a library's own error") from None
        raise AssertionError("the signal did not arrive")

    monkeypatch.setattr(app.COMMAND_MODULES[0], "run", rewrapping_run)
    assert main(["presets"]) == EXIT_TERMINATED
    err = capsys.readouterr().err
    assert err == "terminated\n"


def test_an_error_without_a_signal_is_not_taken_for_one(monkeypatch):
    from wss.cli import app, main

    def failing_run(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(app.COMMAND_MODULES[0], "run", failing_run)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["presets"])
