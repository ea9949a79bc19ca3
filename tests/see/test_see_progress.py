"""The progress bar: drawn on a terminal after a delay, silent otherwise."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import wss
from wss.views.progress import ProgressBar, progress_bar


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_draws_after_the_delay_with_carriage_returns():
    out, clock = FakeTTY(), Clock()
    bar = ProgressBar("simulate", out, clock=clock, delay_s=2.0, interval_s=0.1, width=10)
    bar(0.1)
    clock.t += 1.0
    bar(0.3)
    assert out.getvalue() == ""  # a short run never shows a bar
    clock.t += 1.5
    bar(0.5)
    assert out.getvalue() == "\rsimulate [#####.....]  50%  2.5 s"
    clock.t += 0.05
    bar(0.6)  # within the redraw interval: nothing
    assert out.getvalue().count("\r") == 1
    clock.t += 0.1
    bar(0.7)
    assert out.getvalue().endswith("\rsimulate [#######...]  70%  2.6 s")
    bar.close()
    assert out.getvalue().endswith("\rsimulate [##########] 100%  2.6 s\n")
    bar(0.9)  # closed: ignored
    assert out.getvalue().endswith("\n")


def test_silent_when_not_a_terminal_or_quiet():
    clock = Clock()
    for stream, kwargs in ((io.StringIO(), {}), (FakeTTY(), {"quiet": True})):
        bar = progress_bar("x", stream=stream, clock=clock, delay_s=0.0, **kwargs)
        for i in range(10):
            clock.t += 1
            bar(i / 10)
        bar.close()
        assert stream.getvalue() == ""
        assert bar.fraction == 1.0


def test_short_run_prints_nothing_even_on_a_terminal():
    out, clock = FakeTTY(), Clock()
    with ProgressBar("s", out, clock=clock) as bar:
        bar(0.5)
        clock.t += 0.5
        bar(1.0)
    assert out.getvalue() == ""


def test_clamps_and_wipes_longer_lines():
    out, clock = FakeTTY(), Clock()
    bar = ProgressBar("long", out, clock=clock, delay_s=0.0, interval_s=0.0, width=4)
    bar(1.7)
    assert bar.fraction == 1.0
    assert out.getvalue() == "\rlong [####] 100%  0.0 s"
    bar.label = ""
    bar(-1)
    assert out.getvalue().endswith("\r[....]   0%  0.0 s     ")  # padded over the longer previous line


def test_exception_leaves_the_fraction():
    out, clock = FakeTTY(), Clock()
    with pytest.raises(RuntimeError), ProgressBar("s", out, clock=clock, delay_s=0.0) as bar:  # not swallowed
        bar(0.25)
        raise RuntimeError
    assert "25%" in out.getvalue().splitlines()[-1]
    assert out.getvalue().endswith("\n")


def test_simulator_progress_hook():
    """The core calls ``progress(fraction)`` from the run, monotone up to 1.0, and it changes nothing."""
    from wss.model.simulate import simulate_detailed

    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "fc_mnist.yaml"
    seen: list[float] = []
    result, _ = simulate_detailed(scenario, record=False, progress=seen.append)
    assert seen and seen == sorted(seen) and seen[0] > 0 and seen[-1] == 1.0
    assert result.to_json() == wss.simulate(scenario).to_json()  # the hook changes nothing
