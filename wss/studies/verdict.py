"""Bottleneck verdict: what bounds the step, by how much, and which one change helps most.

The verdict has two halves:

1. **What bounds the step** is read from the Result: the category pacing most
   of the step (``Result.bound_by``, the largest of ``pacing_s``: compute,
   stream, flash, optimizer, bubble, input), refined to a part.  A ``stream`` stall is pinned on the slowest link of the
   weight path, from the scenario's bandwidths: MemoryX DRAM (4 B of fp32
   master read per streamed weight), MemoryX network, SwarmX links, wafer
   I/O.  Parts within 1% of the slowest are co-bottlenecks and are relaxed
   together (GPT-3 on CS-2s: SwarmX links and wafer I/O both run at
   150 GB/s, so doubling either alone gains nothing).
2. **Which change helps most** is measured, not guessed: each candidate part
   is doubled (``load_scenario(result.scenario, overrides={...: 2 x})``) and
   the scenario is simulated again.  Only parts that can matter are tried
   (those behind a category taking at least ``min_share`` of the step, in the
   breakdown or in the pacing; flash
   only when something lives in flash), so GPT-3 175B on 192 wafers needs two
   re-simulations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.result.results import Result
from wss.model.scenario import PRECISION_BYTES, load_scenario
from wss.views.summary import fmt_time, input_rate_words, si

__all__ = ["PARTS", "COST_FIELDS", "Candidate", "Verdict", "verdict", "candidate_parts", "weight_path_rates"]

#: part id -> (label, what is doubled, dotted scenario fields).
PARTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # In weight-path order: MemoryX -> SwarmX -> wafer, then the update side.
    "memoryx_dram": ("MemoryX DRAM", "MemoryX DRAM bandwidth", ("hardware.memoryx.dram_bandwidth_Bps",)),
    "memoryx_flash": (
        "MemoryX flash",
        "MemoryX flash bandwidth (read and write)",
        ("hardware.memoryx.flash_read_bandwidth_Bps", "hardware.memoryx.flash_write_bandwidth_Bps"),
    ),
    "memoryx_network": ("MemoryX network", "MemoryX network bandwidth", ("hardware.memoryx.network_bandwidth_Bps",)),
    "swarmx": ("SwarmX links", "SwarmX link bandwidth", ("hardware.swarmx.link_bandwidth_Bps",)),
    "wafer_io": ("wafer I/O", "wafer I/O bandwidth", ("hardware.wafer.io_bandwidth_Bps",)),
    "wafer_compute": ("wafer compute", "the wafer clock", ("hardware.wafer.clock_Hz",)),
    "optimizer": ("MemoryX optimizer", "the optimizer FLOP/s", ("hardware.memoryx.optimizer_flops",)),
    "inputs": ("input workers", "input-worker bandwidth", ("hardware.inputs.bandwidth_Bps",)),
    "runtime": (
        "runtime fixed costs",
        "1 / the runtime's fixed costs",
        ("hardware.runtime.step_overhead_s", "hardware.runtime.micro_batch_overhead_s",
         "hardware.runtime.kernel_switch_s", "hardware.runtime.kernel_pass_min_s"),
    ),
}
#: Fields that are costs, not rates: relaxing their part by a factor divides them by it.
COST_FIELDS = frozenset(PARTS["runtime"][2])
#: Not a part that can be doubled: the wait at the iteration boundary for the previous step's updates.
BUBBLE = "bubble"
BUBBLE_LABEL = "iteration-boundary bubble"
#: Bytes of fp32 master weight MemoryX reads per streamed weight (wss.model.plan: read_bytes = 4 nnz).
_MASTER_BYTES = 4
_UPDATE_BOUND = {"memoryx_dram": "memoryx_dram", "optimizer_flops": "optimizer", "memoryx_flash": "memoryx_flash"}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Candidate(_Model):
    """One change tried by re-simulation."""

    parts: list[str] = Field(description="Part ids relaxed together (co-bottlenecks are relaxed as one change).")
    change: str = Field(description="What was changed, e.g. 'SwarmX link bandwidth'.")
    factor: float = Field(description="Multiplier applied to every field of the parts.")
    overrides: dict[str, float] = Field(description="The dotted scenario overrides that were simulated.")
    step_time_s: float = Field(description="Re-simulated step time.")
    gain: float = Field(description="Fraction of the step cut: 1 - new / old (negative: slower).")

    def sentence(self, old_step_s: float) -> str:
        verb = "doubling" if self.factor == 2 else f"multiplying by {self.factor:g}"
        if self.gain >= 0:
            effect = f"would cut the step by {self.gain:.0%}"
        else:
            effect = f"would lengthen the step by {-self.gain:.0%}"
        return f"{verb} {self.change} {effect} ({fmt_time(old_step_s)} -> {fmt_time(self.step_time_s)})"


class Verdict(_Model):
    """What bounds the step and what would help."""

    scenario: str
    step_time_s: float = Field(description="The step time the gains are measured against.")
    category: str = Field(description="The category pacing most of the step (Result.bound_by).")
    share: float = Field(description="Fraction of the step that category paces (Result.pacing_s).")
    bound_by: str = Field(description="Part id ('+'-joined for co-bottlenecks) or 'bubble'.")
    bound_label: str = Field(description="Human name of bound_by.")
    detail: str = Field(description="Why: the figures behind the attribution.")
    candidates: list[Candidate] = Field(description="Changes tried, largest gain first.")
    min_gain: float = Field(0.005, description="Gains below this count as no help.")

    @property
    def best(self) -> Candidate | None:
        c = self.candidates[0] if self.candidates else None
        return c if c is not None and c.gain >= self.min_gain else None

    @property
    def best_change(self) -> str:
        """One sentence: the change that helps most, with its re-simulated effect."""
        if self.best is not None:
            return self.best.sentence(self.step_time_s)
        if not self.candidates:
            return "no change was tried"
        tried = ", ".join(c.change for c in self.candidates)
        return f"no single doubling tried ({tried}) cuts the step by {self.min_gain:.1%} or more"

    def format(self) -> str:
        lines = [
            f"verdict: bound by {self.bound_label} ({self.category} paces {self.share:.0%} of the "
            f"{fmt_time(self.step_time_s)} step)",
            f"  {self.detail}",
        ]
        if self.candidates:
            lines.append("  re-simulated with one change (new step time, change):")
            from wss.views.table import text_table

            rows = [[c.change + f" x{c.factor:g}", fmt_time(c.step_time_s),
                     f"{-c.gain:+.1%}" if abs(c.gain) >= 5e-4 else "0.0%"] for c in self.candidates]
            lines += ["    " + line for line in text_table(["", "", ""], rows, "<>>", rule=False)[1:]]
        lines.append(f"  best: {self.best_change}")
        return "\n".join(lines)


def _get(scenario: Any, dotted: str) -> float:
    node = scenario
    for part in dotted.split("."):
        node = getattr(node, part)
    return float(node)


def weight_path_rates(result: Result) -> dict[str, float]:
    """Streamed bytes/s each part of the weight path can carry into one wafer's path (slowest sets the pace).

    As the run had them: MemoryX at its shards times the slowest shard's rates (``faults.shards``), and
    SwarmX at its slowest edge (``faults.links``), since every wafer waits for the wafer behind it.  A
    leaf edge is the wafer's own I/O as well (it runs at the lesser of the two, times its factor), so a
    degraded leaf slows both: only relaxing both helps.
    """
    s = result.scenario
    hw = s.hardware
    rates = memoryx_rates(s)
    b_w = PRECISION_BYTES[s.training.weight_precision]
    leaf = f"swarmx.l{hw.swarmx.levels(hw.wafers)}."  # edges are named swarmx.l<level>.<child>
    factors = {f.edge: f.bandwidth_factor for f in s.faults.links}
    inner = min([1.0] + [v for e, v in factors.items() if not e.startswith(leaf)])
    at_leaf = min([1.0] + [v for e, v in factors.items() if e.startswith(leaf)])
    return {
        "memoryx_dram": rates.dram_Bps * b_w / _MASTER_BYTES,
        "memoryx_network": rates.network_Bps,
        "swarmx": hw.swarmx.link_bandwidth_Bps * min(inner, at_leaf),
        "wafer_io": hw.wafer.io_bandwidth_Bps * at_leaf,
    }


def _binding(rates: dict[str, float], tolerance: float = 0.01) -> list[str]:
    slowest = min(rates.values())
    return [p for p, r in rates.items() if r <= slowest * (1 + tolerance)]


def _update_bound(result: Result) -> str:
    """The part that bounds MemoryX updates, weighted by update time."""
    weight: dict[str, float] = {}
    for r in result.records:
        if r.where == "memoryx":
            part = _UPDATE_BOUND.get(r.bound_by, "optimizer")
            weight[part] = weight.get(part, 0.0) + (r.end_s - r.start_s) * r.repeats  # folded copies count too
    if not weight:
        return "optimizer"
    return max(sorted(weight), key=lambda p: weight[p])


def _shares(result: Result, of: str = "pacing_s") -> dict[str, float]:
    """Each category's fraction of the step, by what paced it (``pacing_s``) or what the wafer did."""
    t = result.step_time_s
    return {c: (v / t if t > 0 else 0.0) for c, v in getattr(result, of).items()}


def _attribute(result: Result, category: str) -> tuple[list[str], str]:
    """Part ids behind a breakdown category, and a sentence of the figures."""
    if category == "compute":
        return ["wafer_compute"], (
            f"the wafer computes {result.utilisation.get('wafer.compute', 0.0):.0%} of the run at "
            f"{si(result.scenario.hardware.wafer.clock_Hz, 'Hz')}"
        )
    if category == "stream":
        rates = weight_path_rates(result)
        bind = _binding(rates)
        figures = ", ".join(f"{PARTS[p][0]} {si(r, 'B/s')}" for p, r in sorted(rates.items(), key=lambda kv: kv[1]))
        return bind, f"the wafer waits for weight chunks; weight path (streamed bytes per wafer): {figures}"
    if category == "flash":
        return ["memoryx_flash"], (
            f"the stream waits for flash prefetch; {si(result.memory.memoryx_flash_bytes, 'B')} lives in flash"
        )
    if category in ("optimizer", "bubble"):
        part = _update_bound(result)
        what = "updates queue in the optimizer" if category == "optimizer" else (
            "the next step's first kernels wait for the previous step's updates")
        return ([part] if category == "optimizer" else [BUBBLE]), f"{what}; updates are bound by {PARTS[part][0]}"
    if category == "input":
        return ["inputs"], f"the wafer waits for its input data: {input_rate_words(result.scenario)}"
    if category in ("switch", "runtime"):
        rt = result.scenario.hardware.runtime
        floor = (f", and at least {si(rt.kernel_pass_min_s, 's')} from one kernel pass to the next"
                 if rt.kernel_pass_min_s else "")
        return ["runtime"], (
            f"the wafer pays the runtime's fixed costs: {si(rt.step_overhead_s, 's')} per step, "
            f"{si(rt.micro_batch_overhead_s, 's')} per micro-batch, {si(rt.kernel_switch_s, 's')} per kernel pass"
            f"{floor}"
        )
    return [], ""


def candidate_parts(result: Result, min_share: float = 0.05) -> list[list[str]]:
    """Groups of parts worth relaxing, from the categories taking at least ``min_share`` of the step.

    A category counts by the larger of its pacing and its breakdown share: a compute share of 40%
    is worth one re-simulation even when the stream paces the step.
    """
    pacing, done = _shares(result), _shares(result, "breakdown_s")
    shares = {c: max(pacing[c], done.get(c, 0.0)) for c in pacing}
    groups: list[list[str]] = []

    def add(parts: Iterable[str]) -> None:
        g = sorted(set(parts), key=list(PARTS).index)
        if g and g not in groups:
            groups.append(g)

    order = sorted(shares, key=lambda c: (-shares[c], c))
    for c in order:
        if shares[c] < min_share and groups:
            continue
        if c in ("optimizer", "bubble"):
            add([_update_bound(result)])
        elif c == "flash" and result.memory.memoryx_flash_bytes <= 0:
            continue
        else:
            add(p for p in _attribute(result, c)[0] if p in PARTS)
    return groups


def _label(parts: Sequence[str]) -> str:
    if list(parts) == [BUBBLE]:
        return BUBBLE_LABEL
    return " + ".join(PARTS[p][0] for p in parts)


def _step_time(scenario: Any) -> float:
    """Worker-process entry point: one simulation's step time."""
    from wss.model.simulate import simulate

    return simulate(scenario).step_time_s


def _step_times(scenarios: Sequence[Any], simulate: Callable[[Any], Result] | None, jobs: int,
                progress: Callable[[float], None] | None) -> list[float]:
    n = len(scenarios)
    if simulate is None and jobs > 1 and n > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
        with ProcessPoolExecutor(max_workers=min(jobs, n), mp_context=ctx) as pool:
            futures = [pool.submit(_step_time, sc) for sc in scenarios]
            out = []
            for i, f in enumerate(futures):
                out.append(f.result())
                if progress is not None:
                    progress((i + 1) / n)
            return out
    out = []
    for i, sc in enumerate(scenarios):
        out.append(simulate(sc).step_time_s if simulate is not None else _step_time(sc))
        if progress is not None:
            progress((i + 1) / n)
    return out


def verdict(
    result: Result,
    *,
    factor: float = 2.0,
    min_share: float = 0.05,
    parts: Sequence[Sequence[str] | str] | None = None,
    simulate: Callable[[Any], Result] | None = None,
    progress: Callable[[float], None] | None = None,
    jobs: int = 1,
) -> Verdict:
    """Name what bounds the step and measure which single change helps most.

    Parameters
    ----------
    result
        A finished run; its scenario is re-simulated with one change at a time.
    factor
        Multiplier applied to the relaxed part's fields (2: doubling).
    min_share
        Categories below this fraction of the step are not worth a re-simulation.
    parts
        Part ids (or groups of ids relaxed together) to try instead of the
        automatic choice, e.g. ``[["swarmx", "wafer_io"], "wafer_compute"]``.
    simulate
        ``Scenario -> Result`` (default :func:`wss.simulate`), e.g. to count
        calls in tests.  A custom one always runs in this process.
    progress
        Called with the fraction of re-simulations done.
    jobs
        Re-simulations run at once in worker processes (1: one after the
        other in this process).  Each GPT-3 175B run takes 1.3-3 s.
    """
    groups = _groups(result, parts, min_share)
    base = result.scenario
    base_overrides, old = _timing_baseline(result, simulate)
    runs = []
    for g in groups:
        overrides = {f: _get(base, f) / factor if f in COST_FIELDS else _get(base, f) * factor
                     for p in g for f in PARTS[p][2]}
        runs.append((g, overrides, load_scenario(base, overrides={**base_overrides, **overrides})))
    times = _step_times([sc for *_, sc in runs], simulate, jobs, progress)
    candidates = _ranked([
        Candidate(parts=list(g), change=" and ".join(PARTS[p][1] for p in g), factor=factor, overrides=overrides,
                  step_time_s=t, gain=1.0 - t / old if old > 0 else 0.0)
        for (g, overrides, _), t in zip(runs, times)
    ])
    category = result.bound_by
    bound, detail = _attribute(result, category)
    return Verdict(
        scenario=base.name,
        step_time_s=old,
        category=category,
        share=_shares(result)[category],
        bound_by="+".join(bound) if bound else category,
        bound_label=_label(bound) if bound else category,
        detail=detail,
        candidates=candidates,
    )


def _groups(result: Result, parts: Sequence[Sequence[str] | str] | None, min_share: float) -> list[list[str]]:
    """The groups of part ids to relax: the ones given (checked), else :func:`candidate_parts`."""
    if parts is None:
        return candidate_parts(result, min_share)
    groups = [[p] if isinstance(p, str) else list(p) for p in parts]
    for g in groups:
        for p in g:
            if p not in PARTS:
                raise ValueError(f"unknown part {p!r}; parts are {', '.join(PARTS)}")
    return groups


def _timing_baseline(result: Result, simulate: Callable[[Any], Result] | None) -> tuple[dict[str, Any], float]:
    """Overrides every re-simulation takes, and the step time their gains are measured against.

    A run with numerics is timed again without them (the re-simulations are timing only), else the
    result's own step time is the baseline.
    """
    if not result.scenario.numerics.enabled:
        return {}, result.step_time_s
    overrides: dict[str, Any] = {"numerics.enabled": False}
    scenario = load_scenario(result.scenario, overrides=overrides)
    return overrides, simulate(scenario).step_time_s if simulate is not None else _step_time(scenario)


def _ranked(candidates: list[Candidate]) -> list[Candidate]:
    """Largest gain first; equal gains (to 1e-9) keep the order they were tried in."""
    order = {tuple(c.parts): i for i, c in enumerate(candidates)}
    return sorted(candidates, key=lambda c: (-round(c.gain, 9), order[tuple(c.parts)]))
