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


def _wait_until_the_command_runs(proc: subprocess.Popen, out: Path, timeout_s: float = 60.0) -> None:
    """Wait until ``wss simulate`` has made its output folder ``out``: ``wss.cli.main`` has installed its handlers
    (``signals_as_exceptions``) and the command has begun, so a signal now stops the command, which says so in
    one line.  Neither a fixed sleep from launch nor the child's caught signals (/proc/PID/status, SigCgt) say
    that: ``import wss`` installs start-up handlers of its own (wss/_starting.py, which end the program at once
    and silently), so on a loaded machine a signal sent a second after they are in can still land while the
    command modules import, and the run ends with no "interrupted" line."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir():
            return
        time.sleep(0.02)
    raise AssertionError(f"wss simulate did not make {out} within a minute (exit code {proc.poll()})")


@pytest.mark.parametrize("delay_s", [0.6, 1.5, 3.0, 4.5])
def test_sigterm_during_simulate_leaves_every_output_or_none_and_no_temporary_file(tmp_path, delay_s):
    """The real program, signalled ``delay_s`` after its command began: where that lands depends on the
    machine's load, and whatever the moment, the exit code says what was written (the points in between
    are covered deterministically by test_sigterm_at_each_point_of_simulate...)."""
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [*WSS, "simulate", str(REPO / "scenarios" / "bert_large.yaml"), "-o", str(out), "--trace", "--plots"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    _wait_until_the_command_runs(proc, out)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err
    # Once the outputs are complete the run has succeeded and a signal no longer ends it (not even as the
    # program exits): 143 means none was put in place, 0 all of them.
    assert proc.returncode in (0, EXIT_TERMINATED), err
    assert _leftovers(tmp_path) == []
    if proc.returncode == EXIT_TERMINATED:
        assert err.strip().endswith("terminated")
        assert not out.exists()  # nothing half-written: the outputs appear together or not at all
    else:
        assert (out / "result.json").is_file() and (out / "trace.json").is_file()


def test_sigint_is_still_ctrl_c(tmp_path):
    """SIGINT during the simulation (brain_120t simulates for seconds after its output folder is made)."""
    out = tmp_path / "o"
    proc = subprocess.Popen([*WSS, "simulate", str(REPO / "scenarios" / "brain_120t.yaml"), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    _wait_until_the_command_runs(proc, out)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED and err.strip().endswith("interrupted") and "Traceback" not in err
    assert _leftovers(tmp_path) == []


#: ``wss presets`` whose command raises KeyboardInterrupt from inside an ``exec`` of source text, as Ctrl-C does
#: when it lands while ``dataclasses`` writes a class's methods mid-command.
_INTERRUPT_IN_EXEC = """
import sys
import wss.cli.app as app
class Owner:
    @staticmethod
    def run(args):
        exec("raise KeyboardInterrupt")
app._owner = lambda command: Owner
sys.argv = [sys.argv[0], "presets"]
sys.exit(app.main())
"""


def test_ctrl_c_caught_inside_an_exec_still_exits_130_under_python_m(tmp_path):
    """Run as ``python -m``, CPython 3.8-3.11 remember a KeyboardInterrupt that left an ``exec`` of text and kill
    the process with SIGINT at exit even when it was caught (the console script exits through another path).
    wss must still exit with 130 and its one line: ``python -m wss`` died by SIGINT about one Ctrl-C in six,
    those that landed while a dataclass was being defined."""
    main = tmp_path / "run" / "wss" / "__main__.py"  # `python -m run.wss`: the wss program, by its file's name
    main.parent.mkdir(parents=True)
    (tmp_path / "run" / "__init__.py").write_text("")
    (main.parent / "__init__.py").write_text("")
    main.write_text(_INTERRUPT_IN_EXEC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "run.wss"], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == "interrupted"


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


@pytest.mark.parametrize("argv0, orig_argv, program", [
    ("-m", ["python", "-m", "wss", "simulate"], True),  # python -m wss, while wss imports
    ("-m", ["python", "-X", "dev", "-mwss.cli", "presets"], True),
    ("-m", ["python", "-m", "pytest", "-q"], False),  # another module importing wss as a library
    ("-m", ["python", "-c", "import wss"], False),
    ("/usr/bin/wss", ["python", "/usr/bin/wss", "presets"], True),  # the console script
    ("tool.py", ["python", "tool.py"], False),
])
def test_python_dash_m_wss_is_the_program_while_it_imports(monkeypatch, argv0, orig_argv, program):
    """``python -m`` sets ``sys.argv[0]`` to the module's file only after importing its package, so while
    ``import wss`` runs it reads ``-m``: the interpreter's command line says whether the module is wss's
    (and the quiet start-up handlers then apply under ``python -m wss`` as under the console script)."""
    from wss._starting import is_wss_program

    monkeypatch.setattr(sys, "argv", [argv0])
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    assert is_wss_program() is program


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


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the re-raise uses SIGALRM (POSIX)")
def test_a_signal_landing_in_a_weakref_callback_still_ends_the_command(monkeypatch, capsys):
    """SIGTERM while matplotlib frees a figure (seen in CI): the handler's exception lands in a weakref callback,
    where Python cannot raise; it used to print "Exception ignored in ... Traceback" and let the command run on
    with the signals ignored.  It is raised again a moment later, where the command is, and ends it as SIGTERM."""
    import gc
    import weakref

    from wss.cli import app, main

    class Freed:
        pass

    def callback(_ref: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler raises Terminated here, inside the callback
        for _ in range(100):
            pass

    def run_freeing_in_a_callback(args):
        thing = Freed()
        ref = weakref.ref(thing, callback)
        del thing  # the callback runs now; its exception cannot propagate
        assert ref() is None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the command goes on: the re-raise lands here
            gc.collect(0)
        raise AssertionError("the signal's exception was not raised again")

    monkeypatch.setattr(app.COMMAND_MODULES[0], "run", run_freeing_in_a_callback)
    unraisable, alarm = sys.unraisablehook, signal.getsignal(signal.SIGALRM)
    assert main(["presets"]) == EXIT_TERMINATED
    err = capsys.readouterr().err
    assert err == "terminated\n"
    assert sys.unraisablehook is unraisable and signal.getsignal(signal.SIGALRM) is alarm  # restored


def test_an_error_without_a_signal_is_not_taken_for_one(monkeypatch):
    from wss.cli import app, main

    def failing_run(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(app.COMMAND_MODULES[0], "run", failing_run)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["presets"])


# --------------------------------------------------------------------------- a signal at a chosen point

def _outputs(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) if out.exists() else []


def _sigterm_here() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # in main(), the handler raises Terminated right here


@pytest.mark.parametrize("where", ["simulating", "between-renames", "printing"])
def test_sigterm_at_each_point_of_simulate_leaves_every_output_and_exit_0_or_none_and_143(
        tmp_path, monkeypatch, capsys, where):
    """A signal sent at a chosen point of ``wss simulate`` (in this process, no timing luck): while the model
    runs, between the renames that put the outputs in place, and while the summary prints after them.
    The exit code says which: 0 with every output in place, 143 with none (and no folder made for them)."""
    from wss import files
    from wss.cli import main, see
    from wss.cli import simulate as simulate_cmd

    if where == "simulating":
        real_simulate = see.simulate

        def signalling_simulate(*a, **k):
            got = real_simulate(*a, **k)
            _sigterm_here()
            return got

        monkeypatch.setattr(see, "simulate", signalling_simulate)
    elif where == "between-renames":
        real_deliver = files._Staged.deliver
        delivered: list[Path] = []

        def signalling_deliver(self):
            real_deliver(self)
            delivered.append(self.path)
            if len(delivered) == 1:
                _sigterm_here()

        monkeypatch.setattr(files._Staged, "deliver", signalling_deliver)
    else:
        def signalling_print(*a, **k):
            _sigterm_here()
            print(*a, **k)

        monkeypatch.setattr(simulate_cmd, "print", signalling_print, raising=False)
    out = tmp_path / "run"
    code = main(["simulate", str(REPO / "scenarios" / "fc_mnist.yaml"), "-o", str(out), "--trace", "--plots"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and _leftovers(tmp_path) == []
    if where == "simulating":
        assert code == EXIT_TERMINATED and err.strip().endswith("terminated")
        assert not out.exists()
    else:  # the outputs were complete: the run succeeded, and a signal once they are being put in place is ignored
        assert code == 0, (err, _outputs(out))
        assert {"result.json", "trace.json", "plots/timeline.png"} <= set(_outputs(out))


#: Runs ``wss ARGS`` as the program named ARGV0 and then, as the program ends with main()'s exit code,
#: signals itself.  "script": a path ending in wss, as the console script runs, whose start-up handlers are
#: installed when wss is imported; "module": ``python -m wss``, where runpy imports wss before it sets argv[0]
#: to wss/__main__.py, so they are not.
_SIGNAL_AFTER_MAIN = """
import os, signal, sys, time
how, argv0, args = sys.argv[1], sys.argv[2], sys.argv[3:]
if how == "script":
    sys.argv = [argv0, *args]
from wss.cli import main
sys.argv = [argv0, *args]
code = main()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.2)
sys.exit(code)
"""


@pytest.mark.parametrize("how, program", [("script", "wss"), ("module", "wss/__main__.py")])
def test_a_signal_once_the_command_has_finished_leaves_its_exit_code(tmp_path, how, program):
    """main() has returned 0: what it wrote is complete, so a signal while the program ends must not turn
    that into 143 (start-up's handler put back) or death by SIGTERM (Python's default put back)."""
    script = tmp_path / "run_then_signal.py"
    script.write_text(_SIGNAL_AFTER_MAIN)
    out = subprocess.run([sys.executable, str(script), how, str(tmp_path / program), "presets"],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (out.returncode, out.stderr) == (0, "")



# ------------------------------------------------- the other writing commands: a signal once written, or before

@pytest.fixture(scope="module")
def fc_mnist_result(tmp_path_factory) -> Path:
    from wss.cli import main

    out = tmp_path_factory.mktemp("fc_mnist")
    assert main(["simulate", str(REPO / "scenarios" / "fc_mnist.yaml"), "-o", str(out), "-q"]) == 0
    return out / "result.json"


def _signal_at_first_print(monkeypatch, module) -> None:
    """SIGTERM this process as ``module`` first prints: its outputs are written by then."""
    def signalling_print(*a, **k):
        _sigterm_here()
        print(*a, **k)

    monkeypatch.setattr(module, "print", signalling_print, raising=False)


def _command(name: str, tmp_path: Path, result: Path) -> tuple[list[str], list[Path], object]:
    """A writing command's arguments, the files it writes and the module that prints its lines."""
    from wss.cli import schema, see, size

    if name == "plot":
        return ["plot", str(result), "-o", str(tmp_path / "figs"), "--format", "svg"], [tmp_path / "figs"], see
    if name == "report":
        return (["report", str(result), "--csv", str(tmp_path / "rows.csv"), "--html", str(tmp_path / "page.html")],
                [tmp_path / "rows.csv", tmp_path / "page.html"], see)
    if name == "schema":
        return ["schema", "-o", str(tmp_path / "s.json")], [tmp_path / "s.json"], schema
    small = ["--set=workload.model=gpt3-125m", "--set=training.global_batch=64", "--set=hardware.wafers=1"]
    return (["size", str(REPO / "scenarios" / "gpt3_175b.yaml"), "--tokens", "1e9", "--max-wafers", "2", *small,
             "--plot", str(tmp_path / "size.png")], [tmp_path / "size.png"], size)


@pytest.mark.parametrize("name", ["plot", "report", "schema", "size"])
def test_a_signal_while_a_command_prints_what_it_wrote_leaves_exit_0(tmp_path, monkeypatch, capsys,
                                                                     fc_mnist_result, name):
    """``wss plot``, ``report --csv --html``, ``schema -o`` and ``size --plot``: once their files are in
    place only printing is left, so a signal then leaves exit 0 and every file (not 143, which says that
    nothing was written)."""
    from wss.cli import main

    args, written, module = _command(name, tmp_path, fc_mnist_result)
    _signal_at_first_print(monkeypatch, module)
    code = main(args)
    err = capsys.readouterr().err
    assert (code, "Traceback" in err) == (0, False), err
    assert all(p.exists() for p in written) and _leftovers(tmp_path) == []


def test_a_signal_during_the_report_s_verdict_writes_neither_csv_nor_page(tmp_path, monkeypatch, capsys,
                                                                          fc_mnist_result):
    """The verdict re-simulates before the CSV and the page are written: a signal during it ends the command
    with 143 and neither file (before, the CSV was in place already and the exit code said otherwise)."""
    from wss.cli import main, see

    def signalling_verdict(*a, **k):
        _sigterm_here()

    monkeypatch.setattr(see, "run_verdict", signalling_verdict)
    code = main(["report", str(fc_mnist_result), "--csv", str(tmp_path / "rows.csv"),
                 "--html", str(tmp_path / "out" / "page.html"), "--verdict"])
    err = capsys.readouterr().err
    assert code == EXIT_TERMINATED and "Traceback" not in err
    assert not (tmp_path / "rows.csv").exists() and not (tmp_path / "out").exists()
    assert _leftovers(tmp_path) == []
