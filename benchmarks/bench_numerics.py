"""Wall time of real training: the FC-MNIST network on a 4-wafer cluster.

Run ``python benchmarks/bench_numerics.py``.  Times 100 steps of the
784-256-256-10 network (dense and 50%/10% sparse, fp32 and fp16 streaming) on
4 wafers with a global batch of 256; each row is the median of ``--repeats``
runs.  Target: under 10 s per 100 steps.

Small GEMMs are sensitive to a busy machine: OpenBLAS's worker threads wait
for each other, so with other processes on the cores, running with
``OPENBLAS_NUM_THREADS=1`` can be several times faster.  The header prints the
load average so the numbers can be judged.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from wss.model.numerics import NumericsSpec, evaluate, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--wafers", type=int, default=4)
    parser.add_argument("--global-batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"numpy {np.__version__}, {os.cpu_count()} cpus, load average {load:.1f}, OPENBLAS_NUM_THREADS={threads}")
    print(f"FC-MNIST 784-256-256-10, {args.steps} steps, {args.wafers} wafers, global batch {args.global_batch}\n")
    header = (
        f"{'densities':>16} {'stream':>8} {'optimizer':>9} {'wall s':>8} {'ms/step':>8} "
        f"{'loss first10':>12} {'loss last10':>11} {'held-out acc':>12}"
    )
    print(header)
    print("-" * len(header))
    cases = [
        ((1.0, 1.0, 1.0), "float32"),
        ((0.5, 0.5, 0.5), "float32"),
        ((0.5, 0.5, 0.5), "float16"),
        ((0.1, 0.1, 0.1), "float32"),
        ((0.02, 0.02, 0.5), "float32"),
    ]
    for densities, stream in cases:
        spec = NumericsSpec(
            layer_sizes=(784, 256, 256, 10),
            densities=densities,
            optimizer="adam",
            learning_rate=1e-3,
            global_batch=args.global_batch,
            wafers=args.wafers,
            steps=args.steps,
            stream_dtype=stream,
            seed=0,
        )
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = train(spec)
            times.append(time.perf_counter() - start)
        wall = statistics.median(times)
        _, accuracy = evaluate(spec, out.final_weights)
        label = "/".join(f"{d:g}" for d in densities)
        print(
            f"{label:>16} {stream:>8} {spec.optimizer:>9} {wall:>8.2f} {wall / args.steps * 1e3:>8.1f} "
            f"{np.mean(out.losses[:10]):>12.3f} {np.mean(out.losses[-10:]):>11.3f} {accuracy:>12.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
