"""Outputs that are not regular files are written into, never replaced (``wss.files``).

``wss schema -o /dev/null`` used to rename a regular file over ``/dev/null`` (as root, for the whole
machine), and ``report --csv FIFO`` left a regular file where the FIFO was.  Now a FIFO's reader gets
the bytes and the FIFO stays a FIFO; a device node stays that device node; a socket is refused; ``-``
prints, where a command has one output.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path

import pytest
from core_helpers import SCENARIOS, run_wss_here

import wss
from wss import files
from wss.files import OutputError, all_or_nothing, atomic_write_text, ensure_file_target

FC_MNIST = SCENARIOS / "fc_mnist.yaml"


@pytest.fixture(scope="module")
def result_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("result") / "result.json"
    wss.simulate(wss.load_scenario(FC_MNIST)).save(path)
    return path


class FifoReader(threading.Thread):
    """Reads a FIFO to its end (as `cat fifo > file` would), so a writer can open it."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.data = path, b""

    def run(self) -> None:
        with open(self.path, "rb") as f:
            self.data = f.read()


def _outputs(out: Path, result: Path, tmp: Path) -> dict[str, list]:
    """The three commands of the issue, each writing its one output to ``out``."""
    return {
        "schema": ["schema", "-o", out],
        "simulate --trace": ["simulate", FC_MNIST, "-o", tmp / "run", "--trace", out, "--quiet"],
        "report --csv": ["report", result, "--csv", out],
    }


def _reference(name: str, result: Path, tmp: Path) -> bytes:
    """What the command writes to a regular file."""
    ref = tmp / "reference.out"
    run = run_wss_here([str(a) for a in _outputs(ref, result, tmp / "ref")[name]], cwd=tmp)
    assert run.returncode == 0, run.stderr
    return ref.read_bytes()


@pytest.mark.parametrize("name", ["schema", "simulate --trace", "report --csv"])
def test_a_fifo_gets_the_bytes_and_stays_a_fifo(tmp_path, result_file, name):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    reader.start()
    run = run_wss_here([str(a) for a in _outputs(fifo, result_file, tmp_path)[name]], cwd=tmp_path)
    reader.join(timeout=60)
    assert run.returncode == 0, run.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not reader.is_alive() and reader.data
    if name == "simulate --trace":
        assert json.loads(reader.data)["traceEvents"]  # a whole trace (its timestamps are the run's own)
    else:
        assert reader.data == _reference(name, result_file, tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not sys.platform.startswith("linux"),
                    reason="making a device node needs root (as in CI) and Linux's device numbers")
@pytest.mark.parametrize("name", ["schema", "simulate --trace", "report --csv"])
def test_a_private_device_node_stays_that_device(tmp_path, result_file, name):
    """A private copy of /dev/null (character device 1, 3): the real one is never touched by the suite."""
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    run = run_wss_here([str(a) for a in _outputs(node, result_file, tmp_path)[name]], cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    st = os.lstat(node)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_socket_is_refused_in_one_line(tmp_path):
    import socket

    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        run = run_wss_here(["schema", "-o", path], cwd=tmp_path)
    assert run.returncode == 2 and run.stderr == f"error: cannot write {path}: it is a socket, which cannot be " \
        "written as a file\n"
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_dash_prints_where_a_command_has_one_output(tmp_path, result_file):
    printed = run_wss_here(["schema", "-o", "-"], cwd=tmp_path)
    assert printed.returncode == 0 and printed.stdout == run_wss_here(["schema"], cwd=tmp_path).stdout
    csv = run_wss_here(["report", result_file, "--csv", "-"], cwd=tmp_path)
    assert csv.returncode == 0 and csv.stdout.encode() == _reference("report --csv", result_file, tmp_path)
    assert not (tmp_path / "-").exists()
    both = run_wss_here(["report", result_file, "--csv", "-", "--verdict"], cwd=tmp_path)
    assert both.returncode == 2 and "--csv - prints the CSV on standard output" in both.stderr


def test_a_special_file_gets_its_bytes_only_when_the_outputs_are_made(tmp_path, monkeypatch):
    """All or nothing holds for a FIFO too: nothing reaches it when the command fails."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    delivered: list[tuple[Path, bytes]] = []
    monkeypatch.setattr(files, "_copy_into", lambda tmp, path: delivered.append((tmp, tmp.read_bytes())))
    with pytest.raises(RuntimeError), all_or_nothing():
        ensure_file_target(fifo)
        atomic_write_text(fifo, "never")
        raise RuntimeError("a later output failed")
    assert delivered == []
    with all_or_nothing():
        atomic_write_text(fifo, "once")
        assert delivered == []
    [(tmp, data)] = delivered
    assert data == b"once"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not tmp.parent.exists()  # the private folder that held the bytes is gone


def test_a_special_file_this_user_cannot_write_is_refused_before_the_work(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o400)
    if os.access(fifo, os.W_OK):
        pytest.skip("root may write any file")
    with pytest.raises(OutputError, match="Permission denied"):
        ensure_file_target(fifo)
