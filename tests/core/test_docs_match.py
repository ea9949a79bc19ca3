"""The README and the guides say what the code does: each check reads the fact from the code itself."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

from wss.model.scenario.training import TrainingConfig
from wss.model.scenario.workload import Layer
from wss.studies.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_names_every_layer_kind_and_every_optimizer():
    union = typing.get_args(typing.get_args(Layer)[0])
    kinds = [typing.get_args(m.model_fields["kind"].annotation)[0] for m in union]
    assert kinds and all(f"`{kind}`" in README for kind in kinds), kinds
    optimizers = typing.get_args(TrainingConfig.model_fields["optimizer"].annotation)
    line = next(line for line in README.splitlines() if line.strip().startswith("optimizer:"))
    assert all(name in line for name in optimizers), (optimizers, line)


def test_the_sweep_guide_gives_the_sweeps_own_defaults():
    guide = (ROOT / "docs" / "sweeps.md").read_text(encoding="utf-8")
    default = inspect.signature(sweep).parameters["progress"].default
    assert f"progress={default!r}".replace("'", '"') in guide
