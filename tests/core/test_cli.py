"""The ``wss`` command end to end: the installed console script (the real entry point) and ``wss.cli.main``.

Every shipped scenario is simulated, and the brain-scale two (gpt_1t.yaml, brain_120t.yaml) validated,
through ``wss.cli.main`` in this process (``core_helpers.run_wss_here``: a fresh interpreter per scenario
cost more than most of the simulations), and so do the default output folder's and ``--set``'s runs;
test_in_process_runs_print_what_the_real_program_prints checks that the console script prints the same, byte for
byte.  ``--version`` under ``python -m``, usage errors, ``validate`` and ``presets`` run the real program.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
from core_helpers import SCENARIOS, run_wss, run_wss_here, run_wss_parallel, wss_command

import wss
from wss.model.result.results import Result

#: The brain-scale shipped scenarios: simulated like the rest, and `wss validate` is checked on them too.
SLOW = {"brain_120t.yaml", "gpt_1t.yaml"}
ALL = sorted(p.name for p in SCENARIOS.glob("*.yaml"))


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """Simulate every shipped scenario, validate the brain-scale ones, and run the default output folder's and
    ``--set``'s simulations, all in this process (the output folder is relative to the folder it runs in)."""
    root = tmp_path_factory.mktemp("cli")
    jobs = {}
    default_cwd = root / "default"
    default_cwd.mkdir()
    jobs[("default-out", "fc_mnist.yaml")] = (["simulate", SCENARIOS / "fc_mnist.yaml", "--quiet"], default_cwd)
    set_out = root / "with-set"
    jobs[("set", "fc_mnist.yaml")] = (
        ["simulate", SCENARIOS / "fc_mnist.yaml", "--set", "hardware.wafers=16", "--set", "training.steps=1",
         "--set", "workload.model=gpt3-125m", "--set", "training.seq_len=256", "-o", set_out],
        root,
    )
    here = {("simulate", n): run_wss_here(["simulate", SCENARIOS / n, "-o", root / n], root) for n in ALL}
    here |= {("validate", n): run_wss_here(["validate", SCENARIOS / n], root) for n in SLOW}
    here |= {key: run_wss_here(argv, cwd) for key, (argv, cwd) in jobs.items()}
    return root, here


def test_every_shipped_scenario_is_covered():
    assert set(ALL) >= SLOW
    assert len(ALL) >= 8


@pytest.mark.parametrize("name", ALL)
def test_simulate_shipped_scenario(shipped, name):
    root, runs = shipped
    run = runs[("simulate", name)]
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr == ""
    scenario = wss.load_scenario(SCENARIOS / name)
    result_path = root / name / "result.json"
    assert result_path.is_file()
    assert sorted(p.name for p in (root / name).iterdir()) == ["result.json"]  # atomic write: no temporary left
    result = Result.load(result_path)
    assert result.scenario == scenario
    assert result.step_time_s > 0 and len(result.steps) == scenario.training.steps
    # the summary names the run, the step time and where the result went
    out = run.stdout
    first = out.splitlines()[0]
    assert scenario.name in first and scenario.workload.model.name in first
    assert "step time" in out
    assert re.search(rf"bound by\s+{result.bound_by}\b", out)
    assert str(result_path) in out


@pytest.mark.parametrize("name", sorted(SLOW))
def test_validate_slow_shipped_scenario(shipped, name):
    _, runs = shipped
    run = runs[("validate", name)]
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"ok: {SCENARIOS / name}")
    assert "MemoryX" in run.stdout and "wafer SRAM" in run.stdout and "SwarmX" in run.stdout


def test_simulate_writes_to_out_scenario_name_by_default(shipped):
    root, runs = shipped
    run = runs[("default-out", "fc_mnist.yaml")]
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""  # --quiet
    name = wss.load_scenario(SCENARIOS / "fc_mnist.yaml").name
    assert (root / "default" / "out" / name / "result.json").is_file()


def test_simulate_with_set_overrides(shipped):
    root, runs = shipped
    run = runs[("set", "fc_mnist.yaml")]
    assert run.returncode == 0, run.stderr
    result = Result.load(root / "with-set" / "result.json")
    assert result.scenario.hardware.wafers == 16
    assert result.scenario.training.steps == 1
    assert result.scenario.workload.model.name == "gpt3-125m"
    assert result.scenario.training.seq_len == 256
    assert result.cluster["wafers"] == 16 and result.cluster["tree_levels"] == 2


def test_validate_prints_the_plan_and_writes_nothing(tmp_path):
    run = run_wss(["validate", SCENARIOS / "gpt3_175b.yaml", "--set", "hardware.wafers=64"], cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok:")
    assert re.search(r"\b64 x wse2\b", run.stdout)
    assert "checkpointing offload" in run.stdout
    assert list(tmp_path.iterdir()) == []


def test_presets_lists_every_preset(tmp_path):
    run = run_wss(["presets"], cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    presets = wss.list_presets()
    words = set(re.split(r"[\s,:]+", run.stdout))
    for kind, names in presets.items():
        assert set(names) <= words, kind
    assert {"cs2-cluster", "wse2", "memoryx-12tb", "swarmx-1to4", "gpt3-175b", "fc-mnist"} <= words


def test_python_dash_m_entry_points(tmp_path):
    for module in ("wss", "wss.cli"):
        run = subprocess.run([sys.executable, "-m", module, "--version"], cwd=tmp_path, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"wss {wss.__version__}"
        assert run.stderr == ""


def test_usage_errors_exit_non_zero(tmp_path):
    run = run_wss(["simulate"], cwd=tmp_path)
    assert run.returncode == 2
    assert "usage:" in run.stderr and "Traceback" not in run.stderr


# ---------------------------------------------------------------------------- bad input

BAD = {
    # name: (yaml, extra args, words the single error line must contain)
    "malformed": (
        """
        name: x
        hardware:
          preset: cs2-cluster
           wafers: 4
        workload: {model: fc-mnist}
        training: {global_batch: 8}
        """,
        [],
        ["(line 4)", "malformed YAML"],
    ),
    "unknown-key": (
        """
        name: x
        hardware: {preset: cs2-cluster, wafers: 4}
        workload: {model: fc-mnist}
        training:
          global_batch: 8
          optimiser: sgd
        """,
        [],
        ["training.optimiser (line 6)", "unknown field"],
    ),
    "wrong-type": (
        """
        name: x
        hardware:
          preset: cs2-cluster
          wafers: four
        workload: {model: fc-mnist}
        training: {global_batch: 8}
        """,
        [],
        ["hardware.wafers (line 4)", "integer"],
    ),
    "negative-bandwidth": (
        """
        name: x
        hardware:
          preset: cs2-cluster
          memoryx:
            dram_bandwidth_Bps: -3.0e11
        workload: {model: fc-mnist}
        training: {global_batch: 8}
        """,
        [],
        ["hardware.memoryx.dram_bandwidth_Bps (line 5)", "must be at least 1,000"],
    ),
    "unknown-preset": (
        """
        name: x
        hardware:
          preset: cs2-cluster
          wafer: {preset: wse9}
        workload: {model: fc-mnist}
        training: {global_batch: 8}
        """,
        [],
        ["hardware.wafer.preset (line 4)", "wse9"],
    ),
    "does-not-fit-memoryx": (
        """
        name: x
        hardware:
          preset: cs2-cluster
          memoryx: {preset: memoryx-4tb, shards: 1}
        workload: {model: gpt3-175b}
        training: {global_batch: 4, seq_len: 2048}
        """,
        [],
        ["hardware.memoryx:", "TB"],
    ),
    "sram-too-small-at-micro-batch-1": (
        """
        name: x
        hardware: {preset: cs2-brain-scale, wafers: 1}
        workload: {model: brain-120t}
        training: {global_batch: 1, seq_len: 2048, activation_checkpointing: blocks}
        """,
        [],
        ["training.micro_batch:", "one sample"],
    ),
    "bad-set-value": (
        """
        name: x
        hardware: {preset: cs2-cluster}
        workload: {model: fc-mnist}
        training: {global_batch: 8}
        """,
        ["--set", "hardware.swarmx.link_bandwidth_Bps=-1"],
        ["hardware.swarmx.link_bandwidth_Bps", "must be at least 1,000"],
    ),
}


#: Bad inputs also run through `wss validate` (the rest share its code path: loading happens first).
VALIDATED = {"does-not-fit-memoryx", "sram-too-small-at-micro-batch-1", "unknown-key", "malformed"}


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    """Each bad input through ``wss.cli.main`` in this process (the real program prints the same:
    test_in_process_runs_print_what_the_real_program_prints)."""
    root = tmp_path_factory.mktemp("bad")
    jobs = {}
    for name, (text, extra, _) in BAD.items():
        path = root / f"{name}.yaml"
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        jobs[("simulate", name)] = (["simulate", path, "-o", root / f"out-{name}", *extra], root)
        if name in VALIDATED:
            jobs[("validate", name)] = (["validate", path, *extra], root)
    jobs[("simulate", "missing-file")] = (["simulate", root / "missing.yaml", "-o", root / "out-missing-file"], root)
    return root, {key: run_wss_here(argv, cwd) for key, (argv, cwd) in jobs.items()}


def test_in_process_runs_print_what_the_real_program_prints(tmp_path):
    """``core_helpers.run_wss_here`` (``wss.cli.main`` called in the test's process, as most CLI tests do) gives
    the exit code, stdout and stderr the installed console script gives, byte for byte: for a bad scenario
    (one error line, exit 2, nothing written), an unknown option (argparse's usage error), a listing, and a
    simulation writing its outputs."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent(BAD["unknown-key"][0]).lstrip("\n"), encoding="utf-8")
    commands = {
        "bad scenario": ["simulate", bad, "-o", "out-bad"],
        "usage error": ["validate", SCENARIOS / "fc_mnist.yaml", "--no-such-option"],
        "presets": ["presets"],
        "simulate": ["simulate", SCENARIOS / "fc_mnist.yaml", "-o", "out", "--trace"],
    }
    for folder in ("real", "here"):
        (tmp_path / folder).mkdir()
    real = run_wss_parallel({name: (argv, tmp_path / "real") for name, argv in commands.items()})
    for name, argv in commands.items():
        here = run_wss_here(argv, tmp_path / "here")
        assert (here.returncode, here.stdout, here.stderr) == (real[name].returncode, real[name].stdout,
                                                               real[name].stderr), name
    assert real["bad scenario"].returncode == 2 and real["usage error"].returncode == 2
    assert real["presets"].returncode == real["simulate"].returncode == 0
    assert sorted(p.name for p in (tmp_path / "real").rglob("*")) == sorted(
        p.name for p in (tmp_path / "here").rglob("*")) == ["out", "result.json", "trace.json"]


@pytest.mark.parametrize(
    "command, name",
    [("simulate", n) for n in sorted(BAD)] + [("validate", n) for n in sorted(VALIDATED)],
)
def test_bad_input_exits_2_with_one_clear_message(bad_runs, name, command):
    root, runs = bad_runs
    run = runs[(command, name)]
    path = root / f"{name}.yaml"
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"error: {path}: ")
    for words in BAD[name][2]:
        assert words in lines[0]
    assert run.stdout == ""
    assert not (root / f"out-{name}").exists()  # nothing written, not even the folder


def test_missing_scenario_file(bad_runs):
    root, runs = bad_runs
    run = runs[("simulate", "missing-file")]
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: {root / 'missing.yaml'}")
    assert "no such file" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert "Traceback" not in run.stderr
    assert not (root / "out-missing-file").exists()


def test_entry_point_is_the_console_script():
    cmd = wss_command()
    assert cmd[-1].endswith("wss")


def test_presets_fails_when_the_installation_has_none(tmp_path, monkeypatch, capsys):
    """A package built without its configs/ (a broken wheel) says so and exits 1, not an empty list and 0."""
    from wss.cli import main
    from wss.model.scenario import presets

    monkeypatch.setattr(presets, "config_root", lambda: tmp_path)
    presets._part_files.cache_clear()
    presets._model_table.cache_clear()
    try:
        assert main(["presets"]) == 1
    finally:
        presets._part_files.cache_clear()
        presets._model_table.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith("error: no presets found under") and "missing its configs/" in err
