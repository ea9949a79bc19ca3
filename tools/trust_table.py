"""Where to trust wss: the regimes the published measured runs cover, their errors, and what is extrapolation.

Usage::

    python tools/trust_table.py        # print the table (docs/validation.md holds the same, generated)

Each published measured run (``scenarios/validation/measured_*.yaml``) is one regime: model size,
sequences per wafer, chip, software release and input kind.  Its error is the one ``wss reproduce``
gives; it is *calibrated* if a parameter was fitted to it (``calibration: calibrated on``), *validated*
if it was held out of the fit.  Then every shipped scenario (``scenarios/*.yaml``) is set against those
regimes: whatever it asks beyond them (a larger model, more wafers, sparsity, a chip or release no row
ran on) is an *extrapolation*, and says so.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The last refit's record (tools/calibrate.py --write): each calibrated row's leave-one-out error.
RECORD = ROOT / "docs" / "calibration.json"


def leave_one_out(record: Path = RECORD) -> dict[str, str]:
    """Case name -> its leave-one-out error as the table prints it (``*``: its release's only row, predicted
    by the newest release); rows the last refit did not fit have none."""
    if not record.exists():
        return {}
    rows = json.loads(record.read_text())["leave_one_out"]
    return {name: f"{r['error']:+.1%}" + ("*" if r["newest_release"] else "") for name, r in rows.items()}


def _params(scenario: Any) -> int:
    """Streamed weights of the scenario's model (the plan's count: biases and norm gains excluded)."""
    from wss.model.workload import StreamedKernel, expand_model

    ops = expand_model(scenario.workload.model, scenario.workload.sparsity, scenario.seq_len)
    return sum(op.params for op in ops if isinstance(op, StreamedKernel))


def _size(n: float) -> str:
    if n >= 1e12:
        return f"{n / 1e12:.3g}T"
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"


def regime(scenario: Any) -> dict[str, Any]:
    """The facts of a run that decide which measured rows speak for it."""
    hw, tr = scenario.hardware, scenario.training
    return {
        "params": _params(scenario),
        "per_wafer": tr.global_batch / hw.wafers,
        "wafers": hw.wafers,
        "seq": scenario.seq_len,
        "chip": hw.wafer.name,
        "release": hw.runtime.release or hw.runtime.name,
        "input": scenario.workload.model.input,
        "pipeline": hw.input_pipeline.kind,  # how the input workers prepare it, where the scenario says
        "sparse": bool(scenario.workload.sparsity),
    }


def _role(outcome: Any) -> str:
    return {"calibrated on": "calibrated", "held out": "validated"}.get(outcome.case.spec.calibration or "", "-")


def _input(r: dict[str, Any]) -> str:
    """The input column: the model's input, and the input pipeline's kind where the row states one."""
    return f"{r['input']}, {r['pipeline'].replace('_', ' ')}" if r.get("pipeline") else str(r["input"])


def model_name(figure: str) -> str:
    """The model as a case's figure names it, as the source does: the figure up to its first comma outside
    parentheses ("DiT-2B (patch 2x2, 256 tokens), batch 1100, ..." -> "DiT-2B (patch 2x2, 256 tokens)")."""
    depth = 0
    for i, ch in enumerate(figure):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            return figure[:i]
    return figure


def measured_row(o: Any, loo: dict[str, str]) -> str:
    """A measured outcome's row of the table (with its leave-one-out error from ``loo`` if calibrated)."""
    (scenario,) = o.case.scenarios.values()
    r = regime(scenario)
    tol = o.case.spec.tolerance or 0.0
    within = "within" if abs(o.error) <= tol else "outside"
    model = model_name(o.case.spec.figure)
    return (f"| {_label(o.case.name)} | {model} | {_size(r['params'])} | {r['seq']} | "
            f"{r['per_wafer']:g} | {r['wafers']} | {r['chip']} | {r['release']} | {_input(r)} | "
            f"{o.error:+.1%} | {loo.get(o.case.name, '-')} | ±{tol:.0%} ({within}) | {_role(o)} |")


TABLE_HEAD = ["| row | model | params | seq | sequences per wafer | wafers | chip | release | input | error | "
              "leave-one-out | tolerance | status |", "|" + "---|" * 13]


def measured_table(outcomes: Sequence[Any], loo: dict[str, str] | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The Markdown table of the measured rows (with each calibrated row's leave-one-out error from ``loo``),
    and their regimes."""
    loo = leave_one_out() if loo is None else loo
    ordered = sorted(outcomes, key=lambda o: _row_key(o.case.name))
    return "\n".join([*TABLE_HEAD, *(measured_row(o, loo) for o in ordered)]), [case_regime(o.case) for o in ordered]


def case_regime(case: Any) -> dict[str, Any]:
    """The regime of a measured case's one scenario (no run needed)."""
    (scenario,) = case.scenarios.values()
    return regime(scenario)


def beyond(r: dict[str, Any], measured: Sequence[dict[str, Any]]) -> list[str]:
    """What a run asks beyond every measured row: the extrapolations its figures rest on."""
    out = []
    top = max(m["params"] for m in measured)
    if r["params"] > 1.5 * top:
        out.append(f"model {_size(r['params'])} > largest measured {_size(top)}")
    most = max(m["wafers"] for m in measured)
    if r["wafers"] > most:
        out.append(f"{r['wafers']} wafers > {most} measured")
    if r["sparse"] and not any(m["sparse"] for m in measured):
        out.append("sparse weights (no measured sparse run)")
    same_chip = [m for m in measured if m["chip"] == r["chip"]]
    if not same_chip:
        out.append(f"chip {r['chip']} (no measured run)")
    elif r["params"] > 1.5 * max(m["params"] for m in same_chip):
        out.append(f"model size on {r['chip']} (largest measured there {_size(max(m['params'] for m in same_chip))})")
    if not any(m["release"] == r["release"] for m in measured):
        out.append(f"release {r['release']} (no measured run)")
    if not any(m["input"] == r["input"] for m in measured):
        out.append(f"input {r['input']} (no measured run)")
    return out


def shipped_table(measured: Sequence[dict[str, Any]], paths: Sequence[Path]) -> str:
    """The shipped scenarios against the measured regimes."""
    from wss.model.scenario import load_scenario

    out = ["| scenario | params | sequences per wafer | wafers | chip | release | status |", "|" + "---|" * 7]
    for path in paths:
        r = regime(load_scenario(path))
        why = beyond(r, measured)
        status = "extrapolation: " + "; ".join(why) if why else "within the measured regimes"
        out.append(f"| `{path.name}` | {_size(r['params'])} | {r['per_wafer']:g} | {r['wafers']} | {r['chip']} | "
                   f"{r['release']} | {status} |")
    return "\n".join(out)


INTRO = """\
## Where to trust wss

*Generated by `python tools/trust_table.py` (through `tools/gen_validation_doc.py`).*

Each published measured run is a regime: model size, sequences per wafer, chip, software release
(`hardware.runtime`: `cerebras-ws` is the newest family, R2.x; `cerebras-ws-r1.7`, `-r1.8`, `-r1.9` the
early ones) and input kind.  **calibrated**: a parameter was fitted to the row (its error says how
well the fitted mechanisms can match it, not how well wss predicts); **validated**: held out of the
fit, so its error is a prediction's.  *leave-one-out*: a calibrated row's error when the last refit
(`python tools/refit.py`; docs/calibration.json) was run without it, a prediction too.  A release
parameter set by its release's only row (R1.7, R1.8, R1.9) has no held-out check: its row's figure,
marked `*`, is the newest release's prediction.  An input pipeline's cost set by one row (M4, M12,
M14 b8k) has none (`-`); the input column names the row's pipeline where it states one.  M6's sequence
length is not in its log: the row runs at 4,096 and calibrate.py shows 2,048 beside it.
"""


def render(outcomes: Sequence[Any], scenarios: Sequence[Path] | None = None) -> str:
    """The whole section: the measured regimes, then the shipped scenarios set against them."""
    measured = [o for o in outcomes if o.case.name.startswith("measured_")]
    table, regimes = measured_table(measured)
    return frame(table.splitlines()[len(TABLE_HEAD):], regimes, scenarios)


def frame(rows: Sequence[str], regimes: Sequence[dict[str, Any]], scenarios: Sequence[Path] | None = None) -> str:
    """The section around the measured rows' table lines (:func:`measured_row`, in row order): what does not
    depend on the outcomes but on the cases' regimes, so a test can check it without running a case."""
    paths = sorted((ROOT / "scenarios").glob("*.yaml")) if scenarios is None else scenarios
    return (INTRO + "\n" + "\n".join([*TABLE_HEAD, *rows]) + "\n\n**Shipped scenarios.**  What each asks beyond "
            "every measured row (a model over 1.5x the largest measured, on any chip or on its own; more wafers; "
            "sparsity; a chip, release or input no row ran on) is an extrapolation: the mechanisms are modelled, but "
            "no measured run checks them there.\n\n" + shipped_table(regimes, paths) + "\n")


def _label(name: str) -> str:
    """``measured_m14_bert_base_sst2_b1k`` -> ``M14 b1k``; a run the measurement table does not number
    (``measured_fc_mnist_floor_cs2``) -> its name between ``measured_`` and the system (``FC-MNIST-FLOOR``)."""
    parts = name.split("_")
    if not re.fullmatch(r"m\d+", parts[1]):
        return "-".join(parts[1:-1]).upper()
    return parts[1].upper() + (f" {parts[-1]}" if parts[1] in ("m14", "m15") else "")


def _row_key(name: str) -> tuple[int, str]:
    """Numbered rows in their order, then the others (the runs the measurement table does not number)."""
    digits = name.split("_")[1][1:]
    return (int(digits) if digits.isdigit() else 10**6, name)


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from wss.studies.validation import load_cases, run_case

    cases = load_cases(sorted((ROOT / "scenarios" / "validation").glob("measured_*.yaml")))
    print(render([run_case(c) for c in cases]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
