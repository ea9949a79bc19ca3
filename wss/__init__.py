"""wss: a cycle-approximate simulator of wafer-scale weight-streaming training clusters.

>>> import wss
>>> result = wss.simulate(wss.load_scenario("scenarios/fc_mnist.yaml"))
>>> result.step_time_s
"""

from .errors import InfeasibleError, ScenarioError, WssError
from .presets import list_presets
from .results import Result
from .scenario import Scenario, load_scenario
from .simulate import plan, simulate
from .sweep import sweep  # the function wss.sweep(...) shadows the module: use `from wss.sweep import ...` for the rest

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "simulate",
    "plan",
    "sweep",
    "load_scenario",
    "list_presets",
    "Scenario",
    "Result",
    "WssError",
    "ScenarioError",
    "InfeasibleError",
]
