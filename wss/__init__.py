"""wss: a cycle-approximate simulator of wafer-scale weight-streaming training clusters.

>>> import wss
>>> result = wss.simulate(wss.load_scenario("scenarios/fc_mnist.yaml"))
>>> result.step_time_s

The package is layered (see docs/architecture.md): :mod:`wss.model` turns a
Scenario into a Result; :mod:`wss.views` shows Results; :mod:`wss.studies`
runs the model many times (estimate, sweep, verdict, validation, check);
:mod:`wss.cli` is the command line.  What users reach for is exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import wss._starting  # noqa: F401  (first: a Ctrl-C while the wss program starts ends it without a traceback)
from wss._version import __version__
from wss.errors import InfeasibleError, ScenarioError, WssError

if TYPE_CHECKING:
    from wss.model.plan import Plan
    from wss.model.result.results import Result
    from wss.model.scenario import Scenario, load_scenario
    from wss.model.scenario.presets import list_presets
    from wss.model.simulate import plan, simulate
    from wss.studies.estimate import Estimate, estimate
    from wss.studies.size import size
    from wss.studies.sweep import sweep
    from wss.studies.verdict import Verdict, verdict

__all__ = [
    "__version__",
    "simulate",
    "plan",
    "estimate",
    "sweep",
    "size",
    "verdict",
    "load_scenario",
    "list_presets",
    "Scenario",
    "Plan",
    "Result",
    "Estimate",
    "Verdict",
    "WssError",
    "ScenarioError",
    "InfeasibleError",
]

# Everything but the version and the errors is imported on first use: the model pulls in pydantic, numpy
# and SimPy, the studies pandas, so `import wss` (and with it `wss --help`, since `wss.cli` lives in this
# package) stays light.
_LAZY = {
    "simulate": "wss.model.simulate",
    "plan": "wss.model.simulate",
    "load_scenario": "wss.model.scenario",
    "Scenario": "wss.model.scenario",
    "list_presets": "wss.model.scenario.presets",
    "Plan": "wss.model.plan",
    "Result": "wss.model.result.results",
    "estimate": "wss.studies.estimate",
    "Estimate": "wss.studies.estimate",
    "sweep": "wss.studies.sweep",
    "size": "wss.studies.size",
    "verdict": "wss.studies.verdict",
    "Verdict": "wss.studies.verdict",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later look-ups find it directly
        return value
    raise AttributeError(f"module 'wss' has no attribute {name!r}")
