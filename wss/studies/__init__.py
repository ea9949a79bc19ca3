"""Studies: everything that runs the model many times or compares its results.

estimate (the fast analytic second level), verdict (re-simulate with each part relaxed),
validation (published measured runs), check (timing baselines for CI), sweep (parameter sweeps).
"""
