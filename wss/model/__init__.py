"""The model: a Scenario in, a Result out, nothing printed or written.

Data flows one way through it::

    scenario/     YAML -> validated, frozen Scenario (presets, --set overrides, error messages)
    workload/     the model description -> streamed kernels and on-wafer ops
    kernels/      the sparse-GEMM cycle model and the numpy sparse kernels
    plan/         Scenario -> Plan: capacity, placement, micro-batching, chunking, the tree
    program.py    Plan -> the flat list of passes every part follows
    components/   the SimPy parts (MemoryX, optimizer, SwarmX, wafer, inputs, links)
    cluster.py    builds each part from its own settings, wires and runs them
    fold.py       proves the run repeats and extrapolates the repeated micro-batches
    folded_spans.py  a recorded folded run's spans on the unfolded axis (for traces)
    measure.py    the finished cluster -> Result (results.py)
    numerics/     real training on the same scenario (numerics_bridge.py feeds its masks to the plan)
    simulate.py   the entry points: simulate(), simulate_detailed(), plan()
"""
