"""``wss completion SHELL``: a completion script generated from the parser, that a real bash completes with."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from wss.cli import main


def _script(capsys, shell: str) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def _complete(script_path, words: list[str]) -> list[str]:
    """What bash's completion function offers for the last of ``words``."""
    cmd = (f"source {script_path}; COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; "
           f"_shtab_wss wss {words[-1]} {words[-2]}; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True, timeout=60).stdout
    return out.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_bash_completes_commands_and_options(capsys, tmp_path):
    script = tmp_path / "wss.bash"
    script.write_text(_script(capsys, "bash"), encoding="utf-8")
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=60)  # valid bash
    assert _complete(script, ["wss", "sim"]) == ["simulate"]
    assert "--metrics" in _complete(script, ["wss", "check", "--met"])
    assert _complete(script, ["wss", "completion", "z"]) == ["zsh"]


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_other_shells_get_a_script_naming_every_command(capsys, shell):
    from wss.cli import app

    text = _script(capsys, shell)
    for command in (c for m in app.COMMAND_MODULES for c in m.COMMANDS):
        assert command in text


def test_an_unknown_shell_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["completion", "fish"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
