"""Plain data for ``--json`` output: what ``wss validate`` and ``wss simulate`` print as text, as JSON-ready dicts.

Each function returns a dict of JSON types only (strings, numbers, lists, dicts, None), so the CLI prints
it with :func:`json.dumps` as one document.  Numbers keep full precision and their units are in
their keys, as in the Result.
"""

from __future__ import annotations

from typing import Any

from wss.errors import ScenarioError, WssError
from wss.model.plan import Plan
from wss.model.result.results import Result

__all__ = ["plan_summary", "result_summary", "error_summary"]


def plan_summary(plan: Plan) -> dict[str, Any]:
    """What ``wss validate`` checked and found: capacities, SRAM, the micro-batching chosen and the tree."""
    s = plan.scenario
    return {
        "name": s.name,
        "params": plan.params,
        "nonzero_params": plan.nnz,
        "wafers": s.hardware.wafers,
        "memoryx": {"state_bytes": plan.memoryx_state_bytes, "capacity_bytes": s.hardware.memoryx.capacity_bytes,
                    "dram_bytes": plan.memoryx_dram_bytes, "flash_bytes": plan.memoryx_flash_bytes},
        "wafer_sram": {"activation_bytes_needed": plan.sram_bytes_needed,
                       "activation_bytes_available": plan.sram_bytes_available},
        "micro_batch": max(plan.micro_batches),
        "micro_batches": list(plan.micro_batches),
        "activation_checkpointing": plan.checkpointing,
        "plan_choice": plan.choice.model_dump(mode="json") if plan.choice is not None else None,
        "swarmx": {"levels": plan.tree_levels, "nodes_per_level": list(plan.nodes_per_level)},
        "streamed_kernels": len(plan.kernels),
        "chunks_per_pass_set": sum(k.n_chunks for k in plan.kernels),
    }


def result_summary(result: Result) -> dict[str, Any]:
    """The Result as ``result.json`` holds it, without the per-pass ``records`` (``wss report`` reads those).

    Everything the text summary shows is here (step time, throughput, FLOPs, breakdown, pacing, memory,
    energy, the plan's choice, the resolved scenario), with the per-step records.
    """
    return result.model_dump(mode="json", exclude={"records"})


def error_summary(exc: WssError, source: str, message: str | None = None) -> dict[str, Any]:
    """A failed check as data: ``ok`` false, the message (``message``, else the error's), and one entry per bad field.

    ``problems`` lists ``{path, message, line}`` for a :class:`~wss.errors.ScenarioError` (and an
    infeasible scenario), and is empty for other errors.
    """
    problems = []
    if isinstance(exc, ScenarioError):
        problems = [{"path": p.path, "message": p.message, "line": p.line} for p in exc.problems]
    return {"ok": False, "scenario_file": source, "error": message if message is not None else str(exc),
            "problems": problems}
