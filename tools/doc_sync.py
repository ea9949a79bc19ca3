"""What every docs generator in tools/ does with the page it renders: write it, or check it is current.

``python tools/gen_X.py`` writes the page atomically; ``--check`` exits 1 (saying which command refreshes
it) when the committed page differs from what the generator renders now, so a test or CI can keep it in sync.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["write_or_check"]


def write_or_check(doc: Path, text: str, command: str, check: bool) -> int:
    """Write ``text`` to ``doc``, or with ``check`` compare them; return the exit code."""
    from wss.files import atomic_write_text

    if check:
        current = doc.read_text(encoding="utf-8") if doc.exists() else ""
        if current != text:
            print(f"{doc} is out of date: run {command}", file=sys.stderr)
            return 1
        print(f"{doc} is up to date")
        return 0
    atomic_write_text(doc, text)
    print(f"wrote {doc}")
    return 0
