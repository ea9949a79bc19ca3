"""Everything about a run that is fixed before time starts.

From a Scenario, :func:`make_plan` derives the static quantities the SimPy
model needs and the capacity checks that can fail: the operations, each
kernel's non-zero profile, streamed bytes and chunks, MemoryX placement
across DRAM and flash, the wafers' shards, micro-batching against SRAM, and
the SwarmX tree.  ``wss validate`` runs this and stops.

Byte conventions (DESIGN.md):

* weights down, per pass and per wafer: dense ``M K b_w``; sparse
  ``nnz (b_w + 2) + 4 M`` (a 16-bit index per weight, one 32-bit control
  wavelet per output feature); the smaller format is chosen per kernel;
* gradients up: ``nnz b_g`` (MemoryX knows the mask, no indices);
* MemoryX reads the fp32 master weights (4 B per non-zero) for every stream
  and converts to the streamed precision on the way out (an assumption: no
  second copy is stored);
* a pruned kernel's mask is stored beside its state as a bitmask (``M K / 8``
  bytes) or an int32 index per non-zero, whichever is smaller (an
  assumption: the storage format of MemoryX is not public), so the state
  shrinks monotonically as sparsity grows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wss.errors import FieldProblem, InfeasibleError
from wss.model.components.optimizer_costs import OPTIMIZER_COSTS, SCALAR_BYTES, OptimizerCost
from wss.model.kernels.cycles import KernelCycles, NnzProfile, dense_profile, kernel_cycles, sampled_profile
from wss.model.scenario import PRECISION_BYTES, Scenario
from wss.model.workload import Op, StreamedKernel, WaferOp, expand_model

__all__ = ["Plan", "KernelPlan", "make_plan"]

INDEX_BYTES = 2  # 16-bit index beside each streamed sparse weight
CONTROL_BYTES = 4  # one 32-bit control wavelet closes each output feature
STORED_INDEX_BYTES = 4  # an int32 index per non-zero, if MemoryX stores the mask as indices


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
    tier: str  # "dram" or "flash"
    n_chunks: int
    cycles: dict[int, KernelCycles]  # tokens of a micro-batch -> cycles
    state_owner: int  # kernel whose MemoryX state and update this kernel's weights are (itself unless tied)

    @property
    def nnz(self) -> int:
        return self.profile.nnz

    @property
    def owns_state(self) -> bool:
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
    tokens_per_sample: int
    checkpointing: str
    sram_bytes_needed: float
    sram_bytes_available: float
    optimizer: OptimizerCost
    memoryx_state_bytes: float
    memoryx_dram_bytes: float
    memoryx_flash_bytes: float
    staging_bytes: float
    tree_levels: int
    nodes_per_level: list[int]
    wafer_op_seconds: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)

    @property
    def fold_copies(self) -> int:
        """Micro-batches per step not simulated but repeated from micro-batch 3's measured period."""
        return len(self.micro_batches) - len(self.simulated_micro_batches)

    @property
    def tokens_per_micro_batch(self) -> list[int]:
        return [mb * self.tokens_per_sample for mb in self.micro_batches]

    @property
    def params(self) -> int:
        """Trainable parameters (tied weights counted once)."""
        return sum(k.kernel.params for k in self.kernels if k.owns_state)

    @property
    def nnz(self) -> int:
        return sum(k.nnz for k in self.kernels if k.owns_state)

    def shares_accumulator(self, kernel: int) -> bool:
        """Does another kernel add its gradient into this kernel's accumulator (tied weights)?"""
        return any(k.state_owner == kernel and not k.owns_state for k in self.kernels)


#: Fold only when it removes at least this many micro-batches per step.
FOLD_MIN_COPIES = 2
#: Micro-batches simulated when folding: 0 and 1 settle after the iteration boundary, 2 and 3 are
#: compared to prove the period, the last one carries the update.
FOLDED_PREFIX = 4


def make_plan(scenario: Scenario, profiles: dict[str, NnzProfile] | None = None, fold: bool = True) -> Plan:
    """Derive the static plan; raise :class:`InfeasibleError` when the machine cannot run it.

    Parameters
    ----------
    profiles
        Real non-zero profiles by kernel name (from numerics masks).  Kernels
        not given are dense or sampled from an i.i.d. mask of their density.
    fold
        Allow folding of identical micro-batches (``simulation.fold_micro_batches`` must also be on).
    """
    s = scenario
    hw, tr = s.hardware, s.training
    seq = s.seq_len
    ops = expand_model(s.workload.model, s.workload.sparsity, seq)
    b_w = PRECISION_BYTES[tr.weight_precision]
    b_g = PRECISION_BYTES[tr.gradient_precision]
    opt = OPTIMIZER_COSTS[tr.optimizer]

    wafer_samples = [len(a) for a in np.array_split(np.arange(tr.global_batch), hw.wafers)]
    busiest = max(wafer_samples)

    # Non-zero profiles: real ones, dense, or one sampled per distinct (shape, density).
    sampled: dict[tuple[int, int, float], NnzProfile] = {}
    kernel_specs = [op for op in ops if isinstance(op, StreamedKernel)]
    kernel_profiles = []
    for k in kernel_specs:
        if profiles and k.name in profiles:
            prof = profiles[k.name]
        elif k.density >= 1.0:
            prof = dense_profile(k.out_features, k.in_features)
        else:
            key = (k.out_features, k.in_features, k.density)
            if key not in sampled:
                rng = np.random.default_rng([s.seed, k.out_features, k.in_features, int(round(k.density * 1e9))])
                sampled[key] = sampled_profile(k.out_features, k.in_features, k.density, rng)
            prof = sampled[key]
        kernel_profiles.append(prof)

    # Activation SRAM and micro-batching.
    act_b = PRECISION_BYTES[tr.activation_precision]
    retained = 0.0
    if tr.retain_output_layer:
        retained = sum(
            _stream_bytes(k, p, b_w)[0] for k, p in zip(kernel_specs, kernel_profiles) if k.is_output
        )
    available = hw.wafer.activation_sram_bytes
    modes = ["none", "blocks"] if tr.activation_checkpointing == "auto" else [tr.activation_checkpointing]
    has_blocks = any(op.block is not None for op in ops)
    chosen = None
    for mode in modes:
        if mode == "blocks" and not has_blocks:
            continue
        per_token = _activation_elements_per_token(ops, mode) * act_b
        need_one = per_token * seq + retained
        if need_one <= available:
            chosen = (mode, per_token)
            break
    if chosen is None:
        mode = modes[-1] if has_blocks else "none"
        per_token = _activation_elements_per_token(ops, mode) * act_b
        raise InfeasibleError(
            _source(s),
            [
                FieldProblem(
                    "training.micro_batch",
                    f"activations of one sample need {_fmt_bytes(per_token * seq + retained)} of wafer SRAM "
                    f"(checkpointing '{mode}') but {_fmt_bytes(available)} is available "
                    f"({hw.wafer.name}: {_fmt_bytes(hw.wafer.sram_bytes)} less "
                    f"{hw.wafer.sram_reserved_fraction:.0%} reserved)",
                )
            ],
        )
    mode, per_token = chosen
    max_mb = int((available - retained) // (per_token * seq))
    if tr.micro_batch == "auto":
        mb = max(1, min(busiest, max_mb))
    else:
        mb = min(tr.micro_batch, busiest)
        if mb > max_mb:
            raise InfeasibleError(
                _source(s),
                [
                    FieldProblem(
                        "training.micro_batch",
                        f"a micro-batch of {mb} samples needs {_fmt_bytes(per_token * seq * mb + retained)} of "
                        f"wafer SRAM but {_fmt_bytes(available)} is available; at most {max_mb} fit",
                    )
                ],
            )
    n_mb = math.ceil(busiest / mb)
    # Gradient accumulation: full micro-batches, the remainder last (so the middle ones are identical).
    micro_batches = [mb] * (n_mb - 1) + [busiest - mb * (n_mb - 1)]
    simulated = list(range(n_mb))
    if fold and s.simulation.fold_micro_batches and n_mb - (FOLDED_PREFIX + 1) >= FOLD_MIN_COPIES:
        simulated = list(range(FOLDED_PREFIX)) + [n_mb - 1]
    sram_needed = per_token * seq * max(micro_batches) + retained

    # MemoryX capacity and placement.
    mx = hw.memoryx
    state = []
    stream = []
    index_of = {k.name: i for i, k in enumerate(kernel_specs)}
    owners = [index_of[k.tied_to] if k.tied_to is not None else i for i, k in enumerate(kernel_specs)]
    for i, (k, p) in enumerate(zip(kernel_specs, kernel_profiles)):
        sb, sparse = _stream_bytes(k, p, b_w)
        stream.append((sb, sparse))
        owned = owners[i] == i  # tied weights live (and are updated) once, with their owner
        state.append(p.nnz * opt.state_bytes + _mask_bytes(k, p) if owned else 0)
    total_state = float(sum(state))
    if total_state > mx.capacity_bytes:
        raise InfeasibleError(
            _source(s),
            [
                FieldProblem(
                    "hardware.memoryx",
                    f"the model needs {_fmt_bytes(total_state)} in MemoryX ({sum(p.nnz for p in kernel_profiles):.4g} "
                    f"non-zero weights x {opt.state_bytes} B of {tr.optimizer} state) but MemoryX holds "
                    f"{_fmt_bytes(mx.capacity_bytes)} ({mx.shards} shards x "
                    f"({_fmt_bytes(mx.dram_capacity_bytes)} DRAM + {_fmt_bytes(mx.flash_capacity_bytes)} flash))",
                )
            ],
        )
    if total_state <= mx.dram_total_bytes:
        tiers = ["dram"] * len(state)
        staging = 0.0
    else:
        staging = mx.dram_total_bytes * mx.prefetch_buffer_fraction
        budget = mx.dram_total_bytes - staging
        tiers = []
        for b in state:  # forward order: the first kernels are the ones the iteration boundary waits for
            if b <= budget:
                tiers.append("dram")
                budget -= b
            else:
                tiers.append("flash")
        flash_used = sum(b for b, t in zip(state, tiers) if t == "flash")
        if flash_used > mx.flash_total_bytes:
            raise InfeasibleError(
                _source(s),
                [
                    FieldProblem(
                        "hardware.memoryx",
                        f"{_fmt_bytes(flash_used)} must live in flash (DRAM keeps "
                        f"{mx.prefetch_buffer_fraction:.0%} for prefetch staging) but flash holds "
                        f"{_fmt_bytes(mx.flash_total_bytes)}",
                    )
                ],
            )
    tiers = [tiers[owners[i]] for i in range(len(tiers))]  # tied weights are read where their owner lives
    dram_used = sum(b for b, t in zip(state, tiers) if t == "dram")
    flash_used = total_state - dram_used

    # Cycles per distinct micro-batch size, chunking.
    sim = s.simulation
    token_sizes = sorted({m * seq for m in micro_batches})
    kernels = []
    kernel_of_op = {}
    cycles_cache: dict[tuple[int, str], dict[int, KernelCycles]] = {}
    ki = 0
    for pos, op in enumerate(ops):
        if not isinstance(op, StreamedKernel):
            continue
        p = kernel_profiles[ki]
        sb, sparse = stream[ki]
        n_chunks = int(min(sim.max_chunks_per_kernel, max(1, math.ceil(sb / sim.chunk_bytes))))
        key = (id(p), op.kind)  # sampled profiles are shared per (shape, density): cost them once
        if key not in cycles_cache:
            cycles_cache[key] = {t: kernel_cycles(op.kind, p, t, hw.wafer) for t in token_sizes}
        cycles = cycles_cache[key]
        kernels.append(
            KernelPlan(
                kernel=op,
                index=ki,
                profile=p,
                sparse_format=sparse,
                stream_bytes=sb,
                grad_bytes=float(p.nnz * b_g),
                read_bytes=float(p.nnz * SCALAR_BYTES),
                state_bytes=float(state[ki]),
                tier=tiers[ki],
                n_chunks=n_chunks,
                cycles=cycles,
                state_owner=owners[ki],
            )
        )
        kernel_of_op[pos] = ki
        ki += 1

    # Non-weight work: seconds forward and backward per micro-batch size.
    rate = hw.wafer.peak_flops * hw.wafer.nonweight_efficiency
    wafer_op_seconds = {}
    for pos, op in enumerate(ops):
        if isinstance(op, WaferOp):
            for t in token_sizes:
                f = op.flops_per_token * t
                wafer_op_seconds[(pos, t)] = (f / rate, f * op.backward_factor / rate)

    return Plan(
        scenario=s,
        ops=ops,
        kernels=kernels,
        kernel_of_op=kernel_of_op,
        wafer_samples=wafer_samples,
        micro_batches=micro_batches,
        simulated_micro_batches=simulated,
        tokens_per_sample=seq,
        checkpointing=mode,
        sram_bytes_needed=sram_needed,
        sram_bytes_available=available,
        optimizer=opt,
        memoryx_state_bytes=total_state,
        memoryx_dram_bytes=dram_used,
        memoryx_flash_bytes=flash_used,
        staging_bytes=staging,
        tree_levels=hw.swarmx.levels(hw.wafers),
        nodes_per_level=hw.swarmx.nodes_per_level(hw.wafers),
        wafer_op_seconds=wafer_op_seconds,
    )


def _source(s: Scenario) -> str:
    """How errors name a scenario after loading (the CLI replaces it with the file path)."""
    return f"<scenario {s.name!r}>"


def _mask_bytes(k: StreamedKernel, p: NnzProfile) -> float:
    """MemoryX bytes for a kernel's sparsity mask: none when dense, else bitmask or indices, the smaller."""
    if p.nnz >= k.params:
        return 0.0
    return float(min(math.ceil(k.params / 8), p.nnz * STORED_INDEX_BYTES))


def _stream_bytes(k: StreamedKernel, p: NnzProfile, b_w: int) -> tuple[float, bool]:
    """Bytes of one pass of a kernel into one wafer, and whether the sparse format is used."""
    dense = float(k.params * b_w)
    sparse = float(p.nnz * (b_w + INDEX_BYTES) + k.out_features * CONTROL_BYTES)
    return (sparse, True) if sparse < dense else (dense, False)


def _activation_elements_per_token(ops: list[Op], mode: str) -> float:
    """Activation elements per token that must be resident in SRAM at the peak."""
    working = max((op.working_elements_per_token for op in ops if isinstance(op, WaferOp)), default=0)
    if mode == "none":
        return sum(op.stored_elements_per_token for op in ops) + working
    per_block: dict[int, int] = {}
    outside = 0
    block_inputs = 0
    for op in ops:
        if op.block is None:
            outside += op.stored_elements_per_token
        else:
            per_block[op.block] = per_block.get(op.block, 0) + op.stored_elements_per_token
    for op in ops:  # a checkpointed block keeps only its input: the width entering its first kernel
        if isinstance(op, StreamedKernel) and op.block is not None and op.name.endswith(".qkv"):
            block_inputs += op.in_features
    return outside + block_inputs + max(per_block.values(), default=0) + working


def _fmt_bytes(b: float) -> str:
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.3g} B"
