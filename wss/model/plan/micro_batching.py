"""Step 2: the global batch across wafers, and each wafer's share in micro-batches that fit activation SRAM.

A wafer keeps the activations of a micro-batch in SRAM between its forward and
backward pass.  This step lists the candidates that fit: each allowed
checkpointing mode (``'none'`` keeps everything, ``'blocks'`` keeps only
transformer-block inputs and recomputes, ``'offload'`` sends those inputs off the
wafer and keeps two) times each micro-batch count, the
busiest wafer's samples cut as evenly as possible (:func:`split_evenly`).
:mod:`~wss.model.plan.search` ranks them; :func:`plan_micro_batching` then
records the chosen one and picks the micro-batches the SimPy run executes when
identical ones are folded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from wss.model.plan.activation_sram import ActivationPeak, activation_bytes_per_element, activation_peak
from wss.model.plan.formats import WeightStream
from wss.model.plan.problems import fmt_bytes, infeasible
from wss.model.scenario import Scenario
from wss.model.workload import Op, StreamedKernel

__all__ = [
    "FOLD_MIN_COPIES",
    "FOLDED_PREFIX",
    "Candidate",
    "MicroBatching",
    "retained_weight_bytes",
    "plan_micro_batching",
    "micro_batch_candidates",
    "split_evenly",
    "split_under",
    "wafer_splits",
    "uneven_slots",
    "simulated_micro_batches",
    "simulated_steps",
]

#: Fold only when it removes at least this many micro-batches per step.
FOLD_MIN_COPIES = 2
#: Micro-batches simulated when folding: 0 and 1 settle after the iteration boundary, 2 and 3 are
#: compared to prove the period, the last one carries the update.
FOLDED_PREFIX = 4


@dataclass(frozen=True)
class MicroBatching:
    """How the busiest wafer's samples of one step are cut into micro-batches, and the SRAM that takes.

    The plan copies these fields; the kernel step costs each distinct micro-batch size
    (:attr:`token_counts`) once.

    Attributes
    ----------
    checkpointing
        ``'none'``, ``'blocks'`` or ``'offload'``: the mode chosen or asked for.
    micro_batches
        Samples per micro-batch on the busiest wafer, as even as possible (:func:`split_evenly`).
    simulated
        Indices of the micro-batches the SimPy run executes (all of them unless folded).
    uneven
        The micro-batches whose blocks the fallback ladder simulates in full when their fold fails its
        check (:mod:`wss.model.folding.ladder`): those in which the wafers apart (unfolded) have
        micro-batches of different sizes (:func:`uneven_slots`), and with more than one step and the
        first of them uneven, the last too (the first's forward passes wait for the updates the last makes).
    tokens_per_sample
        Tokens of one sample.
    sram_bytes_needed
        Activation SRAM the largest micro-batch needs (retained output-layer weights included).
    sram_bytes_available
        Activation SRAM of one wafer.
    """

    checkpointing: str
    micro_batches: list[int]
    simulated: list[int]
    tokens_per_sample: int
    sram_bytes_needed: float
    sram_bytes_available: float
    uneven: frozenset[int] = frozenset()

    @property
    def token_counts(self) -> list[int]:
        """The distinct token counts of the micro-batches, ascending."""
        return sorted({m * self.tokens_per_sample for m in self.micro_batches})


def retained_weight_bytes(scenario: Scenario, kernels: list[StreamedKernel], streams: list[WeightStream]) -> float:
    """SRAM the output layer's streamed weights take when ``training.retain_output_layer`` keeps them on the wafer."""
    retained = 0.0
    if scenario.training.retain_output_layer:
        retained = sum(st.stream_bytes for k, st in zip(kernels, streams) if k.is_output)
    return retained


@dataclass(frozen=True)
class Candidate:
    """One way to run the busiest wafer's samples: a checkpointing mode and a split into micro-batches.

    Attributes
    ----------
    checkpointing
        ``'none'``, ``'blocks'`` or ``'offload'``.
    micro_batches
        Samples per micro-batch, as even as possible (sizes differ by at most one), in run order
        (:func:`split_evenly`).
    sram_bytes_needed
        Activation SRAM the largest micro-batch needs (retained output-layer weights included).
    """

    checkpointing: str
    micro_batches: tuple[int, ...]
    sram_bytes_needed: float

    @property
    def largest(self) -> int:
        """Samples in the largest micro-batch (what ``training.micro_batch`` asks for to force this split)."""
        return max(self.micro_batches)

    def describe(self) -> str:
        """``'blocks x 5 of 13'`` or ``'none x 5 of 13-12'``: the mode, the count and the sizes."""
        sizes = sorted(set(self.micro_batches), reverse=True)
        return f"{self.checkpointing} x {len(self.micro_batches)} of {'-'.join(str(m) for m in sizes)}"


def plan_micro_batching(scenario: Scenario, chosen: Candidate, fold: bool) -> MicroBatching:
    """The micro-batching of the chosen candidate, with the micro-batches the SimPy run executes.

    Parameters
    ----------
    scenario
        The scenario (the wafer's SRAM, the folding switch).
    chosen
        The candidate chosen by :mod:`~wss.model.plan.search` (or the only one allowed).
    fold
        Allow folding (``simulation.fold_micro_batches`` must also be on).

    With the wafers apart (unfolded), every wafer's split counts: the copies of a folded micro-batch
    stand for that slot on every wafer, so they lie where every wafer's micro-batches repeat.
    """
    from wss.model.scenario.fold_rules import folds_wafers  # lazy: fold_rules imports the scenario package
    from wss.model.scenario.shards import shard_samples

    sizes = list(chosen.micro_batches)
    splits = [sizes] if folds_wafers(scenario) else wafer_splits(shard_samples(scenario), sizes)
    uneven = uneven_slots(splits)
    if 0 in uneven and scenario.training.steps > 1:
        uneven |= {len(sizes) - 1}  # every block's update of a step is waited for by the next's first micro-batch
    return MicroBatching(
        checkpointing=chosen.checkpointing,
        micro_batches=sizes,
        simulated=simulated_micro_batches(sizes, fold and scenario.simulation.fold_micro_batches, splits),
        uneven=uneven,
        tokens_per_sample=scenario.seq_len,
        sram_bytes_needed=chosen.sram_bytes_needed,
        sram_bytes_available=scenario.hardware.wafer.activation_sram_bytes,
    )


def split_evenly(samples: int, n: int) -> list[int]:
    """``samples`` cut into ``n`` micro-batches whose sizes differ by at most one.

    The more numerous size comes first (the larger on a tie) so that the longest possible run of
    identical micro-batches starts the step: folding repeats micro-batch 3 over that run and
    simulates the rest (:func:`simulated_micro_batches`).  65 in 5 is 13 x 5; 64 in 5 is
    13, 13, 13, 13, 12; 61 in 5 is 12, 12, 12, 12, 13.
    """
    q, r = divmod(samples, n)
    if r == 0:
        return [q] * n
    larger, smaller = [q + 1] * r, [q] * (n - r)
    return larger + smaller if r >= n - r else smaller + larger


def split_under(samples: int, busiest: Sequence[int]) -> list[int]:
    """A smaller shard of ``samples`` cut into the busiest wafer's number of micro-batches, lined up under its
    split ``busiest``: no micro-batch larger than the busiest wafer's in the same slot.

    The wafers run in lock-step (every pass's weights are broadcast to all of them, every gradient sum waits
    for all), so each slot takes as long as its largest micro-batch: the busiest wafer paces the cluster
    only if no other wafer is larger in any slot.  Each slot gets ``samples // n``, and the ``samples % n``
    left over go to the slots where the busiest wafer's micro-batches are largest (the earliest on a tie).
    With the same quotient as the busiest, the smaller shard has no more larger micro-batches than it, so
    they all land in its larger slots; with a smaller quotient, its largest is at most the busiest's smallest.
    """
    n = len(busiest)
    q, r = divmod(samples, n)
    larger = sorted(range(n), key=lambda i: (-busiest[i], i))[:r]
    out = [q] * n
    for i in larger:
        out[i] += 1
    return out


def wafer_splits(samples: Sequence[int], busiest: Sequence[int]) -> list[list[int]]:
    """Each distinct split of the wafers' shards ``samples`` (the busiest's first), every smaller shard lined up
    under the busiest's split ``busiest`` (:func:`split_under`): the micro-batches each class of wafers runs."""
    top = max(samples)
    smaller = sorted({n for n in samples if n} - {top}, reverse=True)  # a wafer cut off (0 samples) runs nothing
    return [list(busiest), *(split_under(n, busiest) for n in smaller)]


def uneven_slots(splits: Sequence[Sequence[int]]) -> frozenset[int]:
    """The micro-batch slots in which the wafers' splits differ: some wafers compute fewer samples there than
    others, run ahead and wait.

    The wafers run in lock-step, so in such a slot the smaller micro-batches finish each block early and
    drift ahead of the largest until a buffer binds (a weight or an offloaded-activation intake filling up);
    that transient lasts tens of blocks (GPT-3 175B on 17 wafers: about 60 blocks of the backward passes before
    the last wafer's activation intake is full), often longer than layer folding's settling: when blocks folded
    in such a slot fail their check, every block of these slots is simulated (:mod:`wss.model.folding.ladder`).
    """
    if not splits:
        return frozenset()
    return frozenset(i for i in range(len(splits[0])) if len({split[i] for split in splits}) > 1)


def micro_batch_candidates(scenario: Scenario, ops: list[Op], retained: float, busiest: int) -> list[Candidate]:
    """Every allowed (checkpointing, micro-batches) pair for the busiest wafer, in a fixed order.

    Modes: ``'none'``, ``'blocks'`` and ``'offload'`` for ``'auto'`` (the last two only when the
    model has blocks), else the one asked for.  Splits: for ``micro_batch: auto``, every largest size ``m``
    from 1 to what fits SRAM, each as the fewest micro-batches of at most ``m`` (``ceil(B / m)``),
    cut evenly; a split with more micro-batches and the same largest size only streams the weights
    more often.  An explicit ``micro_batch`` is that largest size.

    Raises
    ------
    InfeasibleError
        One sample does not fit in any allowed mode, or the micro-batch asked for fits none.
    """
    tr = scenario.training
    seq = scenario.seq_len
    act_b = activation_bytes_per_element(scenario)
    available = scenario.hardware.wafer.activation_sram_bytes
    has_blocks = any(op.block is not None for op in ops)
    modes = ["none", "blocks", "offload"] if tr.activation_checkpointing == "auto" else [tr.activation_checkpointing]
    modes = [m for m in modes if m == "none" or has_blocks] or ["none"]
    out: list[Candidate] = []
    fits: dict[str, tuple[ActivationPeak, int]] = {}
    for mode in modes:
        peak = activation_peak(ops, mode)
        per_token = peak.elements_per_token * act_b
        max_mb = min(busiest, int((available - retained) // (per_token * seq)))
        fits[mode] = (peak, max_mb)
        sizes = range(1, max_mb + 1) if tr.micro_batch == "auto" else [min(tr.micro_batch, busiest)]
        counts = sorted({math.ceil(busiest / m) for m in sizes if m <= max_mb})
        for n in counts:
            split = split_evenly(busiest, n)
            out.append(Candidate(mode, tuple(split), per_token * seq * max(split) + retained))
    if not out:
        mode = min(modes, key=lambda m: fits[m][0].elements_per_token)  # the mode that comes closest
        raise _does_not_fit(scenario, mode, fits[mode], retained, busiest)
    return out


def _does_not_fit(scenario: Scenario, mode: str, fit: tuple[ActivationPeak, int], retained: float,
                  busiest: int) -> Exception:
    """The error for a scenario with no candidate: one sample, or the micro-batch asked for, does not fit
    (in ``mode``, the allowed mode that needs the least)."""
    peak, max_mb = fit
    seq = scenario.seq_len
    per_token = peak.elements_per_token * activation_bytes_per_element(scenario)
    wafer = scenario.hardware.wafer
    available = wafer.activation_sram_bytes
    asked = scenario.training.micro_batch
    reserved = f"({wafer.name}: {fmt_bytes(wafer.sram_bytes)} less {wafer.sram_reserved_fraction:.0%} reserved)"
    at = f"checkpointing '{mode}', at its peak in {peak.where}"
    if max_mb >= 1 and asked != "auto":
        mb = min(asked, busiest)
        return infeasible(
            scenario,
            "training.micro_batch",
            f"a micro-batch of {mb} samples needs {fmt_bytes(per_token * seq * mb + retained)} of "
            f"wafer SRAM for activations ({at}) but {fmt_bytes(available)} is available {reserved}; "
            f"at most {max_mb} fit",
        )
    return infeasible(
        scenario,
        "training.micro_batch",
        f"activations of one sample need {fmt_bytes(per_token * seq + retained)} of wafer SRAM "
        f"({at}) but {fmt_bytes(available)} is available {reserved}",
    )


def simulated_micro_batches(sizes: list[int], fold: bool, splits: Sequence[Sequence[int]] = ()) -> list[int]:
    """Indices of the micro-batches the SimPy run executes.

    All of them, unless folding is on and removes at least :data:`FOLD_MIN_COPIES`: then the first
    :data:`FOLDED_PREFIX`, and every micro-batch from the end of the leading run of identical
    sizes on (always the last, which carries the update).  The folded copies between repeat
    micro-batch 3, so they must be the size of micro-batch 3: with an even split
    (:func:`split_evenly`) the leading run is the more numerous size.  With the wafers apart, ``splits``
    holds every class's split (:func:`wafer_splits`): the leading run ends at the first slot where any
    class's micro-batch differs from its own first, so every wafer repeats its micro-batch 3 over the copies.
    """
    n = len(sizes)
    lined_up = [sizes, *splits]
    run = next((i for i in range(n) if any(split[i] != split[0] for split in lined_up)), n)
    tail = min(run, n - 1)
    if fold and tail - FOLDED_PREFIX >= FOLD_MIN_COPIES:
        return list(range(FOLDED_PREFIX)) + list(range(tail, n))
    return list(range(n))


def simulated_steps(scenario: Scenario, fold: bool) -> int:
    """How many steps the SimPy run executes: all, or the first :data:`FOLDED_PREFIX` and the last.

    Steps repeat as micro-batches do: after the first update the run settles, so with folding on
    (``simulation.fold_micro_batches``) and at least :data:`FOLD_MIN_COPIES` steps to remove, the run
    simulates steps 0-3 and the last, and :mod:`wss.model.folding.step_fold` stands in for the ones between.
    Runs that train for real (``numerics.enabled``) simulate every step: their losses are real, and
    each step's timing then comes from its own simulation.
    """
    steps = scenario.training.steps
    allowed = fold and scenario.simulation.fold_micro_batches and not scenario.numerics.enabled
    return FOLDED_PREFIX + 1 if allowed and steps - 1 - FOLDED_PREFIX >= FOLD_MIN_COPIES else steps
