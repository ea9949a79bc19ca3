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

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "simulate",
    "plan",
    "load_scenario",
    "list_presets",
    "Scenario",
    "Result",
    "WssError",
    "ScenarioError",
    "InfeasibleError",
]
