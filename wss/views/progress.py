"""A plain-text progress bar on stderr for runs longer than a couple of seconds.

>>> with ProgressBar("simulate") as bar:
...     simulate_detailed(scenario, progress=bar)   # the bar is called with the fraction done

It stays silent when the stream is not a terminal (pipes, CI logs, pytest
capture) or when ``enabled=False`` (``--quiet``), and draws nothing until
``delay_s`` has passed, so short runs never flash a bar.  Updates are ``\\r``
redraws of one line, at most every ``interval_s``; :meth:`close` finishes the
line.  No dependency beyond the standard library.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["ProgressBar", "progress_bar"]


class ProgressBar:
    """Callable with the fraction done (0..1); draws ``label [#####.....]  42%  3.1 s``.

    Parameters
    ----------
    label
        Text before the bar.
    stream
        Where to draw (default ``sys.stderr``).
    enabled
        False silences the bar; None (default) draws only when ``stream`` is a terminal.
    delay_s
        Nothing is drawn before this many seconds have passed.
    interval_s
        Minimum seconds between redraws.
    width
        Characters of the bar itself.
    clock
        Monotonic clock in seconds (injectable for tests).
    """

    def __init__(
        self,
        label: str = "",
        stream: TextIO | None = None,
        *,
        enabled: bool | None = None,
        delay_s: float = 2.0,
        interval_s: float = 0.1,
        width: int = 30,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty()) if callable(isatty) else False
        self.enabled = enabled
        self.delay_s = delay_s
        self.interval_s = interval_s
        self.width = max(int(width), 1)
        self.clock = clock
        self.start = clock()
        self.fraction = 0.0
        self.drawn = False
        self._last_draw = -float("inf")
        self._last_len = 0
        self.closed = False

    def __call__(self, fraction: float) -> None:
        """Record progress; redraw if enabled, past the delay and the redraw interval."""
        if self.closed:
            return
        self.fraction = min(max(float(fraction), 0.0), 1.0)
        if not self.enabled:
            return
        now = self.clock()
        if now - self.start < self.delay_s or now - self._last_draw < self.interval_s:
            return
        self._draw(now)

    def render(self, now: float | None = None) -> str:
        """The line as it would be drawn now (without ``\\r``)."""
        now = self.clock() if now is None else now
        filled = round(self.fraction * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        head = f"{self.label} " if self.label else ""
        return f"{head}[{bar}] {self.fraction:4.0%}  {now - self.start:.1f} s"

    def _draw(self, now: float) -> None:
        line = self.render(now)
        pad = " " * max(self._last_len - len(line), 0)  # wipe a longer previous line
        self.stream.write("\r" + line + pad)
        self.stream.flush()
        self._last_len = len(line)
        self._last_draw = now
        self.drawn = True

    def close(self, done: bool = True) -> None:
        """Finish: if anything was drawn, draw the final state and end the line."""
        if self.closed:
            return
        if done:
            self.fraction = 1.0
        if self.drawn:
            self._draw(self.clock())
            self.stream.write("\n")
            self.stream.flush()
        self.closed = True

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(done=exc_type is None)


def progress_bar(label: str, quiet: bool = False, stream: TextIO | None = None, **kwargs) -> ProgressBar:
    """The bar the CLI uses: silent with ``--quiet`` or when stderr is not a terminal."""
    return ProgressBar(label, stream, enabled=False if quiet else None, **kwargs)
