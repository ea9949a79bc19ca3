"""Views: read a Result (or a sweep's DataFrame) and show it; never run or reach into the model.

summary (terminal text), trace (Chrome/Perfetto JSON), plots (per-run figures), report (per-pass
table), sweep_plots (sweep figures), progress (terminal progress bars).
"""
