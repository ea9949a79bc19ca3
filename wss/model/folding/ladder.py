"""The fallback ladder: run a plan folded as far as it may be, and fold less each time a fold fails its check.

Every fold is checked, not assumed (:mod:`~wss.model.folding.fold`, :mod:`~wss.model.folding.step_fold`,
:mod:`~wss.model.folding.layer_fold`).  When a check fails the run is simulated again, folded less:

0. where a forward fold fails in a step after the first, more blocks are simulated at the start of each run of
   identical ones (:func:`_led_longer`; the end keeps its stretch), while that simulates at most half the run:
   two past where the failed check's falling queued counts would empty at the pace they fell, or twice as many
   where that guess is shorter or missing, and again.  With global-norm clipping a step's updates start only
   after its last gradient and run into the next step's first forward pass, whose blocks repeat only once that
   backlog has drained (GPT-3 175B on 192 wafers: 343 jobs queued, then 329, so about 24 blocks more; it folds
   with 30 simulated at the start);
1. in a cluster of wafers simulated apart (a straggler, a slow edge), blocks that do not repeat outside the
   uneven slots are simulated further at the end whose fold failed (the low end for the forward passes, the high
   end for the backward ones): one block further where the failed fold had settled late (its second compared
   block already repeated), else half as far again, while the two ends simulate at most half the run
   (:func:`_settled_longer`): wafers that differ fill the buffers between them over more blocks than the four the
   first run simulates (GPT-3 175B on 192 wafers with one 1.1x straggler: the forward passes settle by the seventh
   block, tried after four and six; the backward passes by the fourth from the end).  In a run of one simulated
   step the blocks added at the low end are simulated in the forward passes only: the backward passes reach them
   after their copies and keep four there (the straggler: 97,988 events instead of 120,611).  A try whose other
   wafers do not repeat stops at that fold point, as the representative's check does.  In a folded cluster, both
   ends half
   as far again, while they simulate at most a quarter of the run, where the run settled late (the second compared
   block started from the queues found after the copies, the first did not): GPT-3 175B's tree of SwarmX inboxes,
   filling from the start of the stream, settles at its fourth forward block once lanes shorten each block's
   compute, one block after the first compared one;
2. with uneven shards, blocks that do not repeat (``LayerFoldMismatch``) while they fold in every micro-batch
   are simulated in full in the slots where the wafers' micro-batches differ (the plan's ``uneven_slots``),
   when the failed fold lay in one of them: there a wafer with fewer samples drifts ahead of the largest, and a
   drift fold (:mod:`wss.model.folding.drift`) stands for its blocks unless its checks refuse (its lead runs out
   over the copies: GPT-3 175B on 9 wafers).  Where the lead runs out early (the mismatch ``settles``), rung 1
   first simulates a longer stretch, past which the wafers are back in step (Cerebras-GPT 13B on 64 wafers);
3. blocks that do not repeat in one direction fold in the other only, in a run of one simulated step;
4. else, after a failed layer fold, no blocks fold (micro-batches and steps still do);
5. then steps unfold (micro-batches still fold);
6. then nothing folds.

Each rung after the first two starts again from the plan with four blocks at each end.

The ladder knows plans and runs, not parts: ``run`` simulates a plan and returns whatever the caller's cluster
is, so the simulator's entry point reads plan, run, measure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from wss.model.folding.fold import FoldMismatch
from wss.model.folding.layer_fold import LayerFoldMismatch
from wss.model.plan import Plan, make_plan
from wss.model.plan.layer_runs import BlockRun
from wss.model.scenario import Scenario
from wss.model.scenario.fold_rules import fold_decision

__all__ = ["run_folded"]

#: Which folds failed and what the run does instead (``wss -v``).
log = logging.getLogger(__name__)

R = TypeVar("R")


def run_folded(s: Scenario, profiles: Any, p: Plan, run: Callable[[Plan], R]) -> R:
    """``run(p)``; if a fold fails its check, ``run`` again on a plan folded less (the module's ladder)."""
    try:
        return _run_settled(s, p, run)
    except FoldMismatch as exc:
        log.info("%s: the fold's check failed (%s): simulating again with less folded", s.name, exc)
        return _run_less_folded(s, profiles, p, run, isinstance(exc, LayerFoldMismatch))


def _run_settled(s: Scenario, p: Plan, run: Callable[[Plan], R]) -> R:
    """Run the plan; if its blocks do not repeat, again with a longer stretch simulated: at the start of each run
    where a later step's forward passes repeat only once the update backlog drains (:func:`_led_longer`), at each
    end in a cluster of wafers simulated apart (:func:`_settled_longer`), as long as that may fold; then the rungs
    of :func:`_run_layers_folded`, from the plan as it was."""
    try:
        return run(p)
    except LayerFoldMismatch as exc:
        first = exc
    # A fold that failed in an uneven slot goes to the rungs below as it did: there a smaller shard starts every
    # block earlier than the last by the same amount until the buffers stop it, and a drift fold stands for that
    # where it can (wss/model/folding/drift.py); trying a longer stretch would only cost runs, except where the
    # smaller shards' lead ran out within the stretch or over the copies (``settles``): a longer one may see them
    # back in step with the largest.  A wait reaching across copies (no micro-batch) does not settle either.
    longer = _led_longer(p, first)
    if longer is None and first.micro_batch is not None and (first.micro_batch not in p.uneven_slots
                                                             or first.settles):
        longer = _settled_longer(s, p, first)
    failed = first
    while longer is not None:
        log.info("%s: blocks do not repeat (%s): simulating %d blocks at the start and %d at the end of each run of "
                 "identical ones", s.name, failed, max(r.head for r in longer.layer_runs),
                 max(r.settle for r in longer.layer_runs))
        try:
            return run(longer)
        except LayerFoldMismatch as exc:
            failed, longer = exc, _led_longer(longer, exc) or (
                None if exc.micro_batch in longer.uneven_slots and not exc.settles else _settled_longer(s, longer, exc))
    return _fold_fewer_layers(s, p, run, first)


def _settled_longer(s: Scenario, p: Plan, exc: LayerFoldMismatch) -> Plan | None:
    """The plan with each run of identical blocks simulated longer where its blocks failed to repeat (``exc``), where
    that still leaves enough of the run to fold (:func:`_affordable`); None where no run may, or where the wafers are
    folded and the run did not settle late.

    Wafers simulated apart settle later than the first blocks: there a wafer that differs fills the buffers
    between it and the others over several blocks before they go in step.  In a folded cluster the blocks that do
    not repeat are mostly those where a part falls further behind with every block (brain-120T's optimizer in the
    backward passes, without clipping), which no number of blocks settles: there the queues after the copies
    differ from the second compared block's too, and trying would only cost runs.  Where they do not
    (``exc.settled_late``), the run settled within the stretch, only later than its first compared block.

    A folded cluster simulates both ends half as far again.  Wafers apart lengthen only the end whose fold failed
    (:func:`_stretched`): the forward passes settle at the low end, the backward passes at the high end, and each
    settles on its own (GPT-3 175B on 192 wafers with one 1.1x straggler: the forward passes by the seventh block,
    the backward by the fourth from the end).

    A folded cluster's forward passes of the first step whose blocks started from other queues (``exc.queued``) are
    the start of the stream settling, which stops: buffers filling until full (``exc.fills``: block inputs leaving
    for an activation store slower than the wafer makes them pile up in the wafer's edge until the wafer waits for
    them), or such a store's backlog running down once the wafer waits for it.  They lengthen the low end as wafers
    apart do (Cerebras-GPT 13B with the activation servers' 25 GB/s store: on 16 wafers the forward passes repeat
    from the ninth block; on 9, 15, 18 and 30, where the store's backlog falls from the first blocks to the next,
    from the fifth, where they folded in the backward passes only before: 9 wafers 42,036 events instead of
    97,092).  The tries stop where the stretch would simulate more than half the run (:func:`_affordable`)."""
    folded = fold_decision(s)[0]
    settling = folded and exc.queued and exc.direction == "forward" and not exc.step
    if not p.layer_runs or (folded and not exc.settled_late and not settling):
        return None
    as_apart = not folded or settling
    runs = tuple(_stretched(r, exc.direction if as_apart else "", exc.settled_late, p.simulated_steps == 1)
                 for r in p.layer_runs)
    runs = tuple(q if _affordable(q, not as_apart) else r for q, r in zip(runs, p.layer_runs))
    return replace(p, layer_runs=runs) if runs != p.layer_runs else None


def _affordable(r: BlockRun, folded: bool) -> bool:
    """May run ``r`` be tried?  Folded: where its two ends simulate at most a quarter of it (a try that fails runs
    to its end's check).  Wafers apart: where its head and its end simulate at most half of it, as a longer head
    may (:func:`_led_longer`): a try that fails stops at the first wafer whose blocks do not repeat
    (:func:`~wss.model.folding.layer_fold.check_wafer_blocks`), and one that folds still saves half the run."""
    n = r.hi - r.lo + 1
    return 2 * r.settle <= n / 4 if folded else r.head + r.settle <= n / 2


def _stretched(r: BlockRun, direction: str, late: bool, forward_only: bool) -> BlockRun:
    """Run ``r`` with the end where the ``direction``'s fold failed simulated further: the low end (its head) for
    the forward passes, the high end (its settle) for the backward ones, both for neither.  The low end keeps its
    head there, or simulates as many blocks as the high end where that is more.  One block further where the failed
    fold had settled late (its second compared block already repeated: the next pair will, unless the check finds
    otherwise), else half as far again (:func:`_longer`), so a run that settles by its seventh block is not
    simulated to its ninth, while one that does not settle costs few tries.

    In a run of one simulated step (``forward_only``) the blocks added at the low end are simulated in the forward
    passes only (the run's ``forward_lead``): the backward passes run there after their copies, from the state the
    copies end in, and need no longer stretch to settle (GPT-3 175B on 192 wafers with one 1.1x straggler: seven
    blocks of the forward passes at the start, four of the backward passes).  With more steps a later step's forward
    pass would wait for the update of a block whose backward pass was folded away, so both directions keep the
    head (its ``lead``)."""
    if direction == "forward":
        head = r.head + 1 if late else _longer(r.head)
        if forward_only:
            return replace(r, forward_lead=head - r.settle - r.lead)
        return replace(r, lead=head - r.settle - r.forward_lead)
    if direction == "backward":
        settle = r.settle + 1 if late else _longer(r.settle)
        if forward_only:
            return replace(r, settle=settle, forward_lead=max(0, r.head - settle - r.lead))
        return replace(r, settle=settle, lead=max(0, r.head - settle - r.forward_lead))
    return replace(r, settle=_longer(r.settle))


def _led_longer(p: Plan, exc: LayerFoldMismatch) -> Plan | None:
    """The plan with more blocks simulated at the start of each run of identical ones (its ``lead``; how many:
    :func:`_led`), where that still leaves at least half the run to fold, after its forward blocks failed to
    repeat in a step after the first (``exc``); None otherwise.

    With global-norm clipping a step's updates start only after its last gradient, so they run into the next
    step's first forward pass: each block of it streams while the optimizer's backlog drains, and the blocks
    repeat only once it has (GPT-3 175B: about 25 blocks in).  The end of the run, which the backlog never
    reaches, keeps its stretch.  Each try that fails stops at its first failed check, in step 1; the guess from
    the failed check's queues, or else doubling, keeps the tries few.  The check alone decides whether it folds."""
    if not p.layer_runs or exc.direction != "forward" or not exc.step or exc.micro_batch is None \
            or exc.micro_batch in p.uneven_slots:
        return None
    runs = tuple(replace(r, lead=_led(r.head, exc.drains_in) - r.settle - r.forward_lead)
                 if _led(r.head, exc.drains_in) <= (r.hi - r.lo + 1) / 2 else r for r in p.layer_runs)
    return replace(p, layer_runs=runs) if runs != p.layer_runs else None


def _led(head: int, drains_in: int | None) -> int:
    """The next start to try after ``head`` blocks did not repeat: far enough that both compared blocks start after
    the queues have drained, at the pace the failed check measured (``drains_in`` blocks after the second compared
    one), and at least twice as far where that guess is short or missing."""
    return max(2 * head, head + drains_in + 2) if drains_in is not None else 2 * head


def _longer(settle: int) -> int:
    """The next stretch to try: half as long again (4, 6, 9, 14, ...), so a run that settles by its sixth block is
    not simulated to its eighth, while one that does not settle costs few tries."""
    return -(-3 * settle // 2)


def _run_layers_folded(s: Scenario, p: Plan, run: Callable[[Plan], R]) -> R:
    """Run the plan; on a :class:`LayerFoldMismatch`, the rungs of :func:`_fold_fewer_layers`."""
    try:
        return run(p)
    except LayerFoldMismatch as exc:
        return _fold_fewer_layers(s, p, run, exc)


def _fold_fewer_layers(s: Scenario, p: Plan, run: Callable[[Plan], R], exc: LayerFoldMismatch) -> R:
    """After the plan's blocks failed to repeat (``exc``): if they did so in an uneven slot, run again with every
    block of the uneven slots simulated (:func:`_unfold_uneven_slots`); if they do not repeat in one direction
    elsewhere, again with the other one only.

    A rung costs a run only where a fold fails its check: the run stops at the first failed check, and a plan
    whose blocks fold in more slots simulates no more than one with fewer.  Only a run of one simulated step folds
    one direction alone: with more, a block whose backward (and update) were folded away would still stream
    forward in the next step, waiting for an update the run never simulates, and one whose forward was folded
    away would skip the wait the real run has.
    """
    fewer = _unfold_uneven_slots(p, exc)
    if fewer is not None:
        log.info("%s: blocks do not repeat (%s): simulating every block of micro-batches %s, where the wafers' "
                 "sizes differ", s.name, exc, sorted(fewer.blocks_unfolded_in))
        return _run_layers_folded(s, fewer, run)
    others = tuple(d for d in p.layer_directions if d != exc.direction)
    if exc.direction not in p.layer_directions or not others or p.simulated_steps > 1:
        raise exc
    log.info("%s: blocks do not repeat in the %s passes (%s): folding them in the %s passes only", s.name,
             exc.direction, exc, others[0])
    return run(replace(p, layer_directions=others))


def _unfold_uneven_slots(p: Plan, exc: LayerFoldMismatch) -> Plan | None:
    """The plan with every block of its uneven slots simulated, in both directions, after its blocks failed to
    repeat in one of them (micro-batch ``exc.micro_batch``); None when they already are, or when the failed fold
    lay in another micro-batch.

    Both directions, not the failed one alone.  Chosen when a slot whose forward passes ran every block while its
    backward passes folded reported other offload bytes (Cerebras-GPT 13B on 17 wafers: 601.8 GB instead of
    613.2 GB of ``activations->wafer``); the level views are now unfolded member by member
    (:meth:`UnfoldedCluster.total <wss.model.sim.unfolded.UnfoldedCluster.total>`), so folding the other
    direction there would report the full run's figures and save events, which this rung does not do yet."""
    if not p.layer_runs or not p.uneven_slots or exc.micro_batch not in {*p.uneven_slots, None}:
        return None
    if p.blocks_unfolded_in == p.uneven_slots:
        return None
    return replace(p, blocks_unfolded_in=p.uneven_slots)


def _run_less_folded(s: Scenario, profiles: Any, folded: Plan, run: Callable[[Plan], R], layers_failed: bool) -> R:
    """After a fold failed its check: layers unfolded (when theirs failed), then steps too (micro-batches still
    folded), else nothing folded."""
    if folded.layer_runs and layers_failed:
        try:
            return run(replace(folded, layer_runs=()))
        except FoldMismatch as exc:
            log.info("%s: micro-batches or steps do not repeat either (%s): folding less", s.name, exc)
    if folded.step_fold_copies:
        try:
            return run(make_plan(s, profiles, fold_steps=False, fold_layers=False))
        except FoldMismatch as exc:
            log.info("%s: micro-batches do not repeat either (%s): simulating every one", s.name, exc)
    return run(make_plan(s, profiles, fold=False, fold_layers=False))
