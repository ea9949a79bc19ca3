"""Human-readable text for a Result or a Plan (used by the CLI; returns strings, prints nothing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from wss.errors import shorten
from wss.model.machine.input_rate import preparation
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.machine.swarmx_path import edge_Bps
from wss.model.plan import Plan
from wss.model.plan.activation_store import offload_bytes
from wss.model.scenario import HardwareConfig, Scenario
from wss.model.scenario.faults import describe_edges
from wss.model.scenario.presets import list_presets

if TYPE_CHECKING:  # a Plan's summary (wss validate) does not load the Result's models
    from wss.model.result.results import Result

__all__ = ["format_result", "format_plan", "si", "fmt_bytes", "cluster_int"]


def si(x: float, unit: str = "", digits: int = 3) -> str:
    """Format with an SI prefix: si(1.23e15, 'FLOP/s') -> '1.23 PFLOP/s'."""
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g} {prefix}{unit}"
    return f"{x:.{digits}g} {unit}".rstrip()


def fmt_bytes(b: float) -> str:
    return si(b, "B")


def fmt_time(t: float) -> str:
    if t >= 1:
        return f"{t:.4g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.4g} ms"
    return f"{t * 1e6:.4g} us"


def cluster_int(result: Result, key: str, default: int | None = None) -> int:
    """A count from ``Result.cluster`` (``default`` if given and the key is absent).

    ``Result.cluster`` mixes counts with the one list ``nodes_per_level``; asking for a list here is a bug.
    """
    value = result.cluster[key] if default is None else result.cluster.get(key, default)
    if isinstance(value, list):
        raise TypeError(f"Result.cluster[{key!r}] is a list, not a count: {value!r}")
    return int(value)


def _headline(s: Scenario, params: int, nnz: int) -> str:
    """The first line of a plan's or a result's summary: cluster, model, parameters, batch."""
    hw, tr = s.hardware, s.training
    sparsity = 1 - nnz / params if params else 0.0
    seq = f" x {s.seq_len} tokens" if s.workload.model.input != "features" else ""
    return (
        # Names are the user's: cut to one short line (wss.errors.shorten), as error messages cut them.
        f"{shorten(s.name)}: {hw.wafers} x {shorten(hw.wafer.name)}, {shorten(s.workload.model.name)} "
        f"({si(params)} params, "
        f"{sparsity:.0%} sparse), batch {tr.global_batch}{seq}, {tr.optimizer}"
    )


def _limits_line(hw: HardwareConfig) -> list[str]:
    """One line when the scenario sets hardware.allow_beyond_published_limits, none otherwise."""
    if not hw.allow_beyond_published_limits:
        return []
    return [
        f"  what-if      hardware.allow_beyond_published_limits: {hw.wafers} x {shorten(hw.wafer.name)} is not "
        "held to "
        "the largest published cluster"
    ]


#: How the summary names MemoryX's state components.
_COMPONENT_NAMES = {"weights": "weights", "gradient": "gradient accumulators", "moments": "optimizer moments"}


def _placement_lines(components: dict[str, dict[str, float]], label: str) -> list[str]:
    """Which state components live in flash, when any does (DRAM is filled hottest first); ``label`` comes
    padded to the caller's column."""
    in_flash = [(c, v.get("flash", 0.0)) for c, v in components.items() if v.get("flash", 0.0) > 0]
    if not in_flash:
        return []
    parts = ", ".join(f"{_COMPONENT_NAMES.get(c, c)} {fmt_bytes(b)}" for c, b in in_flash)
    return [f"  {label}{parts}"]


def _store_rate(s: Scenario) -> str:
    """Where offloaded block inputs go and at what rate (``hardware.activation_store``), in words; MemoryX's
    network at the rate the run has it (:func:`~wss.model.machine.memoryx_rates.memoryx_rates`, a slow shard's)."""
    hw = s.hardware
    store = hw.activation_store
    if store.location == "memoryx":
        return (f"to MemoryX: its network, {si(memoryx_rates(s).network_Bps, 'B/s')} each way for all "
                f"{hw.wafers} wafers, shared with the weight stream and gradients, and its DRAM")
    edge = f"the wafer's edge ({si(edge_Bps(hw), 'B/s')}, shared " \
           "with weights and gradients)"
    if store.bandwidth_Bps is None:
        return f"to each wafer's hosts, as fast as {edge}: the store's own rate is not limited (an assumption)"
    return f"to each wafer's hosts at {si(store.bandwidth_Bps, 'B/s')} both ways together, through {edge}"


def _offload_lines(s: Scenario, per_micro_batch: float, room: float | None, label: str) -> list[str]:
    """With offload: where block inputs go, at what rate, and their size against the store's room."""
    hw = s.hardware
    held = f"{fmt_bytes(per_micro_batch)} per wafer per micro-batch"
    if room is not None:
        held += f" in {fmt_bytes(room)} of room" + (" (all wafers')" if hw.activation_store.location == "memoryx"
                                                    else " per wafer")
    return [f"  {label}block inputs {_store_rate(s)}; {held}"]


def format_plan(plan: Plan) -> str:
    s = plan.scenario
    lines = [_headline(s, plan.params, plan.nnz), *_limits_line(s.hardware)]
    lines.append(
        f"  MemoryX     {fmt_bytes(plan.memoryx_state_bytes)} of {fmt_bytes(s.hardware.memoryx.capacity_bytes)} "
        f"(DRAM {fmt_bytes(plan.memoryx_dram_bytes)}, flash {fmt_bytes(plan.memoryx_flash_bytes)})"
    )
    lines.extend(_placement_lines(plan.memoryx_components, f"{'in flash':<12}"))
    lines.append(
        f"  wafer SRAM  {fmt_bytes(plan.sram_bytes_needed)} of {fmt_bytes(plan.sram_bytes_available)} for activations "
        f"(micro-batch {max(plan.micro_batches)} x {len(plan.micro_batches)}, checkpointing {plan.checkpointing})"
    )
    if plan.choice is not None:
        lines.append(f"  plan        {plan.choice.line()}")
    if plan.checkpointing == "offload":
        one, _ = offload_bytes(s, plan.ops, plan.wafer_samples, plan.micro_batches)
        mx = s.hardware.memoryx
        room = (s.hardware.activation_store.capacity_bytes if s.hardware.activation_store.location == "host"
                else max(0.0, mx.dram_total_bytes - plan.memoryx_dram_bytes - plan.staging_bytes))
        lines.extend(_offload_lines(s, one, room, f"{'offload':<12}"))
    lines.append(
        f"  SwarmX      {plan.tree_levels} levels, nodes per level {plan.nodes_per_level}; "
        f"{len(plan.kernels)} streamed kernels, {sum(k.n_chunks for k in plan.kernels)} chunks per pass set"
    )
    hw = s.hardware
    lines.append(f"  edges       {describe_edges(hw.swarmx.edge_names(hw.wafers))} (names for faults.links)")
    lines.append(f"  nodes       {describe_edges(hw.swarmx.node_names(hw.wafers))} (names for faults.nodes)")
    indexes = f"0-{hw.wafers - 1}" if hw.wafers > 1 else "0"
    shards = hw.memoryx.shards
    lines.append(f"  wafers      {indexes} (indexes for faults.stragglers and faults.events); MemoryX shards "
                 f"{f'0-{shards - 1}' if shards > 1 else '0'} (for faults.shards); storage presets for "
                 f"faults.failures.storage: {', '.join(list_presets().get('storage', []))}")
    if s.faults.any:
        lines.append(f"  faults      {s.faults.describe()}")
    return "\n".join(lines)


def _overrides_line(overrides: Sequence[str]) -> list[str]:
    """One line naming the ``--set`` overrides, when there are any: the name in the headline is the file's."""
    if not overrides:
        return []
    shown = ", ".join(shorten("=".join(part.strip() for part in o.partition("=")[::2])) for o in overrides)
    return [f"  overrides    {shown} (--set on top of the scenario file; the line above includes them)"]


def _wafers_lines(r: Result) -> list[str]:
    """Whether one wafer stood for all or each ran apart, why, and (apart) the spread of their idle time."""
    f = r.wafer_folding
    if f.folded:
        return [f"  wafers       one stands for all ({f.reason})"]
    lines = [f"  wafers       each ran apart ({f.reason})"]
    if r.wafers:
        most = max(r.wafers, key=lambda w: (w.idle_s, -w.wafer))
        least = min(r.wafers, key=lambda w: (w.idle_s, w.wafer))
        lines.append(f"               idle per step {fmt_time(least.idle_s)} (wafer {least.wafer}) to "
                     f"{fmt_time(most.idle_s)} (wafer {most.wafer}, {most.samples} samples)")
    if r.step_pacers:
        counts: dict[str, int] = {}
        for p in r.step_pacers:
            counts[p.part] = counts.get(p.part, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{part} {n}" for part, n in ranked[:4])
        more = f" and {len(ranked) - 4} more" if len(ranked) > 4 else ""
        lines.append(f"               paced by (steps) {shown}{more} of {len(r.step_pacers)}")
    return lines


def fmt_duration(t: float) -> str:
    """Seconds, or minutes, hours and days for long spans: '4.32 days'."""
    for unit, scale in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if t >= 2 * scale:
            return f"{t / scale:.3g} {unit}"
    return fmt_time(t)


def _failures_lines(r: Result) -> list[str]:
    """Goodput, the checkpoint interval and what the scripted failures cost (faults.failures)."""
    f = r.failures
    if f is None:
        return []
    why = "auto" if f.chosen_by == "auto" else "faults.failures.checkpoint_every_steps"
    young = f", Young/Daly {f.young_daly_steps:,.0f}" if f.young_daly_steps is not None else ""
    mtbf = ", no random failures"
    if f.cluster_mtbf_s is not None:
        mtbf = f", cluster MTBF {fmt_duration(f.cluster_mtbf_s)}"
    fixed = f" ({fmt_duration(f.checkpoint_fixed_s)} of it fixed)" if f.checkpoint_fixed_s else ""
    lines = [f"  goodput      {f.goodput:.2%} with a checkpoint every {f.checkpoint_every_steps:,} steps "
             f"({why}{young}); checkpoint {fmt_bytes(f.checkpoint_bytes)} in {fmt_duration(f.checkpoint_s)}{fixed}, "
             f"restart {fmt_duration(f.restart_s)}{mtbf}"]
    train = ""
    if f.expected_time_to_train_s is not None:
        train = f"; to train {f.train_steps:,} steps {fmt_duration(f.expected_time_to_train_s)}"
    lines.append(f"               expected {fmt_time(f.expected_s_per_step)} per step{train}")
    startup = sum(f.startup_s.values())
    if startup:
        lines.append(f"  job          {fmt_duration(startup)} before the first step ({f.job}): "
                     + ", ".join(f"{k} {fmt_duration(v)}" for k, v in f.startup_s.items() if v))
    for span in f.timeline:
        if span.kind == "restart":
            n = span.lost_steps
            lines.append(f"  failure      wafer {span.wafer} at the end of step {span.step}: restart "
                         f"{fmt_duration(span.end_s - span.start_s)}, {n} step{'s' if n != 1 else ''} run again")
    if any(x.kind == "restart" for x in f.timeline):
        lines.append(f"               the {len(r.steps)} steps took {fmt_duration(f.run_time_s)} with checkpoints "
                     f"and failures ({fmt_duration(r.total_time_s)} without)")
    return lines


def format_result(r: Result, overrides: Sequence[str] = ()) -> str:
    from wss.model.result.results import BREAKDOWN_CATEGORIES

    s = r.scenario
    params = cluster_int(r, "params")
    nnz = cluster_int(r, "nonzero_params")
    n = len(r.steps)
    lines = [_headline(s, params, nnz), *_overrides_line(overrides), *_limits_line(s.hardware)]
    if s.faults.any:  # every active fault, including those that do not set a wafer apart (a slow shard, flash tails)
        lines.append(f"  faults       {s.faults.describe()}")
    lines.append(f"  step time    {fmt_time(r.step_time_s)}  (mean of {n} step{'s' if n > 1 else ''})")
    thr = f"  throughput   {r.samples_per_s:,.4g} samples/s"
    if s.workload.model.input != "features":
        thr += f", {r.tokens_per_s:,.4g} tokens/s"
    lines.append(thr)
    f = r.flops
    lines.append(
        f"  FLOP/s       {si(f.achieved_executed_flops, 'FLOP/s')} executed = {f.fraction_of_peak:.1%} of "
        f"{si(f.peak_flops, 'FLOP/s')} peak; {si(f.achieved_dense_equivalent_flops, 'FLOP/s')} dense-equivalent "
        f"({f.dense_equivalent_fraction_of_peak:.1%} of peak)"
    )
    paces = r.pacing_s[r.bound_by] / r.step_time_s if r.step_time_s > 0 else 0.0
    lines.append(f"  bound by     {r.bound_by} (paces {paces:.0%} of the step)")
    lines += _inputs_lines(r)
    lines.append("  where the time went (per step):")
    for c in BREAKDOWN_CATEGORIES:
        v = r.breakdown_s[c]
        if v > 0:
            lines.append(f"    {c:<10} {fmt_time(v):>12}  {v / r.step_time_s:6.1%}")
    m = r.memory
    lines.append(
        f"  memory       MemoryX {fmt_bytes(m.memoryx_state_bytes)} (DRAM {fmt_bytes(m.memoryx_dram_bytes)}, "
        f"flash {fmt_bytes(m.memoryx_flash_bytes)}); wafer SRAM {fmt_bytes(m.wafer_sram_activation_bytes)} of "
        f"{fmt_bytes(m.wafer_sram_available_bytes)} (micro-batch {m.micro_batch} x {m.micro_batches}, "
        f"checkpointing {m.activation_checkpointing})"
    )
    lines.extend(_placement_lines(m.memoryx_components, f"{'in flash':<13}"))
    if r.plan_choice is not None:
        lines.append(f"  plan         {r.plan_choice.line()}")
    if m.activation_checkpointing == "offload":
        lines.extend(_offload_result_lines(r))
    lines += _wafers_lines(r)
    lines += _failures_lines(r)
    busiest = sorted(r.utilisation.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    lines.append("  busiest      " + ", ".join(f"{k} {v:.0%}" for k, v in busiest))
    wafer_in = next((v for k, v in r.link_bytes.items() if k.endswith("->wafer") and k.startswith("swarmx")), None)
    if wafer_in is not None:
        lines.append(
            f"  per wafer    {fmt_bytes(wafer_in.per_link_bytes)} weights in per step "
            f"({r.weight_crossings_per_micro_batch:.3g} crossings per micro-batch)"
        )
    if r.energy is not None:
        e = r.energy
        per, joules = ("token", e.per_token_J) if s.workload.model.input != "features" else ("sample", e.per_sample_J)
        lines.append(
            f"  energy       {si(e.per_step_J, 'J')} per step, {si(joules, 'J')} per {per}; "
            f"average power {si(e.average_power_W, 'W')} (docs/model.md, \"Energy\")"
        )
    if r.numerics is not None and r.numerics.losses:
        ls, acc = r.numerics.losses, r.numerics.accuracies
        line = f"  loss         {_num(ls[0], '.4g')} -> {_num(ls[-1], '.4g')} over {len(ls)} steps"
        if acc:
            line += f"; accuracy {_num(acc[0], '.1%')} -> {_num(acc[-1], '.1%')}"
        if None in ls:
            line += f"; diverged: loss not finite from step {ls.index(None)}"
        lines.append(line)
    return "\n".join(lines)


def input_rate_words(s: Scenario) -> str:
    """What sets the rate of one wafer's input, in words: its input workers' preparation (kind, cost, processes:
    :func:`~wss.model.machine.input_rate.preparation`), or moving its bytes when nothing limits preparation."""
    prep = preparation(s)
    if prep is None:
        return (f"the input workers move its bytes at {si(s.hardware.inputs.bandwidth_Bps, 'B/s')} "
                "(hardware.inputs.bandwidth_Bps; preparing samples is free: no hardware.input_pipeline)")
    if prep.capped:
        return f"the input workers prepare {prep.samples_per_s:,.4g} samples/s (hardware.inputs.samples_per_s)"
    pipe = s.hardware.input_pipeline
    workers = f"{pipe.workers_per_wafer} input worker{'s' if pipe.workers_per_wafer > 1 else ''}"
    how = (f"{workers} x {pipe.num_workers} data-loader processes" if pipe.num_workers else
           f"{workers}, {'each ' if pipe.workers_per_wafer > 1 else ''}preparing in its main process (num_workers 0)")
    processes = f"{prep.processes} process{'es' if prep.processes > 1 else ''}"
    return (f"the input workers prepare {prep.samples_per_s:,.4g} samples/s ({prep.kind}: {fmt_time(prep.sample_s)} "
            f"a sample in {processes}: {how})")


def _inputs_lines(r: Result) -> list[str]:
    """When the input paces the step: why, in words (the wafer's waits for input data)."""
    if r.bound_by != "input" or r.step_time_s <= 0:
        return []
    share = r.breakdown_s["input"] / r.step_time_s
    return [f"  input-bound  the wafer waits {share:.0%} of the step for its input: {input_rate_words(r.scenario)}"]


def _offload_result_lines(r: Result) -> list[str]:
    """Where block inputs went, at what rate, how many bytes a wafer sent back per step and how busy the store was."""
    back = r.link_bytes.get("activations->wafer")
    line = f"  offload      block inputs {_store_rate(r.scenario)}"
    if back is not None:
        line += f"; {fmt_bytes(back.per_link_bytes)} per wafer per step each way"
    if "activations.store" in r.utilisation:
        line += f"; store {r.utilisation['activations.store']:.0%} busy with them"
    return [line]


def _num(value: float | None, spec: str) -> str:
    """A number, or ``nan`` where the Result holds None (a non-finite value)."""
    return "nan" if value is None else format(value, spec)
