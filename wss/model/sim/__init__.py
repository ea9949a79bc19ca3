"""Running the machine: build the parts from their settings, wire them, run SimPy, explain a stall.

:mod:`.cluster` builds the folded cluster (one wafer and one root-to-leaf path stand for all),
:mod:`.unfolded` every wafer and tree edge apart; :mod:`.engine` is the event loop and
:mod:`.stall` turns a run that stops early into a sentence.
"""
