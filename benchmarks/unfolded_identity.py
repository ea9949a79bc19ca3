"""Byte-identity of the unfolded runs' Results against a saved copy: for speed work on the simulator.

A change meant to make a run cheaper must not move any figure.  This saves (``--save``) or checks
(default) ``wss.simulate(s).to_json()`` for:

* every case of ``bench_unfolded.py`` at 192 wafers (folded, unfolded uniform, a straggler, uneven
  shards, a slow edge, a node down);
* GPT-3 175B and Cerebras-GPT 13B on 9, 13, 17 and 63 wafers (uneven shards);
* all shipped scenarios (``scenarios/*.yaml``) as they are.

Run: ``python benchmarks/unfolded_identity.py --save DIR`` once before a change, then
``python benchmarks/unfolded_identity.py DIR`` after; it names every case whose JSON differs and exits 1 if any does.
``--only SUBSTR`` limits the cases to those whose name contains SUBSTR.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_unfolded import _cases

import wss

ROOT = Path(__file__).resolve().parent.parent
UNEVEN = [9, 13, 17, 63]


def cases() -> list[tuple[str, Path, list[str]]]:
    """(file stem, scenario, overrides) for every case checked."""
    gpt3 = ROOT / "scenarios" / "gpt3_175b.yaml"
    out = [(f"bench_{label.replace(', ', '_').replace(' ', '-')}", gpt3, overrides)
           for label, overrides in _cases(192, False) if label != "folded, every block"]
    for model in ("gpt3_175b", "cerebras_gpt_13b"):
        out += [(f"{model}_{n}w", ROOT / "scenarios" / f"{model}.yaml", [f"hardware.wafers={n}"]) for n in UNEVEN]
    out += [(f"shipped_{p.stem}", p, []) for p in sorted((ROOT / "scenarios").glob("*.yaml"))]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="where the saved Results are (or go, with --save)")
    ap.add_argument("--save", action="store_true", help="write the Results instead of checking them")
    ap.add_argument("--only", default="", help="only the cases whose name contains this")
    args = ap.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    bad = 0
    for stem, path, overrides in cases():
        if args.only not in stem:
            continue
        text = wss.simulate(wss.load_scenario(path, overrides)).to_json()
        saved = args.dir / f"{stem}.json"
        if args.save:
            saved.write_text(text)
            print(f"saved {stem}", flush=True)
        elif saved.read_text() != text:
            bad += 1
            print(f"DIFFERS {stem}", flush=True)
        else:
            print(f"ok {stem}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
