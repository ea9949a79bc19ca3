"""Helpers shared by the core tests (imported as ``core_helpers``; conftest.py only holds fixtures).

Scenarios are plain dicts (what ``wss.load_scenario`` and ``wss.simulate`` accept), kept tiny so the
whole suite runs in well under a minute.  Hardware fields are overridden where a test needs a closed
form to be exact (zero hop latency, huge bandwidths, ...).
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"

#: Practically infinite bandwidth / rate, used to take a part out of the critical path.
HUGE = 1e18


@contextlib.contextmanager
def larger_shards_first() -> Any:
    """Put an uneven batch's larger shards on the first wafers (``numpy.array_split`` order), as wss did before it
    spread them over the tree (``wss/model/scenario/shards.py``).  The drift-fold tests were written on those
    layouts: they hang drifting subtrees at every level of the tree, which gives several drifting worlds, run-outs
    and chunks that cross early on few wafers.  The spread placement reaches the same structures only where one or
    two wafers take a sample more."""
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("wss.model.scenario.shards.spread_order", lambda wafers, fan_out: list(range(wafers)))
        yield


def deep_merge(base: dict, over: dict) -> dict:
    """Merge ``over`` onto a copy of ``base`` (mappings key by key, anything else replaces)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def dense_model(*widths: int, name: str = "mlp", activation: str = "none") -> dict:
    """An inline feature model of dense layers: widths (4096, 4096) is one 4096 x 4096 kernel."""
    layers = [
        {"kind": "dense", "in_features": a, "out_features": b, "activation": activation}
        for a, b in zip(widths, widths[1:])
    ]
    return {"name": name, "input": "features", "layers": layers}


def scenario_dict(
    model: Any = None,
    wafers: int = 1,
    global_batch: int | None = None,
    steps: int = 1,
    optimizer: str = "sgd",
    **over: Any,
) -> dict:
    """A tiny scenario on the cs2-cluster preset; ``over`` is deep-merged on top (e.g. hardware=...)."""
    base = {
        "name": "tiny",
        # No fixed runtime costs: the closed forms here are about streaming and arithmetic (the fixed
        # costs have their own tests, which set hardware.runtime).
        "hardware": {"preset": "cs2-cluster", "wafers": wafers, "runtime": {"preset": "ideal"}},
        "workload": {"model": model if model is not None else dense_model(256, 256)},
        # Unclipped gradients: the closed forms here follow each update as its gradient arrives (clipping has
        # its own tests, tests/core/test_gradient_clipping.py).
        "training": {
            "global_batch": global_batch if global_batch is not None else wafers,
            "optimizer": optimizer,
            "steps": steps,
            "gradient_clipping": "none",
        },
    }
    return deep_merge(base, over)


def ideal_hardware(**over: Any) -> dict:
    """Hardware overrides that remove every stage but the ones a test wants: huge bandwidths, no latency, and an
    activation store with no limit of its own (the cluster presets' activation servers have one)."""
    base = {
        "wafer": {"io_bandwidth_Bps": HUGE},
        "activation_store": {"preset": "host-unlimited"},
        "memoryx": {"dram_bandwidth_Bps": HUGE, "network_bandwidth_Bps": HUGE, "optimizer_flops": HUGE},
        "swarmx": {"link_bandwidth_Bps": HUGE, "hop_latency_s": 0.0},
        "inputs": {"bandwidth_Bps": HUGE, "latency_s": 0.0},
        "runtime": {"preset": "ideal"},
    }
    return deep_merge(base, over)


def wss_command() -> list[str]:
    """The installed ``wss`` console script (the real entry point), else ``python -m wss``."""
    script = Path(sys.executable).with_name("wss")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "wss"]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    env["PYTHONHASHSEED"] = "random"
    return env


def run_wss(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the ``wss`` command once and capture its output."""
    return subprocess.run(
        [*wss_command(), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=cli_env()
    )


def _capture() -> io.TextIOWrapper:
    """A text stream like a pipe's: UTF-8 over bytes (``.buffer`` works), not a terminal."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)


def _captured(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


def run_wss_here(args: list[Any], cwd: Path) -> subprocess.CompletedProcess:
    """Run ``wss ARGS`` from folder ``cwd`` in this process, through the entry point function the console
    script calls (``wss.cli.main``), with stdout and stderr captured: what :func:`run_wss` gives, without a
    fresh interpreter's second of start-up.  For tests of a command's output, exit code and files; what only
    a real process shows (signals, the start-up, ``python -m wss``, pipes closing) keeps :func:`run_wss`.

    An exception that escapes ``main`` is raised here, failing the test as the traceback on a real run's
    stderr would; ``SystemExit`` (argparse's usage errors, ``--version``) gives its exit code as Python would.
    """
    from wss.cli import main

    argv = [str(a) for a in args]
    out, err = _capture(), _capture()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(argv, code, _captured(out), _captured(err))


def run_wss_parallel(
    jobs: dict[str, tuple[list[str], Path]], timeout: float = 180
) -> dict[str, subprocess.CompletedProcess]:
    """Run several ``wss`` commands at once (the machine has several cores); results by job key."""
    procs = {}
    for key, (args, cwd) in jobs.items():
        procs[key] = (
            args,
            subprocess.Popen(
                [*wss_command(), *map(str, args)],
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=cli_env(),
            ),
        )
    out = {}
    for key, (args, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=timeout)
        out[key] = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    return out


def assert_clear_scenario_error(raw: dict, path: str, words: str, tmp_path: Path, capsys: Any) -> None:
    """``raw`` is refused with a problem at ``path`` whose message holds ``words``, and ``wss validate`` on it
    as a file exits 2 with one line, ``error: ...``, naming ``path`` (no traceback)."""
    import json

    import pytest

    import wss
    from wss.cli import main
    from wss.errors import ScenarioError

    with pytest.raises(ScenarioError) as err:
        wss.load_scenario(raw)
    assert any(p.path == path and words in p.message for p in err.value.problems), err.value.problems
    file = tmp_path / "s.yaml"
    file.write_text(json.dumps(raw))
    assert main(["validate", str(file)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and path in lines[0]


def result_numbers(doc: object, path: str = "") -> dict[str, float]:
    """Every number of a Result's JSON (``json.loads(result.to_json())``), by its path."""
    if isinstance(doc, dict):
        return {k: v for key, value in doc.items() for k, v in result_numbers(value, f"{path}.{key}").items()}
    if isinstance(doc, list):
        return {k: v for i, value in enumerate(doc) for k, v in result_numbers(value, f"{path}[{i}]").items()}
    if isinstance(doc, (int, float)) and not isinstance(doc, bool):
        return {path: float(doc)}
    return {}
