"""``wss --help`` and ``wss validate`` start fast: the CLI and ``import wss`` do not load the heavy libraries.

scipy (the numerics' sparse products), pandas (sweeps, reports as frames) and matplotlib (plots) are
imported only by the functions that use them; each check runs in a fresh interpreter, since this
test session has long imported them all.  ``benchmarks/bench_startup.py`` measures the wall time.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from core_helpers import REPO

HEAVY = ("scipy", "pandas", "matplotlib")


def _loaded_after(code: str) -> list[str]:
    """The heavy libraries in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["wss", "wss.cli"])
def test_importing_loads_no_heavy_library(module):
    assert _loaded_after(f"import {module}") == []


def test_help_loads_no_heavy_library_and_not_the_model():
    code = (
        "import sys\nfrom wss.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'wss.model.scenario' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)"
    )
    assert _loaded_after(code) == []


def test_validate_loads_no_heavy_library():
    code = "from wss.cli import main\nassert main(['validate', 'scenarios/fc_mnist.yaml']) == 0"
    assert _loaded_after(code) == []


def test_the_public_api_is_still_there_lazily():
    import wss

    for name in wss.__all__:
        assert getattr(wss, name) is not None, name
    with pytest.raises(AttributeError):
        wss.no_such_name  # noqa: B018


def test_cli_choices_repeat_the_studies_and_views():
    """The parser's choices are written out in the CLI so building it imports nothing heavy; they must agree."""
    from wss.cli import see, sweep
    from wss.studies import sweep as studies_sweep
    from wss.views import report

    assert see.REPORT_GROUPS == report.GROUPS and see.REPORT_SORT_KEYS == report.SORT_KEYS
    assert sweep.EXECUTORS == studies_sweep.EXECUTORS and sweep.FIDELITIES == studies_sweep.FIDELITIES


def test_validate_loads_neither_the_numerics_kernels_nor_simpy_processes():
    """The planner needs the cycle model only: the numpy GEMM kernels of real numerics stay unloaded."""
    code = (
        "import sys\nfrom wss.cli import main\nassert main(['validate', 'scenarios/gpt3_175b.yaml']) == 0\n"
        "assert 'wss.model.kernels.gemm' not in sys.modules and 'wss.model.kernels.sparse_format' not in sys.modules"
    )
    assert _loaded_after(code) == []


def test_loading_a_scenario_loads_neither_numpy_nor_the_planner_nor_the_result_models():
    """Its checks ask whether the wafers fold without the planner or the Result's pydantic models; ``wss validate``
    then loads the planner (numpy) but still not the Result's models."""
    code = (
        "import sys\nimport wss\nwss.load_scenario('scenarios/gpt3_175b.yaml')\n"
        "late = ('numpy', 'simpy', 'wss.model.plan', 'wss.model.result.results')\n"
        "assert not [m for m in late if m in sys.modules], [m for m in late if m in sys.modules]\n"
        "from wss.cli import main\nassert main(['validate', 'scenarios/gpt3_175b.yaml']) == 0\n"
        "assert 'wss.model.plan' in sys.modules and 'wss.model.result.results' not in sys.modules"
    )
    assert _loaded_after(code) == []
