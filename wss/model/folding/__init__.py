"""Folding: simulating a repeating run once and extrapolating the copies, exactly.

A run repeats at three grains: identical blocks in a row (:mod:`.layer_fold`), identical
micro-batches (:mod:`.fold`) and identical steps (:mod:`.step_fold`); where smaller shards run ahead of the largest
block after block, :mod:`.drift` folds their blocks on an axis of their own.  Each fold is proved,
not assumed: the state of every part is compared at the fold points and a mismatch falls back to
simulating more.  :mod:`.folded_spans` maps a folded run's records back onto the unfolded time axis.
The rules that decide whether the wafers fold at all are the scenario's
(:mod:`wss.model.scenario.fold_rules`).
"""
