"""The plan's records: :class:`Plan` for a run and :class:`KernelPlan` for each streamed kernel.

They are what every later layer reads (the program, the SimPy components, the
estimate and the views), so they stay plain frozen dataclasses with no logic
beyond a few derived sums; the steps that fill them live in the sibling modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from wss.model.kernels.cycles import KernelCycles, NnzProfile
from wss.model.machine.optimizer_costs import OptimizerCost, StateTiers
from wss.model.plan.choice import PlanChoice
from wss.model.plan.layer_runs import BlockRun
from wss.model.scenario import Scenario
from wss.model.workload import Op, StreamedKernel

__all__ = ["KernelPlan", "Plan"]


@dataclass(frozen=True)
class KernelPlan:
    """Static figures of one streamed kernel."""

    kernel: StreamedKernel
    index: int
    profile: NnzProfile
    sparse_format: bool
    stream_bytes: float  # one pass, one wafer link
    grad_bytes: float  # one backward pass, one wafer link
    read_bytes: float  # MemoryX tier bytes read per stream
    state_bytes: float  # MemoryX capacity
    tier: str  # "dram" or "flash": where its weights live (what each stream pass reads)
    n_chunks: int
    cycles: dict[int, KernelCycles]  # tokens of a micro-batch -> cycles
    state_owner: int  # kernel whose MemoryX state and update this kernel's weights are (itself unless tied)
    # Where each state component lives (the owner's, when tied).
    state_tiers: StateTiers = field(default_factory=StateTiers)

    @property
    def nnz(self) -> int:
        """Non-zero weights of this kernel."""
        return self.profile.nnz

    @property
    def owns_state(self) -> bool:
        """Does this kernel hold its own MemoryX state (false for a kernel tied to another)?"""
        return self.state_owner == self.index


@dataclass(frozen=True)
class Plan:
    """The static plan of one scenario."""

    scenario: Scenario
    ops: list[Op]
    kernels: list[KernelPlan]
    kernel_of_op: dict[int, int]  # op position -> kernel index
    wafer_samples: list[int]  # samples on each wafer
    micro_batches: list[int]  # samples per micro-batch on the busiest wafer
    simulated_micro_batches: list[int]  # indices of the micro-batches the SimPy run executes
    simulated_steps: int  # steps the SimPy run executes: all, or steps 0-3 and the last when steps are folded
    tokens_per_sample: int
    checkpointing: str
    sram_bytes_needed: float
    sram_bytes_available: float
    optimizer: OptimizerCost
    memoryx_state_bytes: float
    memoryx_dram_bytes: float
    memoryx_flash_bytes: float
    staging_bytes: float
    memoryx_components: dict[str, dict[str, float]]  # state component -> {"dram": bytes, "flash": bytes}
    tree_levels: int
    nodes_per_level: list[int]
    wafer_op_seconds: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    choice: PlanChoice | None = None  # the checkpointing and micro-batches chosen, the alternatives weighed, why
    #: Runs of identical blocks whose middle the program leaves out (:mod:`wss.model.folding.layer_fold`); () unfolded.
    layer_runs: tuple[BlockRun, ...] = ()
    #: The passes whose blocks fold: "forward" (forward passes) and "backward" (recompute and backward).
    layer_directions: tuple[str, ...] = ("forward", "backward")
    #: Micro-batches in which the wafers apart have micro-batches of different sizes
    #: (:func:`wss.model.plan.micro_batching.uneven_slots`; with more than one step and the first of them
    #: uneven, the last too): where a block fold may fail its check while the others pass.
    uneven_slots: frozenset[int] = frozenset()
    #: Micro-batches whose every block is simulated, folding or not: none at first; the uneven slots once blocks
    #: folded in them too failed their check (:mod:`wss.model.folding.ladder`).
    blocks_unfolded_in: frozenset[int] = frozenset()

    @property
    def fold_copies(self) -> int:
        """Micro-batches per step not simulated but repeated from micro-batch 3's measured period."""
        return len(self.micro_batches) - len(self.simulated_micro_batches)

    @property
    def step_fold_copies(self) -> int:
        """Steps not simulated but repeated from step 3's measured period (:mod:`wss.model.folding.step_fold`)."""
        return self.scenario.training.steps - self.simulated_steps

    @property
    def dropped_blocks(self) -> frozenset[int]:
        """Blocks that no pass simulates (in :attr:`layer_directions`): the middle of each folded run of identical
        blocks."""
        return frozenset(b for r in self.layer_runs for b in r.dropped)

    def dropped_in(self, direction: str, micro_batch: int | None = None) -> frozenset[int]:
        """Blocks whose ``direction`` passes ("forward" or "backward") are not simulated (in ``micro_batch``, if
        given: none in a micro-batch of :attr:`blocks_unfolded_in`).  The backward passes may leave out more than
        the forward ones (a run's ``forward_lead``: :class:`~wss.model.plan.layer_runs.BlockRun`)."""
        if micro_batch in self.blocks_unfolded_in or direction not in self.layer_directions:
            return frozenset()
        return frozenset(b for r in self.layer_runs for b in r.dropped_in(direction))

    @property
    def tokens_per_micro_batch(self) -> list[int]:
        """Tokens of each micro-batch on the busiest wafer."""
        return [mb * self.tokens_per_sample for mb in self.micro_batches]

    @property
    def params(self) -> int:
        """Trainable parameters (tied weights counted once)."""
        return sum(k.kernel.params for k in self.kernels if k.owns_state)

    @property
    def nnz(self) -> int:
        """Non-zero trainable weights (tied weights counted once)."""
        return sum(k.nnz for k in self.kernels if k.owns_state)

    def shares_accumulator(self, kernel: int) -> bool:
        """Does another kernel add its gradient into this kernel's accumulator (tied weights)?"""
        return kernel in self._tied_owners

    @cached_property
    def _tied_owners(self) -> frozenset[int]:
        """Kernels whose state another kernel's weights are tied to (computed once: plans have 1,000s of kernels)."""
        return frozenset(k.state_owner for k in self.kernels if not k.owns_state)
