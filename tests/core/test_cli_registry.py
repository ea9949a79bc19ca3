"""The one command registry of ``wss``: every command is registered once, has help, and fails the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from wss.cli import app, main
from wss.cli.common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, relabel
from wss.errors import FieldProblem, InfeasibleError, WssError

COMMANDS = [name for module in app.COMMAND_MODULES for name in module.COMMANDS]


def test_every_command_is_owned_by_exactly_one_module():
    assert len(COMMANDS) == len(set(COMMANDS))
    assert set(COMMANDS) == {"simulate", "validate", "presets", "plan", "plot", "report", "baseline", "check",
                             "estimate", "reproduce", "sweep", "size", "schema", "diff", "completion"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert f"usage: wss {command}" in capsys.readouterr().out


def _arguments_without_help(parser, prefix: str) -> list[str]:
    import argparse

    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _arguments_without_help(sub, f"{prefix} {name}")
        elif not isinstance(action, argparse._HelpAction) and (not action.help or action.help == argparse.SUPPRESS):
            missing.append(f"{prefix}: {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_argument_of_every_command_has_help_text():
    assert _arguments_without_help(app.build_parser(), "wss") == []


@pytest.mark.parametrize("module", app.COMMAND_MODULES, ids=lambda m: m.__name__)
def test_a_wss_error_from_any_command_is_one_line_and_exit_2(module, monkeypatch, capsys):
    def fail(args):
        raise WssError("something the user can fix")

    monkeypatch.setattr(module, "run", fail)
    command = module.COMMANDS[0]
    argv = [command] if command in ("presets", "schema") else [command, "x.yaml"]
    if command in ("plot", "report"):
        argv = [command, "result.json"]
    if command == "diff":
        argv = [command, "a.json", "b.json"]
    if command == "completion":
        argv = [command, "bash"]
    if command == "size":
        argv = [command, "x.yaml", "--tokens", "1e9"]  # required: without it argparse refuses before run()
    assert main(argv) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert captured.err == "error: something the user can fix\n" and captured.out == ""


def test_ctrl_c_is_exit_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(app.COMMAND_MODULES[0], "run", interrupted)
    assert main(["presets"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "interrupted\n"


def test_errors_raised_after_loading_name_the_scenario_file():
    exc = InfeasibleError("<scenario 'x'>", [FieldProblem("hardware.memoryx", "too small")])
    assert relabel(exc, Path("runs/x.yaml")) == "runs/x.yaml: hardware.memoryx: too small"
    assert relabel(WssError("plain"), Path("runs/x.yaml")) == "plain"


def test_an_unknown_command_is_a_usage_error(capsys):
    assert main(["simulat"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: wss") and "error: unknown command 'simulat'; did you mean 'simulate'?" in err
