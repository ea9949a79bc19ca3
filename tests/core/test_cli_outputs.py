"""Output paths that cannot be written: one ``error:`` line naming the path, exit 2, and nothing written.

Every command runs through the entry point function the console script calls (``wss.cli.main``, in this
process: ``core_helpers.run_wss_here``), each in a folder of its own that holds a regular file ``afile`` (a file
where a folder should be, or a folder under it that cannot be made) and a folder ``adir`` (a folder where a file
should be).  After a failed run the folder must hold exactly what it held before.  That a real ``wss`` process
prints the same is tests/core/test_cli.py's (test_in_process_runs_print_what_the_real_program_prints).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from core_helpers import SCENARIOS, run_wss_here

import wss
from wss.errors import WssError
from wss.files import OutputError, all_or_nothing, atomic_write_text, ensure_dir, ensure_file_target

FC_MNIST = SCENARIOS / "fc_mnist.yaml"
SWEEP = ["sweep", FC_MNIST, "--vary", "hardware.wafers=1,2", "--executor", "serial", "--quiet"]

#: name: (argv with {d} for the run's own folder and {result} for a result.json, the path the message names)
CASES = {
    "simulate-out-is-a-file": (["simulate", FC_MNIST, "-o", "{d}/afile"], "{d}/afile"),
    "simulate-out-under-a-file": (["simulate", FC_MNIST, "-o", "{d}/afile/sub"], "{d}/afile/sub"),
    "simulate-trace-under-a-file": (["simulate", FC_MNIST, "-o", "{d}/ok", "--trace", "{d}/afile/t.json"],
                                    "{d}/afile/t.json"),
    "simulate-trace-is-a-folder": (["simulate", FC_MNIST, "-o", "{d}/ok", "--trace", "{d}/adir"], "{d}/adir"),
    "simulate-plots-under-a-file": (["simulate", FC_MNIST, "-o", "{d}/ok", "--plots", "{d}/afile/p"],
                                    "{d}/afile/p"),
    "simulate-plots-is-a-file": (["simulate", FC_MNIST, "-o", "{d}/ok", "--plots", "{d}/afile"], "{d}/afile"),
    "simulate-trace-and-plots-verdict": (
        ["simulate", FC_MNIST, "-o", "{d}/ok", "--trace", "--plots", "{d}/afile/p", "--verdict"], "{d}/afile/p"),
    "report-csv-under-a-file": (["report", "{result}", "--csv", "{d}/afile/x.csv"], "{d}/afile/x.csv"),
    "report-csv-is-a-folder": (["report", "{result}", "--csv", "{d}/adir"], "{d}/adir"),
    "report-html-under-a-file": (["report", "{result}", "--html", "{d}/afile/sub/r.html", "--verdict"],
                                 "{d}/afile/sub/r.html"),
    "report-html-is-a-folder": (["report", "{result}", "--html", "{d}/adir"], "{d}/adir"),
    "plot-out-is-a-file": (["plot", "{result}", "-o", "{d}/afile"], "{d}/afile"),
    "plot-out-under-a-file": (["plot", "{result}", "-o", "{d}/afile/pp"], "{d}/afile/pp"),
    "sweep-out-under-a-file": ([*SWEEP, "-o", "{d}/afile/r.csv"], "{d}/afile/r.csv"),
    "sweep-out-is-a-folder": ([*SWEEP, "-o", "{d}/adir.csv"], "{d}/adir.csv"),
    "sweep-cache-under-a-file": ([*SWEEP, "-o", "{d}/r.csv", "--cache", "{d}/afile/c"], "{d}/afile/c"),
    "baseline-out-is-a-file": (["baseline", FC_MNIST, "-o", "{d}/afile"], "{d}/afile"),
    "baseline-out-under-a-file": (["baseline", FC_MNIST, "-o", "{d}/afile/b"], "{d}/afile/b"),
    "check-update-baselines-under-a-file": (["check", FC_MNIST, "--update", "--baselines", "{d}/afile/b"],
                                            "{d}/afile/b"),
    "check-html-under-a-file": (["check", FC_MNIST, "--baselines", "{d}/b", "--html", "{d}/afile/c.html"],
                                "{d}/afile/c.html"),
    "check-html-is-a-folder": (["check", FC_MNIST, "--update", "--baselines", "{d}/b", "--html", "{d}/adir"],
                               "{d}/adir"),
}


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder under ``root``."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def result_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("result") / "result.json"
    wss.simulate(wss.load_scenario(FC_MNIST)).save(path)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory, result_file):
    root = tmp_path_factory.mktemp("outputs")
    jobs, before = {}, {}
    for name, (argv, _) in CASES.items():
        d = root / name
        d.mkdir()
        (d / "afile").write_text("not a folder\n", encoding="utf-8")
        (d / "adir").mkdir()
        (d / "adir.csv").mkdir()
        before[name] = _tree(d)
        jobs[name] = ([str(a).format(d=d, result=result_file) for a in argv], d)
    return root, before, {name: run_wss_here(argv, cwd) for name, (argv, cwd) in jobs.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_unwritable_output_exits_2_naming_the_path_and_writes_nothing(runs, name):
    root, before, all_runs = runs
    run = all_runs[name]
    d = root / name
    named = CASES[name][1].format(d=d)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert named in lines[0]
    assert run.stdout == ""  # the check comes before the run: no summary, no table, no "wrote"
    assert _tree(d) == before[name]  # nothing written, not even a folder (no ok/result.json, no .tmp file)


def test_messages_say_what_is_wrong(runs):
    root, _, all_runs = runs
    err = {name: run.stderr for name, run in all_runs.items()}
    assert "afile is a file, not a folder" in err["simulate-out-is-a-file"]
    assert "afile is a file, not a folder" in err["simulate-trace-under-a-file"]
    assert "it is a folder" in err["simulate-trace-is-a-folder"]
    assert f"cannot write {root / 'report-csv-under-a-file' / 'afile' / 'x.csv'}: " in err["report-csv-under-a-file"]


def test_good_outputs_are_all_written(tmp_path):
    out = tmp_path / "deep" / "out"
    run = run_wss_here(["simulate", FC_MNIST, "-o", out, "--trace", "--plots", "--quiet"], cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (out / "result.json").is_file() and (out / "trace.json").is_file()
    assert len(list((out / "plots").glob("*.png"))) == 4
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write a read-only folder")
def test_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        run = run_wss_here(["simulate", FC_MNIST, "-o", ro], cwd=tmp_path)
        assert run.returncode == 2 and "Traceback" not in run.stderr
        assert f"{ro / 'result.json'}" in run.stderr and "Permission denied" in run.stderr
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


# ---------------------------------------------------------------------------- wss.files


def test_atomic_write_under_a_file_is_an_output_error(tmp_path):
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    with pytest.raises(OutputError, match="afile is a file, not a folder") as info:
        atomic_write_text(tmp_path / "afile" / "sub" / "x.json", "{}")
    assert isinstance(info.value, WssError)
    assert str(tmp_path / "afile" / "sub" / "x.json") in str(info.value)
    with pytest.raises(OutputError, match="cannot write into folder"):
        ensure_dir(tmp_path / "afile")
    (tmp_path / "d").mkdir()
    with pytest.raises(OutputError, match="it is a folder"):
        ensure_file_target(tmp_path / "d")
    with pytest.raises(OutputError, match="Is a directory"):
        atomic_write_text(tmp_path / "d", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "d"] and not list((tmp_path / "d").iterdir())


def test_all_or_nothing_rolls_back_files_and_new_folders(tmp_path):
    keep = tmp_path / "keep.json"
    keep.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), all_or_nothing():
        ensure_dir(tmp_path / "a" / "b")
        atomic_write_text(tmp_path / "a" / "b" / "x.json", "new")
        atomic_write_text(keep, "new")
        assert not (tmp_path / "a" / "b" / "x.json").exists() and keep.read_text(encoding="utf-8") == "old"
        raise RuntimeError("later output failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]
    assert keep.read_text(encoding="utf-8") == "old"

    with all_or_nothing():
        atomic_write_text(tmp_path / "a" / "x.json", "new")
        atomic_write_text(keep, "new")
    assert (tmp_path / "a" / "x.json").read_text(encoding="utf-8") == "new" == keep.read_text(encoding="utf-8")
    assert not list(tmp_path.rglob("*.tmp"))


def test_all_or_nothing_without_staging_writes_at_once_and_removes_only_empty_new_folders(tmp_path):
    with pytest.raises(KeyboardInterrupt), all_or_nothing(stage=False):
        ensure_dir(tmp_path / "empty")
        atomic_write_text(tmp_path / "cache" / "p.json", "1")
        assert (tmp_path / "cache" / "p.json").is_file()
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # the cached point stays


@pytest.mark.parametrize("write", [
    lambda folder: atomic_write_text(folder / "result.json", "{}"),
    lambda folder: ensure_file_target(folder / "result.json"),  # its write check makes and removes a file too
])
def test_a_signal_just_as_the_temporary_file_is_made_leaves_nothing(tmp_path, monkeypatch, write):
    """Ctrl-C or SIGTERM landing right after the temporary file exists (before its name reaches the caller,
    as inside tempfile.mkstemp) must still remove it."""
    real_open = os.open

    def made_then_interrupted(path, flags, *args, **kwargs):
        os.close(real_open(path, flags, *args, **kwargs))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "open", made_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        write(tmp_path)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
