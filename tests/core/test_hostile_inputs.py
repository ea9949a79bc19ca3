"""Hostile inputs get one ``error:`` line and exit 2: non-scalar YAML keys, streams and huge files, damaged results.

Each reproducer of the issue that found them: ``? [1, 2]\\n: 3`` in a file, a ``--set`` or a ``sweep --vary``
raised ``TypeError: unhashable type: 'list'``; ``wss validate /dev/zero`` and ``wss report /dev/zero``
read until ``MemoryError``; a result.json with ``"steps": []`` made ``report --by kernel`` and ``diff``
divide by zero and ``plot`` fail with ``step -1 not in this run``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from core_helpers import SCENARIOS, run_wss_here

import wss
from wss.errors import ScenarioError
from wss.files import InputError, read_input
from wss.model.scenario.yaml_io import LIMITS

FC_MNIST = SCENARIOS / "fc_mnist.yaml"


def _one_error_line(run, *words: str) -> None:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.fixture(scope="module")
def result_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("result") / "result.json"
    wss.simulate(wss.load_scenario(FC_MNIST)).save(path)
    return path


# ---------------------------------------------------------------------------- keys that are lists or mappings


@pytest.mark.parametrize("key, what", [("? [1, 2]\n: 3\n", "a list"), ("? {a: 1}\n: 3\n", "a mapping"),
                                       ("extra:\n  ? [x]\n  : 1\n", "a list")])
def test_a_key_that_is_a_list_or_mapping_in_a_file(tmp_path, key, what):
    path = tmp_path / "s.yaml"
    path.write_text(FC_MNIST.read_text(encoding="utf-8") + key, encoding="utf-8")
    _one_error_line(run_wss_here(["validate", path], cwd=tmp_path), f"a key must be a name or a number, not {what}")
    with pytest.raises(ScenarioError, match=f"not {what}"):
        wss.load_scenario(path)


@pytest.mark.parametrize("argv", [
    ["validate", FC_MNIST, "--set", "seed={? [1, 2] : 3}"],
    ["validate", FC_MNIST, "--set", "training={[1]: 2}"],
    ["simulate", FC_MNIST, "--set", "seed={{a: 1}: 2}", "-o", "out"],
    ["sweep", FC_MNIST, "--vary", "seed={? [1, 2] : 3},1", "--executor", "serial"],
    ["sweep", FC_MNIST, "--vary", "seed=1,2", "--set", "seed={[1]: 2}", "--executor", "serial"],
])
def test_a_key_that_is_a_list_or_mapping_in_an_override(tmp_path, argv):
    _one_error_line(run_wss_here(argv, cwd=tmp_path), "a key must be a name or a number")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------- streams, folders and huge files


@pytest.mark.parametrize("argv", [["validate", "/dev/zero"], ["simulate", "/dev/zero", "-o", "o"],
                                  ["report", "/dev/zero"], ["plot", "/dev/zero", "-o", "p"],
                                  ["diff", "/dev/zero", "/dev/zero"], ["estimate", "/dev/urandom"]])
def test_an_endless_stream_is_refused_without_reading_it_whole(tmp_path, argv):
    start = time.perf_counter()
    run = run_wss_here(argv, cwd=tmp_path)
    _one_error_line(run, "/dev/")
    assert "more than the 8.0 MB" in run.stderr or "does not start with '{'" in run.stderr
    assert time.perf_counter() - start < 60
    assert list(tmp_path.iterdir()) == []


def test_a_scenario_from_a_pipe_is_read(tmp_path):
    """A FIFO (or a process substitution, ``wss validate <(...)``) within the limit is read as a file is."""
    fifo = tmp_path / "scenario.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(FC_MNIST.read_bytes())

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    run = run_wss_here(["validate", fifo], cwd=tmp_path)
    writer.join(30)
    assert run.returncode == 0, run.stderr


def test_a_large_regular_file_is_refused_from_its_size(tmp_path, monkeypatch):
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:  # sparse: 9 MB that take no room
        f.truncate(LIMITS.text_bytes + 2**20)
    _one_error_line(run_wss_here(["validate", big], cwd=tmp_path), "9.0 MB, more than the 8.0 MB")
    opened: list[int] = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: opened.append(n) or real_read(fd, n))
    with pytest.raises(InputError, match="9.0 MB"):
        read_input(big, LIMITS.text_bytes)
    assert opened == []  # refused from fstat: not one byte read


def test_read_input_reads_a_stream_only_to_its_limit():
    with pytest.raises(InputError, match="more than the 1,000 bytes"):
        read_input("/dev/zero", 1000)
    with pytest.raises(InputError, match="does not start with '{'"):
        read_input("/dev/zero", 2**30, starts_with=b"{")


@pytest.mark.parametrize("command", ["validate", "report"])
def test_a_folder_is_refused(tmp_path, command):
    _one_error_line(run_wss_here([command, tmp_path], cwd=tmp_path), str(tmp_path))


# ---------------------------------------------------------------------------- damaged result files


def _damaged(result_file: Path, tmp_path: Path, change) -> Path:
    doc = json.loads(result_file.read_text(encoding="utf-8"))
    text = change(doc)
    path = tmp_path / "damaged.json"
    path.write_text(text if isinstance(text, str) else json.dumps(doc), encoding="utf-8")
    return path


DAMAGE = {
    "no steps": (lambda d: d.update(steps=[]), "it holds no steps"),
    "no step_time_s": (lambda d: d.pop("step_time_s"), "step_time_s: Field required"),
    "records not a list": (lambda d: d.update(records={"a": 1}), "records: Input should be a valid list"),
    "a step time that is text": (lambda d: d["steps"][0].update(time_s="fast"), "steps.0.time_s"),
    "NaN": (lambda d: json.dumps(d).replace('"step_time_s": ', '"step_time_s": NaN, "x": ', 1),
            "NaN is not a number wss writes"),
    "1e999": (lambda d: json.dumps(d).replace('"total_time_s": ', '"total_time_s": 1e999, "x": ', 1),
              "the number 1e999 is not finite"),
    "truncated": (lambda d: json.dumps(d)[:1000], "not JSON"),
    "a list": (lambda d: "[" + json.dumps(d) + "]", "does not start with '{'"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("argv", [["report", "{r}"], ["report", "{r}", "--by", "kernel"], ["diff", "{r}", "{ok}"],
                                  ["diff", "{ok}", "{r}", "--json"], ["plot", "{r}", "-o", "{d}/p"]])
def test_a_damaged_result_is_one_line(tmp_path, result_file, damage, argv):
    change, words = DAMAGE[damage]
    bad = _damaged(result_file, tmp_path, change)
    run = run_wss_here([a.format(r=bad, ok=result_file, d=tmp_path) for a in argv], cwd=tmp_path)
    _one_error_line(run, f"{bad}: not a wss result", words)
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(metrics=[1]), "metrics: Input should be a valid dictionary"),
    (lambda d: d.pop("scenario_sha256") and None, "scenario_sha256: Field required"),
    (lambda d: json.dumps(d).replace('"metrics": {', '"metrics": {"x": NaN, ', 1), "NaN is not a number"),
    (lambda d: "\0" * 100, "does not start with '{'"),
])
def test_a_damaged_baseline_is_one_line(tmp_path, change, words):
    baselines = tmp_path / "b"
    baselines.mkdir()
    doc = json.loads((SCENARIOS.parent / "baselines" / "fc_mnist.json").read_text(encoding="utf-8"))
    text = change(doc)
    (baselines / "fc_mnist.json").write_text(text if isinstance(text, str) else json.dumps(doc), encoding="utf-8")
    _one_error_line(run_wss_here(["check", FC_MNIST, "--baselines", baselines], cwd=tmp_path), "fc_mnist.json", words)
