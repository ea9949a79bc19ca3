"""The one way wss draws a text table: columns two spaces apart, a rule under the header, no trailing spaces.

Every command that prints a table (``check``, ``reproduce``, ``report``, ``sweep``, ``size``, ``diff``)
goes through :func:`text_table`, so they all read alike and a change of style is made once.

>>> print("\\n".join(text_table(["case", "error"], [["m1", "-3.0%"], ["weight_crossings", "+0.0%"]], "<>")))
case              error
----------------  -----
m1                -3.0%
weight_crossings  +0.0%
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["text_table"]


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str | Sequence[str] = "<",
               rule: bool = True) -> list[str]:
    """The lines of a table of strings.

    Parameters
    ----------
    header
        Column titles (an empty title keeps its column).
    rows
        One sequence of cell strings per row, as many as ``header``.
    align
        ``"<"`` (left) or ``">"`` (right) for every column, or one per column (a sequence, or a string such as
        ``"<>>"``); the first column is usually left-aligned text and the numbers right-aligned.
    rule
        A line of dashes under the header.
    """
    aligns = [align] * len(header) if isinstance(align, str) and len(align) == 1 else list(align)
    if len(aligns) != len(header) or any(len(r) != len(header) for r in rows):
        raise ValueError("every row and the alignments need one entry per column")
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, aligns, widths)).rstrip()

    out = [line(header)]
    if rule:
        out.append("  ".join(("-" if h else " ") * w for h, w in zip(header, widths)).rstrip())  # none for no title
    out += [line(r) for r in rows]
    return out
