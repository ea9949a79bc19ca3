"""The machine's figures: every rate, size and cost derived from a scenario, stated once.

The simulator's parts (through their settings), the planner and the analytic level all read these,
so a figure cannot mean one thing to the simulation and another to the estimate.  Nothing here runs
SimPy; every function is pure.
"""
