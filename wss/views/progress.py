"""Progress bars with an ETA, on a terminal or in a notebook, drawn by tqdm.

>>> with ProgressBar("simulate") as bar:
...     simulate_detailed(scenario, progress=bar)   # the bar is called with the fraction done

:class:`ProgressBar` takes the fraction of a run done (what ``simulate_detailed``
and ``verdict`` report); :class:`SweepBar` takes a sweep's
:class:`~wss.studies.sweep.SweepProgress` after each point.  Both draw with tqdm
(a maintained library: rates, elapsed time and the ETA, redraw throttling,
terminal widths), in a Jupyter notebook with its widget front end when one is
available (``tqdm.auto``), and stay silent where nobody would see them: when
the stream is not a terminal (pipes, CI logs, pytest capture) outside a
notebook, or when ``enabled=False`` (``--quiet``).  A bar is not drawn before
``delay_s``, so short runs never flash one.  tqdm is imported only when a bar
is drawn.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["ProgressBar", "SweepBar", "progress_bar", "in_notebook"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython's kernel app is running)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None) if ipython is not None else None
    shell = get() if callable(get) else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _should_draw(stream: TextIO, enabled: bool | None, notebook: bool) -> bool:
    if enabled is not None:
        return enabled
    if notebook:
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


class _Bar:
    """What both bars share: a tqdm bar made on first use, closed once."""

    def __init__(self, label: str, stream: TextIO | None, enabled: bool | None, delay_s: float, total: float,
                 unit: str, notebook: bool | None, min_interval_s: float = 0.1):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.notebook = in_notebook() if notebook is None else notebook
        self.enabled = _should_draw(self.stream, enabled, self.notebook)
        self.delay_s = delay_s
        self.min_interval_s = min_interval_s
        self.total = total
        self.unit = unit
        self.closed = False
        self._tqdm: Any = None
        self._drawn = False  # by tqdm, at any time (see _note_draws)

    def _bar(self) -> Any:
        if self._tqdm is None:
            import importlib

            # the notebook widget when ipywidgets is there (else text), or the terminal's
            front = importlib.import_module("tqdm.auto" if self.notebook else "tqdm.std")
            self._tqdm = front.tqdm(total=self.total, desc=self.label or None, file=self.stream, delay=self.delay_s,
                              unit=self.unit, dynamic_ncols=True, leave=True, mininterval=self.min_interval_s,
                              miniters=1,
                              bar_format=self._format())
            self._note_draws(self._tqdm)
        return self._tqdm

    def _note_draws(self, bar: Any) -> None:
        """Remember that the bar was drawn, however it was.  A line written above the bars (``tqdm.write``, which
        ``logging_redirect_tqdm`` uses for a long run's warning) redraws every bar at once, before its delay too;
        tqdm then counts the bar as never shown and leaves it at that frame when closed (``wss size`` stopped
        at 58% on a quick search), so :meth:`close` has to know."""
        plain = bar.display

        def display(*args: Any, **kwargs: Any) -> Any:
            self._drawn = True
            return plain(*args, **kwargs)

        bar.display = display

    def _format(self) -> str:
        return "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"

    def _move_to(self, n: float) -> None:
        if not self.enabled or self.closed:
            return
        bar = self._bar()
        if n != bar.n:
            bar.update(n - bar.n)

    def close(self, done: bool = True) -> None:
        """Finish the bar (at 100% when ``done``); later calls are ignored."""
        if self.closed:
            return
        if done:
            self._move_to(self.total)
        bar = self._tqdm
        if bar is not None:
            if self._drawn and bar.last_print_t < bar.start_t + bar.delay:
                bar.last_print_t = bar.start_t + bar.delay  # drawn early by a line above it: finish it, as shown
            bar.close()
        self.closed = True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(done=exc_type is None)


class ProgressBar(_Bar):
    """Callable with the fraction done (0..1): ``simulate  42%|████      | 42/100 [00:03<00:04]``.

    Parameters
    ----------
    label
        Text before the bar.
    stream
        Where to draw (default ``sys.stderr``).
    enabled
        False silences the bar; True draws it; None (default) draws on a terminal or in a notebook.
    delay_s
        Nothing is drawn before this many seconds have passed.
    notebook
        Draw with the notebook front end (default: when running in a Jupyter kernel).
    min_interval_s
        Minimum seconds between redraws.
    """

    def __init__(self, label: str = "", stream: TextIO | None = None, *, enabled: bool | None = None,
                 delay_s: float = 2.0, notebook: bool | None = None, min_interval_s: float = 0.1):
        super().__init__(label, stream, enabled, delay_s, 100.0, "%", notebook, min_interval_s)
        self.fraction = 0.0

    def _format(self) -> str:
        return "{l_bar}{bar}| [{elapsed}<{remaining}]"

    def __call__(self, fraction: float) -> None:
        """Record progress and move the bar (in whole percent, so a long run redraws at most 100 times)."""
        if self.closed:
            return
        self.fraction = min(max(float(fraction), 0.0), 1.0)
        self._move_to(float(int(self.fraction * 100)))

    def close(self, done: bool = True) -> None:
        if done and not self.closed:
            self.fraction = 1.0
        super().close(done)

    def __enter__(self) -> ProgressBar:
        return self


class SweepBar(_Bar):
    """Callable with a sweep's :class:`~wss.studies.sweep.SweepProgress`: points done of all, with the cached
    and failed ones after the ETA."""

    def __init__(self, label: str = "sweep", stream: TextIO | None = None, *, enabled: bool | None = None,
                 delay_s: float = 0.0, notebook: bool | None = None, min_interval_s: float = 0.1):
        super().__init__(label, stream, enabled, delay_s, 0, "point", notebook, min_interval_s)

    def __call__(self, p: Any) -> None:
        if self.closed or not self.enabled:
            return
        bar = self._bar()
        if bar.total != p.total:
            bar.total = p.total
        extra = [f"{p.cached} cached"] if p.cached else []
        extra += [f"{p.errors} error{'s' if p.errors != 1 else ''}"] if p.errors else []
        if extra:
            bar.set_postfix_str(", ".join(extra), refresh=False)
        self._move_to(p.done)

    def close(self, done: bool = True) -> None:
        """Finish the bar where the points left it: every point reports itself, so nothing is filled in."""
        super().close(done=False)

    def __enter__(self) -> SweepBar:
        return self


def progress_bar(label: str, quiet: bool = False, stream: TextIO | None = None, **kwargs: Any) -> ProgressBar:
    """The bar the CLI uses: silent with ``--quiet`` or when stderr is not a terminal."""
    return ProgressBar(label, stream, enabled=False if quiet else None, **kwargs)
