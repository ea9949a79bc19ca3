"""The model: a Scenario in, a Result out, nothing printed or written.

Data flows one way through it; each folder imports only from the ones listed above it::

    scenario/     YAML -> validated, frozen Scenario (presets, --set overrides, error messages),
                  the shards and the pure rules of what folds (fold_rules.py); the ground floor
    machine/      the machine's figures derived from a Scenario, each stated once (rates, sizes, costs)
    workload/     the model description -> streamed kernels and on-wafer ops
    kernels/      the sparse-GEMM cycle model and the numpy sparse kernels
    numerics/     real training on the same scenario (bridge.py feeds its masks to the plan)
    plan/         Scenario -> Plan: capacity, placement, micro-batching, chunking, the search
    program.py    Plan -> the flat list of passes every part follows
    components/   the SimPy parts (MemoryX, optimizer, SwarmX, wafer, inputs, links), from their settings
    folding/      proving a run repeats and extrapolating the copies (micro-batches, steps, blocks)
    sim/          builds each part from its own settings, wires and runs them (folded or unfolded)
    result/       the finished cluster -> Result (measure.py, results.py, energy, goodput)
    simulate.py   the entry points: simulate(), simulate_detailed(), plan()
"""
