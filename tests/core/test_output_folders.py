"""One run per output folder at a time, leftovers of killed runs removed, and names that never escape.

Two ``wss simulate`` runs into one folder used to rename their files one by one, so one run's
result.json could end up beside the other's trace; a SIGKILL during a write left a
``.result.json.<hex>.tmp`` that no later run removed; a scenario named ``..`` wrote into the current
folder.  See :mod:`wss.files`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from core_helpers import SCENARIOS, cli_env, run_wss, run_wss_here

from wss.cli import main
from wss.cli.simulate import default_outdir
from wss.errors import MAX_ECHO_CHARS
from wss.files import MAX_NAME_BYTES, OutputError, all_or_nothing, atomic_write_text, ensure_dir, safe_name

FC_MNIST = SCENARIOS / "fc_mnist.yaml"
BUSY = "another wss command is writing there now"


def test_a_second_run_into_a_busy_folder_is_refused_and_the_folder_holds_one_run(tmp_path, monkeypatch):
    """Run A is held inside its simulation (its outputs checked, its folder locked); run B starts then."""
    import wss.cli.see as see

    out = tmp_path / "out"
    started, go = threading.Event(), threading.Event()
    real_simulate = see.simulate

    def held(scenario, args):
        started.set()
        assert go.wait(120)
        return real_simulate(scenario, args)

    monkeypatch.setattr(see, "simulate", held)
    codes: list[int] = []
    a = threading.Thread(target=lambda: codes.append(main(
        ["simulate", str(FC_MNIST), "-o", str(out), "--trace", "--quiet", "--set", "name=run-a"])))
    a.start()
    try:
        assert started.wait(120)
        b = run_wss(["simulate", FC_MNIST, "-o", out, "--trace", "--quiet", "--set", "name=run-b"], cwd=tmp_path)
    finally:
        go.set()
        a.join(120)
    assert codes == [0]
    assert b.returncode == 2 and "Traceback" not in b.stderr
    assert b.stderr == f"error: cannot write into {out}: {BUSY}; wait for it to end or choose another output\n"
    assert sorted(p.name for p in out.iterdir()) == ["result.json", "trace.json"]
    assert json.loads((out / "result.json").read_text())["scenario"]["name"] == "run-a"
    assert json.loads((out / "trace.json").read_text())["otherData"]["scenario"] == "run-a"
    # the lock went with run A: the next run into the folder is free to write
    assert run_wss_here(["simulate", FC_MNIST, "-o", out, "--quiet"], cwd=tmp_path).returncode == 0


def test_two_transactions_cannot_stage_into_one_folder(tmp_path):
    """The same rule inside one process (two threads, each its own transaction), whichever call comes first."""
    folder = tmp_path / "f"
    holding, done = threading.Event(), threading.Event()

    def first() -> None:
        with all_or_nothing():
            atomic_write_text(folder / "a.json", "first")
            holding.set()
            done.wait(60)

    t = threading.Thread(target=first)
    t.start()
    try:
        assert holding.wait(60)
        for write in (lambda: ensure_dir(folder), lambda: atomic_write_text(folder / "b.json", "second")):
            with pytest.raises(OutputError, match=BUSY), all_or_nothing():
                write()
    finally:
        done.set()
        t.join(60)
    assert sorted(p.name for p in folder.iterdir()) == ["a.json"]


def test_outputs_written_at_once_are_not_locked(tmp_path):
    """A sweep's cache (stage=False) is shared by sweeps running together: no lock there."""
    with all_or_nothing(stage=False), all_or_nothing(stage=False):
        atomic_write_text(tmp_path / "p1.json", "1")
    with all_or_nothing():
        atomic_write_text(tmp_path / "x.json", "1")
        atomic_write_text(tmp_path / "p2.json", "2")  # joins the same transaction: its own lock is no obstacle


def test_leftovers_of_killed_runs_are_removed_by_the_next_run_in_that_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    leftovers = [".result.json.0123456789ab.tmp", ".trace.json.ba9876543210.tmp", ".wss-write-check.00ff00ff00ff.tmp"]
    kept = [".notes.tmp", "notes.0123456789ab.tmp", ".x.0123456789ab.tmp.bak", "keep.txt"]
    for name in leftovers + kept:
        (out / name).write_text("x", encoding="utf-8")
    run = run_wss_here(["simulate", FC_MNIST, "-o", out, "--quiet"], cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([*kept, "result.json"])


def test_a_killed_run_lets_go_of_its_folder(tmp_path):
    """The lock is the kernel's: SIGKILL frees it, and no lock file stays behind."""
    out = tmp_path / "out"
    code = ("import sys, time\nfrom wss.files import all_or_nothing, atomic_write_text\n"
            f"with all_or_nothing():\n    atomic_write_text({str(out / 'result.json')!r}, 'x')\n"
            "    print('holding', flush=True)\n    time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=cli_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "holding\n"
        busy = run_wss_here(["simulate", FC_MNIST, "-o", out, "--quiet"], cwd=tmp_path)
        assert busy.returncode == 2 and BUSY in busy.stderr
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        if proc.stdout is not None:
            proc.stdout.close()
    assert [p.name for p in out.iterdir()][0].startswith(".result.json.")  # what the kill left
    deadline = time.monotonic() + 60
    while (run := run_wss_here(["simulate", FC_MNIST, "-o", out, "--quiet"], cwd=tmp_path)).returncode and \
            time.monotonic() < deadline:
        time.sleep(0.5)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["result.json"]


# ---------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "/abs", "a\\b", ".hidden", "", "\x00", "a\nb", "\x1b[31m",
                                  "\ud800", "x" * 100_000, "é" * 200, "-", "~", "CON", "name with spaces"])
def test_a_name_becomes_one_safe_path_component(name):
    safe = safe_name(name)
    assert safe and safe not in (".", "..") and not safe.startswith(".")
    assert Path(safe).name == safe and len(Path(safe).parts) == 1 and os.sep not in safe and "\\" not in safe
    assert safe.isprintable() and len(safe.encode("utf-8")) <= MAX_NAME_BYTES
    out = default_outdir(name, ["training.steps=2"])
    assert out.parent == Path("out") and len(out.name.encode("utf-8")) <= 255


def test_long_names_stay_apart():
    assert safe_name("x" * 1000 + "a") != safe_name("x" * 1000 + "b")
    assert safe_name("fc-mnist") == "fc-mnist" and safe_name("gpt3_175b.v2") == "gpt3_175b.v2"


@pytest.mark.parametrize("name, folder", [("..", "_."), ("../../etc", "_._.._etc"), (".", "_")])
def test_a_scenario_named_to_escape_writes_inside_out(tmp_path, name, folder):
    text = (FC_MNIST.read_text(encoding="utf-8").replace("name: fc-mnist", f"name: {json.dumps(name)}", 1))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    run = run_wss_here(["simulate", scenario, "--quiet"], cwd=work)
    assert run.returncode == 0, run.stderr
    assert sorted(str(p.relative_to(work)) for p in work.rglob("*")) == ["out", f"out/{folder}",
                                                                         f"out/{folder}/result.json"]


def test_a_huge_name_is_quoted_short(tmp_path):
    huge = "x" * 100_000
    for argv in (["validate", FC_MNIST], ["simulate", FC_MNIST, "-o", tmp_path / "o"], ["estimate", FC_MNIST],
                 ["plan", FC_MNIST]):
        run = run_wss_here([*argv, "--set", f"name={huge}"], cwd=tmp_path)
        assert run.returncode == 0 and max(map(len, run.stdout.splitlines())) < 2 * MAX_ECHO_CHARS, run.stderr
    bad = run_wss_here(["validate", FC_MNIST, "--set", f"name={huge}", "--set", "training.steps=0"], cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr) < 3 * MAX_ECHO_CHARS
    long_out = run_wss_here(["schema", "-o", tmp_path / ("y" * 100_000)], cwd=tmp_path)
    assert long_out.returncode == 2 and len(long_out.stderr) < 3 * MAX_ECHO_CHARS, long_out.stderr[:300]


@pytest.mark.parametrize("stage", [True, False])
def test_a_signal_just_after_a_folder_is_made_still_removes_it(tmp_path, monkeypatch, stage):
    """Ctrl-C (or SIGTERM) landing as ``mkdir`` returns, before wss has noted the folder as its own, used to leave
    the empty output folder behind (seen once in tests/core/test_cli_signals.py, whose SIGINT follows the folder's
    appearance): the rollback must find every folder the transaction made, however late the signal."""
    import wss.files as files

    real_mkdir = os.mkdir
    made: list[str] = []

    def mkdir_then_interrupted(path: str | os.PathLike[str], *args: object) -> None:
        real_mkdir(path, *args)
        made.append(os.fspath(path))
        if len(made) == 2:  # the inner folder: the outer one was made and noted already
            raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "mkdir", mkdir_then_interrupted)
    out = tmp_path / "outer" / "inner"
    with pytest.raises(KeyboardInterrupt), all_or_nothing(stage=stage):
        ensure_dir(out)
    assert made == [str(tmp_path / "outer"), str(out)]
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_appears_meanwhile_is_not_removed(tmp_path, monkeypatch):
    """A folder made by someone else between wss's look and its ``mkdir`` is not wss's: an error afterwards must
    not remove it, even while it is empty."""
    import wss.files as files

    real_mkdir = os.mkdir
    out = tmp_path / "theirs"

    def made_by_another_first(path: str | os.PathLike[str], *args: object) -> None:
        real_mkdir(path, *args)
        raise FileExistsError(path)

    monkeypatch.setattr(files.os, "mkdir", made_by_another_first)
    with pytest.raises(RuntimeError), all_or_nothing():
        ensure_dir(out)
        raise RuntimeError("the command failed after making its folder")
    assert out.is_dir()
