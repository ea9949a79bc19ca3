"""Flags where people type them: ``-q`` and ``-v`` before or after the command, a bare ``wss``, a
misspelt command, and argument errors in the command's own words."""

from __future__ import annotations

import pytest
from core_helpers import SCENARIOS

from wss.cli import main

FC_MNIST = str(SCENARIOS / "fc_mnist.yaml")


@pytest.mark.parametrize("argv", [
    ["-q", "simulate", FC_MNIST],
    ["simulate", FC_MNIST, "-q"],
    ["simulate", "-q", FC_MNIST],
    ["--quiet", "simulate", FC_MNIST],
])
def test_quiet_before_or_after_the_command_silences_the_summary(argv, tmp_path, capsys):
    assert main([*argv, "-o", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert (tmp_path / "out" / "result.json").is_file()


@pytest.mark.parametrize("argv", [["-v", "simulate", FC_MNIST], ["simulate", FC_MNIST, "-v"]])
def test_verbose_before_or_after_the_command_logs_the_plan(argv, tmp_path, capsys):
    assert main([*argv, "-o", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "wss: INFO: fc-mnist: none checkpointing" in captured.err
    assert "step time" in captured.out
    assert "wss: DEBUG" not in captured.err


def test_verbose_counts_on_both_sides(tmp_path, capsys):
    """``wss -v simulate -v`` is ``-vv``: debug records too."""
    assert main(["-v", "simulate", FC_MNIST, "-v", "-o", str(tmp_path / "out")]) == 0
    assert "wss: DEBUG" in capsys.readouterr().err


def test_a_bare_wss_prints_the_help(capsys):
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: wss") and "simulate" in captured.out and captured.err == ""


@pytest.mark.parametrize(("word", "hint"), [
    ("simulat", "did you mean 'simulate'?"),
    ("reprodce", "did you mean 'reproduce'?"),
    ("xyzzy", "the commands are: simulate, validate, presets"),
])
def test_a_misspelt_command_gets_a_suggestion(word, hint, capsys):
    assert main([word, FC_MNIST]) == 2
    err = capsys.readouterr().err
    assert f"error: unknown command '{word}'; {hint}" in err


def test_an_argument_error_shows_the_commands_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", FC_MNIST, "--bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: wss simulate") and "unrecognized arguments: --bogus" in err
