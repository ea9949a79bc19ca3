"""The wafer's rate for non-weight work (attention, norms, activations, the loss), stated once.

Non-weight work has no streamed weight to multiply: its operands are activations the wafer holds in SRAM, so
each FLOP reads and writes SRAM.  An fp16 multiply-add (2 FLOPs) reads two 2-byte operands and writes one:
:data:`NONWEIGHT_SRAM_BYTES_PER_FLOP` = 3 bytes per FLOP.  That is the balance WSE-2's cores are built to: two
64-bit reads and one 64-bit write per core per cycle (24 B) feed its 4-wide FP16 multiply-add (8 FLOPs) (M. James,
"Scaling Up and Out: Training Massive Models on Cerebras Systems using Weight Streaming", Cerebras blog, 2021;
Hot Chips 34, 2022).  A wafer whose datapath outgrows its SRAM bandwidth cannot feed it on this work, so the
rate is the lesser of the peak and what the SRAM feeds, times the achieved fraction ``nonweight_efficiency``.

WSE-2: 20 PB/s feed 6.7 PFLOP/s, more than its 5.1 PFLOP/s peak at wss's clock: non-weight work runs at peak
as before.  WSE-3: 21 PB/s (Cerebras WSE-3 / CS-3 announcement, 2024) feed 7.0 PFLOP/s, while its 8-wide
datapath (a press estimate) would peak at 12.2 PFLOP/s: non-weight work runs at 7.0, 1.36x WSE-2's rather
than the peaks' 2.38x.  The figures are the wafer presets' ``sram_bandwidth_Bps``.
"""

from __future__ import annotations

from wss.model.scenario.hardware import WaferConfig

__all__ = ["NONWEIGHT_SRAM_BYTES_PER_FLOP", "nonweight_peak_flops", "nonweight_flops"]

#: SRAM bytes per FLOP of non-weight work: an fp16 multiply-add reads 2 x 2 B and writes 2 B for 2 FLOPs
#: (derived; WSE-2's ports, 24 B per core per cycle for its 8 FLOPs, are built to this balance: module docstring).
NONWEIGHT_SRAM_BYTES_PER_FLOP = 3.0


def nonweight_peak_flops(wafer: WaferConfig) -> float:
    """The most FLOP/s non-weight work can reach: the peak, or what the SRAM bandwidth feeds where less."""
    if wafer.sram_bandwidth_Bps is None:
        return wafer.peak_flops
    return min(wafer.peak_flops, wafer.sram_bandwidth_Bps / NONWEIGHT_SRAM_BYTES_PER_FLOP)


def nonweight_flops(wafer: WaferConfig) -> float:
    """The sustained FLOP/s of non-weight work: ``nonweight_efficiency`` of :func:`nonweight_peak_flops`."""
    return nonweight_peak_flops(wafer) * wafer.nonweight_efficiency
