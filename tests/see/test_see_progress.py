"""The progress bar: drawn on a terminal after a delay, silent otherwise."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import wss
from wss.views.progress import ProgressBar, SweepBar, progress_bar


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _last_frame(text: str) -> str:
    """What a terminal shows last: tqdm redraws with carriage returns."""
    return text.replace("\n", "\r").rstrip("\r").rsplit("\r", 1)[-1]


def test_draws_on_a_terminal_with_percent_and_eta():
    out = FakeTTY()
    with ProgressBar("simulate", out, delay_s=0.0, min_interval_s=0.0) as bar:
        bar(0.5)
        frame = _last_frame(out.getvalue())
        assert frame.startswith("simulate:  50%") and "<" in frame  # elapsed<remaining: the ETA
    assert _last_frame(out.getvalue()).startswith("simulate: 100%")
    assert out.getvalue().endswith("\n") and bar.fraction == 1.0
    bar(0.9)  # closed: ignored
    assert bar.fraction == 1.0


def test_a_bar_drawn_early_by_a_line_above_it_still_finishes_at_100_percent():
    """A line written above the bars (a long run's warning through tqdm.write) draws the bar before its delay;
    closed, it must end at 100%, not stay at the frame the line left (``wss size`` on a quick search)."""
    from tqdm import tqdm

    out = FakeTTY()
    with ProgressBar("size", out, delay_s=60.0, min_interval_s=0.0) as bar:
        bar(0.5)
        tqdm.write("wss: WARNING: a long run", file=out)
        assert _last_frame(out.getvalue()).startswith("size:  50%")
    assert _last_frame(out.getvalue()).startswith("size: 100%") and out.getvalue().endswith("\n")


def test_silent_when_not_a_terminal_or_quiet():
    for stream, kwargs in ((io.StringIO(), {}), (FakeTTY(), {"quiet": True})):
        bar = progress_bar("x", stream=stream, delay_s=0.0, notebook=False, **kwargs)
        for i in range(10):
            bar(i / 10)
        bar.close()
        assert stream.getvalue() == ""
        assert bar.fraction == 1.0


def test_short_run_prints_nothing_even_on_a_terminal():
    out = FakeTTY()
    with ProgressBar("s", out, delay_s=60.0) as bar:
        bar(0.5)
        bar(1.0)
    assert out.getvalue() == ""


def test_clamps_the_fraction():
    out = FakeTTY()
    bar = ProgressBar("c", out, delay_s=0.0)
    bar(1.7)
    assert bar.fraction == 1.0
    bar(-1)
    assert bar.fraction == 0.0
    bar.close()


def test_exception_leaves_the_fraction():
    out = FakeTTY()
    with pytest.raises(RuntimeError), ProgressBar("s", out, delay_s=0.0, min_interval_s=0.0) as bar:  # not swallowed
        bar(0.25)
        raise RuntimeError
    assert "25%" in _last_frame(out.getvalue())
    assert out.getvalue().endswith("\n")


def test_a_notebook_draws_even_without_a_terminal():
    out = io.StringIO()
    with ProgressBar("nb", out, delay_s=0.0, notebook=True) as bar:
        bar(0.3)
    assert bar.enabled and out.getvalue()  # tqdm.auto falls back to text where ipywidgets is missing


def test_sweep_bar_counts_points_with_cached_and_errors():
    from wss.studies.sweep import SweepProgress

    out = FakeTTY()
    with SweepBar(stream=out, min_interval_s=0.0) as bar:
        bar(SweepProgress(1, 4, 1, 0, 0.1))
        bar(SweepProgress(3, 4, 1, 1, 0.2))
        frame = _last_frame(out.getvalue())
        assert "3/4" in frame and "1 cached, 1 error" in frame
    assert "4/4" not in _last_frame(out.getvalue())  # only what was done: the bar does not invent points


def test_sweep_draws_its_own_bar_by_default_only_where_someone_sees_it(capsys):
    """``wss.sweep`` defaults to progress="auto": pytest's captured stderr is no terminal, so nothing."""
    base = Path(__file__).resolve().parents[2] / "scenarios" / "fc_mnist.yaml"
    df = wss.sweep(base, {"hardware.wafers": [1, 2]}, executor="serial", fidelity="estimate")
    assert list(df["status"]) == ["ok", "ok"]
    assert capsys.readouterr().err == ""
    from wss.studies.sweep import SweepError

    with pytest.raises(SweepError, match="progress must be"):
        wss.sweep(base, {"hardware.wafers": [1]}, executor="serial", progress="yes")


def test_simulator_progress_hook():
    """The core calls ``progress(fraction)`` from the run, monotone up to 1.0, and it changes nothing."""
    from wss.model.simulate import simulate_detailed

    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "fc_mnist.yaml"
    seen: list[float] = []
    result, _ = simulate_detailed(scenario, record=False, progress=seen.append)
    assert seen and seen == sorted(seen) and seen[0] > 0 and seen[-1] == 1.0
    assert result.to_json() == wss.simulate(scenario).to_json()  # the hook changes nothing


def test_progress_stays_monotone_when_a_fold_is_refused():
    """A refused fold simulates again from the start; the fractions told never go back (bert_large: its blocks
    do not repeat in either direction, so it runs three times)."""
    from wss.model.simulate import simulate_detailed

    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "bert_large.yaml"
    seen: list[float] = []
    _, cluster = simulate_detailed(scenario, record=False, progress=seen.append)
    assert cluster.folding.layers is None  # refused, then simulated without layer folding
    assert seen and seen == sorted(seen) and len(set(seen)) == len(seen) and seen[-1] == 1.0
