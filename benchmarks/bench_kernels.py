"""Benchmark the sparse GEMM kernels against numpy dense and scipy.sparse CSR.

Run ``python benchmarks/bench_kernels.py`` (add ``--quick`` for a smoke run,
``--backward`` for the two backward kernels, ``--sweep`` for the
dense/sparse switch-over scan behind ``SPARSE_DENSITY_THRESHOLD``).

Each cell is the median wall time over repeats (fewer repeats for calls that
take seconds, see column ``n``).  ``ours`` is :func:`wss.model.kernels.gemm.forward`
with its caches warm (the dense form or padded layout is built once per
streamed matrix); ``cold`` includes building them, which is what a training
step pays because every update yields new weights.  ``ratio`` is
``ours / min(dense, scipy)``; the target is <= 1.1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import scipy.sparse as sps

from wss.model.kernels import gemm
from wss.model.kernels.sparse_format import SparseWeights


def timed(fns: dict, repeats: int, budget_s: float) -> dict[str, tuple[float, int]]:
    """Median time of each callable, measured in interleaved rounds.

    Interleaving spreads drifting machine load evenly over the candidates, so
    their ratio is fairer than timing each in its own block.  A candidate
    whose calls take seconds stops once it has used ``budget_s``.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()  # warm caches and page in buffers
    for _ in range(repeats):
        for name, fn in fns.items():
            if times[name] and sum(times[name]) > budget_s:
                continue
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: (statistics.median(ts), len(ts)) for name, ts in times.items()}


def random_weights(rng: np.random.Generator, n_out: int, n_in: int, density: float) -> SparseWeights:
    """Unstructured mask with exactly ``round(density * size)`` non-zeros."""
    size = n_out * n_in
    keep = rng.choice(size, size=round(density * size), replace=False)
    mask = np.zeros(size, dtype=bool)
    mask[keep] = True
    values = rng.standard_normal(size, dtype=np.float32)
    return SparseWeights.from_mask(mask.reshape(n_out, n_in), values.reshape(n_out, n_in))


def to_scipy(W: SparseWeights) -> sps.csr_array:
    return sps.csr_array((W.values, W.indices, W.indptr), shape=W.shape)


def check(ours: np.ndarray, ref: np.ndarray) -> None:
    scale = max(float(np.abs(ref).max()), 1e-30)
    err = float(np.abs(ours - ref).max()) / scale
    if err > 1e-5:
        raise AssertionError(f"kernel disagrees with the reference: max-abs rel error {err:.2e}")


def bench_forward(args, rng) -> None:
    print(f"forward Y = W X, W {args.n} x {args.n} fp32, times in ms (median)")
    header = (f"{'density':>8} {'T':>5} {'dense':>9} {'scipy':>9} {'ours':>9} {'cold':>9} {'path':>6} "
              f"{'ratio':>6} {'n':>3}")
    print(header)
    print("-" * len(header))
    for density in args.densities:
        W = random_weights(rng, args.n, args.n, density)
        D = W.to_dense()
        csr = to_scipy(W)
        for T in args.tokens:
            X = rng.standard_normal((args.n, T), dtype=np.float32)
            check(gemm.forward(W, X), D @ X)
            fresh = W.with_values(W.values)  # as each training step sees it
            r = timed(
                {
                    "dense": lambda: D @ X,
                    "scipy": lambda: csr @ X,
                    "ours": lambda: gemm.forward(W, X),
                    "cold": lambda: gemm.forward(fresh.with_values(fresh.values), X),
                },
                args.repeats,
                args.budget,
            )
            (t_dense, n), (t_scipy, n_s), (t_ours, _), (t_cold, _) = r["dense"], r["scipy"], r["ours"], r["cold"]
            path = "sparse" if W.density < gemm.SPARSE_DENSITY_THRESHOLD else "dense"
            ratio = t_ours / min(t_dense, t_scipy)
            print(
                f"{density:>8.0%} {T:>5} {t_dense * 1e3:>9.1f} {t_scipy * 1e3:>9.1f} {t_ours * 1e3:>9.1f} "
                f"{t_cold * 1e3:>9.1f} {path:>6} {ratio:>6.2f} {min(n, n_s):>3}",
                flush=True,
            )


def bench_backward(args, rng) -> None:
    print(f"\nbackward, W {args.n} x {args.n} fp32, times in ms (median); data: dX = W^T dY, weight: (dY X^T)[mask]")
    header = (
        f"{'density':>8} {'T':>5} {'data dense':>11} {'data scipy':>11} {'data ours':>10} "
        f"{'wgt dense':>10} {'wgt ours':>9}"
    )
    print(header)
    print("-" * len(header))
    for density in args.densities:
        W = random_weights(rng, args.n, args.n, density)
        D = W.to_dense()
        csr_t = to_scipy(W).T.tocsr()
        flat = np.flatnonzero(W.mask)
        for T in args.tokens:
            X = rng.standard_normal((args.n, T), dtype=np.float32)
            dY = rng.standard_normal((args.n, T), dtype=np.float32)
            r = timed(
                {
                    "dd": lambda: D.T @ dY,
                    "ds": lambda: csr_t @ dY,
                    "do": lambda: gemm.backward_data(W, dY),
                    "wd": lambda: (dY @ X.T).reshape(-1)[flat],
                    "wo": lambda: gemm.backward_weight(W, X, dY),
                },
                args.repeats,
                args.budget,
            )
            t_dd, t_ds, t_do, t_wd, t_wo = (r[k][0] for k in ("dd", "ds", "do", "wd", "wo"))
            print(
                f"{density:>8.0%} {T:>5} {t_dd * 1e3:>11.1f} {t_ds * 1e3:>11.1f} {t_do * 1e3:>10.1f} "
                f"{t_wd * 1e3:>10.1f} {t_wo * 1e3:>9.1f}",
                flush=True,
            )


def sweep(args, rng) -> None:
    print(f"\nswitch-over scan: time(method='sparse') / time(method='dense'), W {args.n} x {args.n} fp32")
    print(f"{'density':>8} " + " ".join(f"{'fwd T=' + str(T):>11} {'bwd-w T=' + str(T):>12}" for T in args.tokens))
    for density in (0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10):
        W = random_weights(rng, args.n, args.n, density)
        cells = []
        for T in args.tokens:
            X = rng.standard_normal((args.n, T), dtype=np.float32)
            dY = rng.standard_normal((args.n, T), dtype=np.float32)
            r = timed(
                {
                    "fs": lambda: gemm.forward(W, X, method="sparse"),
                    "fd": lambda: gemm.forward(W, X, method="dense"),
                    "ws": lambda: gemm.backward_weight(W, X, dY, method="sparse"),
                    "wd": lambda: gemm.backward_weight(W, X, dY, method="dense"),
                },
                args.repeats,
                args.budget,
            )
            fs, fd, ws, wd = (r[k][0] for k in ("fs", "fd", "ws", "wd"))
            cells.append(f"{fs / fd:>11.2f} {ws / wd:>12.2f}")
        print(f"{density:>8.0%} " + " ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096, help="weights are n x n")
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument("--densities", type=float, nargs="+", default=[1.0, 0.5, 0.1, 0.01])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=float, default=8.0,
                        help="seconds per candidate and cell before cutting repeats")
    parser.add_argument("--backward", action="store_true", help="also time the backward kernels")
    parser.add_argument("--sweep", action="store_true", help="only scan the dense/sparse switch-over")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.n, args.tokens, args.repeats = 1024, [128], 3
    rng = np.random.default_rng(args.seed)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"numpy {np.__version__}, {os.cpu_count()} cpus, load average {load:.1f}\n")
    if args.sweep:
        sweep(args, rng)
        return
    bench_forward(args, rng)
    if args.backward:
        bench_backward(args, rng)


if __name__ == "__main__":
    main()
