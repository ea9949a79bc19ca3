"""tools/calibrate.py: a parameter key with ``@WAFER`` moves only the rows run on that wafer (one value per chip
generation), as the team's per-chip efficiency experiment needs; plain keys move every row."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from fidelity_helpers import load_tool

import wss

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def calibrate():
    return load_tool("calibrate")


def test_wafer_keys_apply_only_to_their_wafer(calibrate):
    cs2 = wss.load_scenario(REPO / "scenarios" / "gpt3_175b.yaml")
    cs3 = wss.load_scenario(REPO / "scenarios" / "cs3_gpt3_13b.yaml")
    assert (cs2.hardware.wafer.name, cs3.hardware.wafer.name) == ("wse2", "wse3")
    values = {"hardware.wafer.kernel_efficiency@wse2": 0.4, "hardware.wafer.kernel_efficiency@wse3": 0.8,
              "hardware.runtime.step_overhead_s": 0.01}
    assert calibrate._for_case(values, cs2) == {"hardware.wafer.kernel_efficiency": 0.4,
                                                "hardware.runtime.step_overhead_s": 0.01}
    assert calibrate._for_case(values, cs3) == {"hardware.wafer.kernel_efficiency": 0.8,
                                                "hardware.runtime.step_overhead_s": 0.01}
    assert calibrate._shipped(cs3, "hardware.wafer.kernel_efficiency@wse3") == cs3.hardware.wafer.kernel_efficiency


def test_the_errors_follow_each_rows_own_value(calibrate):
    """At the shipped value for one wafer and a lower one for the other, only the other's rows slow down."""
    cases = [c for c in calibrate.load_cases(calibrate.CASES) if c.name.startswith(("measured_m1_", "measured_m6_"))]
    base = calibrate.errors_at(cases, {}, analytic=True)
    shipped = calibrate._shipped(calibrate._one(cases[0]), "hardware.wafer.kernel_efficiency")
    moved = calibrate.errors_at(cases, {"hardware.wafer.kernel_efficiency@wse3": shipped / 2}, analytic=True)
    m1, m6 = (next(c.name for c in cases if c.name.startswith(p)) for p in ("measured_m1_", "measured_m6_"))
    assert moved[m1] == base[m1]  # CS-2 row untouched
    assert moved[m6] < base[m6]  # CS-3 row slower


def test_an_unknown_parameter_is_refused(calibrate, capsys):
    assert calibrate.main(["--params", "hardware.wafer.no_such_field@wse2", "--analytic"]) == 2
    assert "unknown" in capsys.readouterr().err


def test_more_parameters_than_half_the_rows_are_refused(calibrate, capsys):
    keys = "hardware.runtime.step_overhead_s,hardware.wafer.kernel_efficiency@wse2"
    assert calibrate.main(["--on", "m7,m8,m10", "--params", keys, "--analytic"]) == 2
    assert "at most half" in capsys.readouterr().err
    assert calibrate.too_many(keys.split(","), 4) is None


def test_a_release_parameter_is_fitted_on_its_releases_rows_only(calibrate):
    cases = calibrate.load_cases(calibrate.CASES)
    rows = [c for c in cases if calibrate.row_label(c) in ("M7", "M8", "M2", "M9")]
    gs = calibrate.groups(["hardware.wafer.kernel_efficiency@wse2", "hardware.runtime.compute_efficiency@R1.8",
                           "hardware.runtime.compute_efficiency@R1.7"], rows)
    by_release = {g.release: sorted(calibrate.row_label(c) for c in g.rows) for g in gs}
    assert by_release == {None: ["M7", "M8"], "r1.7": ["M9"], "r1.8": ["M2"]}
    m2 = next(c for c in rows if calibrate.row_label(c) == "M2")
    m8 = next(c for c in rows if calibrate.row_label(c) == "M8")
    values = {"hardware.runtime.compute_efficiency@R1.8": 0.5}
    assert calibrate._for_case(values, calibrate._one(m2)) == {"hardware.runtime.compute_efficiency": 0.5}
    assert calibrate._for_case(values, calibrate._one(m8)) == {}


def test_the_only_row_of_a_release_is_predicted_by_the_newest_release(calibrate):
    """Leave-one-out of a release's only row cannot refit its factor: the prediction is the newest release's."""
    cases = calibrate.load_cases(calibrate.CASES)
    m2 = [c for c in cases if calibrate.row_label(c) == "M2"]
    (g,) = [g for g in calibrate.groups(["hardware.runtime.compute_efficiency@R1.8"], m2) if g.release]
    values = {"hardware.runtime.compute_efficiency@R1.8": 0.6}
    loo = calibrate.leave_one_out([g], values, True, cases)
    error, newest = loo[m2[0].name]
    assert newest
    assert error == pytest.approx(calibrate.error_of(m2[0], {"hardware.runtime.compute_efficiency@R1.8": 1.0}, True))


def test_write_puts_each_value_in_its_preset(calibrate, tmp_path, monkeypatch):
    import shutil

    for kind in ("wafer", "runtime"):
        shutil.copytree(REPO / "configs" / kind, tmp_path / "configs" / kind)
    monkeypatch.setattr(calibrate, "ROOT", tmp_path)
    calibrate.write({"hardware.runtime.step_overhead_s": 0.05, "hardware.runtime.compute_efficiency@R1.8": 0.61,
                     "hardware.wafer.kernel_efficiency@wse3": 0.33})
    runtime = tmp_path / "configs" / "runtime"
    for name in ("cerebras-ws", "cerebras-ws-r1.7", "cerebras-ws-r1.8", "cerebras-ws-r1.9"):
        assert "step_overhead_s: 0.05 " in (runtime / f"{name}.yaml").read_text()
    assert "compute_efficiency: 0.61 " in (runtime / "cerebras-ws-r1.8.yaml").read_text()
    assert "compute_efficiency: 0.61" not in (runtime / "cerebras-ws-r1.7.yaml").read_text()
    assert "step_overhead_s: 0.0\n" in (runtime / "ideal.yaml").read_text()  # no release: untouched
    assert "kernel_efficiency: 0.33 " in (tmp_path / "configs" / "wafer" / "wse3.yaml").read_text()


def test_an_input_pipelines_cost_moves_only_the_rows_that_pay_it(calibrate):
    """The masked-token cost moves the ESM-2 rows (the one it was fitted on and the one that checks it), not a
    row without a pipeline nor the image row; the runtime's parameters are fitted on the rows without one."""
    cases = {c.name.split("_")[1]: c for c in calibrate.load_cases(calibrate.CASES)}
    key = "hardware.input_pipeline.prepare_s_per_token"
    values = {key: 1e-6, "hardware.runtime.step_overhead_s": 0.1}
    assert calibrate._for_case(values, calibrate._one(cases["m4"])) == {key: 1e-6,
                                                                         "hardware.runtime.step_overhead_s": 0.1}
    assert key in calibrate._for_case(values, calibrate._one(cases["m5"]))
    for row in ("m1", "m12"):
        assert key not in calibrate._for_case(values, calibrate._one(cases[row]))
    gs = calibrate.groups(["hardware.runtime.step_overhead_s", key], [cases["m4"], cases["m1"]])
    assert [[c.name for c in g.rows] for g in gs] == [[cases["m1"].name], [cases["m4"].name]]
    assert [[p.key for p in g.params] for g in gs] == [["hardware.runtime.step_overhead_s"], [key]]


def test_write_is_the_refit_and_refuses_a_hypothesis(calibrate, capsys):
    """--write puts values into configs/: only the default fit on the rows marked 'calibrated on' may."""
    assert calibrate.main(["--write", "--on", "m7,m8,m10,m11"]) == 2
    assert "--write is the refit" in capsys.readouterr().err
    assert calibrate.main(["--write", "--at"]) == 2


def test_write_refuses_a_value_no_row_fitted(calibrate):
    with pytest.raises(ValueError, match="no row fitted it"):
        calibrate.write({"hardware.runtime.compute_efficiency@R1.8": float("nan")})


def test_an_input_cost_is_written_to_the_preset_of_its_rows_kind(calibrate, tmp_path, monkeypatch):
    import shutil

    shutil.copytree(REPO / "configs" / "input_pipeline", tmp_path / "configs" / "input_pipeline")
    monkeypatch.setattr(calibrate, "ROOT", tmp_path)
    cases = {c.name.split("_")[1]: c for c in calibrate.load_cases(calibrate.CASES)}
    calibrate.write({"hardware.input_pipeline.prepare_s_per_token": 2.5e-6}, [cases["m4"], cases["m7"]])
    folder = tmp_path / "configs" / "input_pipeline"
    assert "prepare_s_per_token: 2.5e-06" in (folder / "masked-tokens.yaml").read_text()
    assert "prepare_s_per_token: 2.5e-06" not in (folder / "pretokenised.yaml").read_text()


def test_the_record_names_the_rows_that_set_each_value(calibrate):
    cases = {calibrate.row_label(c): c for c in calibrate.load_cases(calibrate.CASES)}
    rows = [cases[r] for r in ("M7", "M11", "M2")]
    keys = ["hardware.wafer.kernel_efficiency@wse2", "hardware.wafer.kernel_efficiency@wse3",
            "hardware.runtime.compute_efficiency@R1.8"]
    gs = calibrate.groups(keys, rows)
    values = dict(zip(keys, (0.5, 0.4, 0.8)))
    rec = calibrate.record(values, dict(zip(keys, (0.4, 0.3, 0.7))), gs,
                           {cases["M2"].name: (math.log(1.1), True)})
    assert {k: p["rows"] for k, p in rec["parameters"].items()} == dict(zip(keys, (["M7"], ["M11"], ["M2"])))
    assert rec["parameters"][keys[0]]["before"] == 0.4 and rec["parameters"][keys[0]]["after"] == 0.5
    assert rec["leave_one_out"] == {cases["M2"].name: {"error": 0.1, "newest_release": True}}


def test_fidelity_tables_write_keeps_the_explanations_written_by_hand():
    tables = load_tool("fidelity_tables")
    doc = "| scenario | a |\n| bert_large | 1 ms | 1 ms | +0.10% | compute | runtime overlap | +0.40% |\n"
    row = "| bert_large | 2 ms | 2 ms | +0.20% | stream | - | +0.30% |"
    assert tables.write_doc(doc, [row]).split("\n")[1] == (
        "| bert_large | 2 ms | 2 ms | +0.20% | stream | runtime overlap | +0.30% |")
    helpers = 'CROSS_CHECK = {\n    "bert_large": ({}, 0.10, "runtime overlap"),\n}\nFULL_SIZE = {"gpt_1t": -0.05}\n'
    full = "| gpt_1t, full size (`WSS_SLOW=1`) | 1 s | 1 s | -1.50% | compute | - | |"
    out = tables.write_helpers(helpers, [row, full])
    assert '"bert_large": ({}, 0.20, "runtime overlap")' in out and '"gpt_1t": -1.50' in out


def test_a_row_whose_costed_pipeline_never_binds_stays_with_the_runtimes_rows(calibrate):
    """BERT-base and BERT-large on SST-2 state the same tokenising pipeline: at 4k it paces BERT-base (that row
    fits only the pipeline's cost) but not BERT-large, nor BERT-base at 512, which say as much about the
    runtime and the wafer as rows without a pipeline and stay in the base group."""
    cases = {calibrate.row_label(c): c for c in calibrate.load_cases(calibrate.CASES)}
    paced, slower, small = cases["M14 b4k"], cases["M15 b1k"], cases["M14 b512"]
    assert calibrate._paced_by_inputs(calibrate._one(paced))
    assert not calibrate._paced_by_inputs(calibrate._one(slower))
    assert not calibrate._paced_by_inputs(calibrate._one(small))
    key = "hardware.input_pipeline.prepare_s_per_sample"
    gs = calibrate.groups(["hardware.runtime.step_overhead_s", key], [paced, slower, small])
    assert [sorted(c.name for c in g.rows) for g in gs] == [sorted([slower.name, small.name]),
                                                             sorted([paced.name, slower.name, small.name])]


@pytest.mark.parametrize("pair, says", [
    ("hardware.runtime.kernel_switch_s", "expected KEY=VALUE"),
    ("hardware.runtime.no_such_cost=1e-3", "unknown"),
    ("hardware.runtime.kernel_switch_s=fast", "not a number"),
    ("hardware.runtime.kernel_switch_s=-1e-3", "at least 0"),
    ("hardware.runtime.step_overhead_s=0.01", "also in --params"),
])
def test_a_held_value_that_cannot_be_taken_is_refused(calibrate, capsys, pair, says):
    assert calibrate.main(["--hold", pair, "--on", "m7,m8,m10,m11"]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["--start", "hardware.runtime.kernel_switch_s=5e-4"], "not in --params"),
    (["--start", "hardware.runtime.step_overhead_s"], "expected KEY=VALUE"),
    (["--write", "--start", "hardware.runtime.step_overhead_s=0.01"], "ships at zero"),
    (["--write", "--no-loo"], "--no-loo"),
])
def test_a_start_that_cannot_be_taken_is_refused(calibrate, capsys, argv, says):
    assert calibrate.main(argv) == 2
    assert says in capsys.readouterr().err


def test_the_record_keeps_where_a_search_started(calibrate):
    """The first refit of a cost that shipped at zero starts from ``--start``: its record says where, beside the value
    before and after; the other parameters' records are as before."""
    key, other = "hardware.runtime.update_overhead_s", "hardware.runtime.step_overhead_s"
    rec = calibrate.record({key: 1e-3, other: 0.015}, {key: 0.0, other: 0.052}, [], {}, {key: 9e-4})
    assert rec["parameters"][key] == {"before": 0.0, "started_at": 9e-4, "after": 1e-3, "rows": []}
    assert rec["parameters"][other] == {"before": 0.052, "after": 0.015, "rows": []}


def test_the_search_starts_where_start_says(calibrate, monkeypatch):
    """``--start`` reaches every group's search (a zero cost's search cannot leave zero: no slope there)."""
    seen = []

    def fake_fit_group(group, fixed, analytic, everything, log=None, start=None, xtol=1e-3):
        seen.append(dict(start or {}))
        return {p.key: (start or {}).get(p.key, 0.0) for p in group.params}

    monkeypatch.setattr(calibrate, "fit_group", fake_fit_group)
    cases = calibrate.load_cases(calibrate.CASES)
    rows = [c for c in cases if calibrate.row_label(c) in ("M7", "M8", "M10", "M9")]
    keys = ["hardware.runtime.kernel_switch_s", "hardware.runtime.compute_efficiency@R1.7"]
    gs = calibrate.groups(keys, rows)
    values = calibrate.fit(gs, True, cases, held={"hardware.wafer.nonweight_efficiency": 0.2},
                           start={"hardware.runtime.kernel_switch_s": 5e-4})
    assert seen == [{"hardware.runtime.kernel_switch_s": 5e-4}] * len(gs)
    assert values == {"hardware.wafer.nonweight_efficiency": 0.2, "hardware.runtime.kernel_switch_s": 5e-4,
                      "hardware.runtime.compute_efficiency@R1.7": 0.0}


def test_write_refuses_a_held_value(calibrate, capsys):
    assert calibrate.main(["--write", "--hold", "hardware.runtime.kernel_switch_s=1e-3"]) == 2
    assert "--hold" in capsys.readouterr().err


def test_a_held_cost_applies_to_every_row_it_reaches(calibrate, capsys, monkeypatch):
    """``--at --hold``: the report runs each row with the held value (here one row, so the test is quick); the fit
    carries held values through as fixed ones (:func:`fit` returns them with the fitted values)."""
    monkeypatch.setattr(calibrate, "CASES", [REPO / "scenarios" / "validation" / "measured_m1_gpt2_small.yaml"])

    def model_rate(argv):
        assert calibrate.main(argv) == 0
        (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("M1 ")]
        words = row.split()
        error = next(i for i, w in enumerate(words) if w.endswith("%"))  # the model's rate stands before its error
        return float(words[error - 1])

    shipped = model_rate(["--at"])
    slowed = model_rate(["--at", "--hold", "hardware.runtime.step_overhead_s=0.5"])
    other_chip = model_rate(["--at", "--hold", "hardware.runtime.step_overhead_s@wse3=0.5"])
    assert slowed < shipped / 2  # half a second more per step of about 0.19 s
    assert other_chip == shipped  # a CS-3 value leaves a CS-2 row alone
    assert calibrate.fit([], True, [], held={"hardware.runtime.kernel_switch_s": 1e-3}) == {
        "hardware.runtime.kernel_switch_s": 1e-3}


def test_the_search_stays_within_the_range_a_field_accepts(calibrate, monkeypatch):
    """A fit whose best value lies outside a field's range stops at its bound instead of trying a value the
    scenario would refuse (the non-weight efficiency accepts 1e-3 to 1)."""
    key = "hardware.wafer.nonweight_efficiency"
    cases = calibrate.load_cases(calibrate.CASES)
    assert calibrate._limits(key, calibrate._one(cases[0])) == (1e-3, 1.0)
    assert calibrate._limits("hardware.runtime.kernel_switch_s", calibrate._one(cases[0]))[0] == 0.0
    tried = []

    def wants_less(case, values, analytic, reading=None):  # every row would fit best at 1e-6
        tried.append(values[key])
        return math.log(values[key] / 1e-6)

    monkeypatch.setattr(calibrate, "error_of", wants_less)
    rows = tuple(c for c in cases if calibrate.row_label(c) in ("M7", "M8"))
    group = calibrate.Group((calibrate.Parameter(key, "logit"),), rows, None)
    assert calibrate.fit_group(group, {}, True, cases) == {key: 1e-3}
    assert min(tried) >= 1e-3


def test_no_loo_skips_the_leave_one_out_refits(calibrate, capsys, monkeypatch):
    monkeypatch.setattr(calibrate, "CASES", [REPO / "scenarios" / "validation" / f"measured_{n}.yaml"
                                             for n in ("m7_gpt2_small_r23", "m8_gptj_6b_2xcs2_r23")])
    monkeypatch.setattr(calibrate, "fit", lambda gs, analytic, everything, log=None, held=None, start=None:
                        {"hardware.runtime.step_overhead_s": 0.047})

    def no_refits(*args, **kwargs):
        raise AssertionError("--no-loo ran the leave-one-out refits")

    monkeypatch.setattr(calibrate, "leave_one_out", no_refits)
    assert calibrate.main(["--no-loo", "--on", "m7,m8", "--params", "hardware.runtime.step_overhead_s"]) == 0
    out = capsys.readouterr().out
    assert "M7 " in out and "M8 " in out and "leave out" not in out


def test_the_activation_servers_rate_slows_only_the_rows_that_offload_and_is_written_to_their_preset(
        calibrate, capsys, monkeypatch):
    """``hardware.activation_store.bandwidth_Bps`` is the cluster presets' activation servers' rate: held slower than
    shipped, DiT-2B on one CS-2 (M10), which offloads about 35 GB of block inputs a step, out and back, slows, while
    GPT-2 small (M1) keeps every activation on the wafer and does not move; a fitted rate goes to that preset."""
    monkeypatch.setattr(calibrate, "CASES", [REPO / "scenarios" / "validation" / f"measured_{name}.yaml"
                                             for name in ("m1_gpt2_small", "m10_dit_2b_cs2")])

    def rates(argv):
        assert calibrate.main(["--at", "--analytic", *argv]) == 0
        out = {}
        for line in capsys.readouterr().out.splitlines():
            words = line.split()
            if words and words[0] in ("M1", "M10"):
                error = next(i for i, w in enumerate(words) if w.endswith("%"))
                out[words[0]] = float(words[error - 1])
        return out

    shipped = rates([])
    limited = rates(["--hold", "hardware.activation_store.bandwidth_Bps=5e9"])
    assert limited["M1"] == shipped["M1"]
    assert limited["M10"] < 0.85 * shipped["M10"]
    rows = calibrate.load_cases(calibrate.CASES)
    assert [p.name for p in calibrate._targets("hardware.activation_store.bandwidth_Bps", rows)] == [
        "activation-servers.yaml"]


def test_a_parameter_that_ships_unset_is_fitted_only_from_a_start(calibrate, capsys):
    """A cost shipped at zero (or an unlimited store's bandwidth) gives a log-scale search no slope: refused without
    ``--start``, with what to do."""
    argv = ["--analytic", "--no-loo", "--on", "m10,m11", "--params", "hardware.runtime.kernel_switch_s"]
    assert calibrate.main(argv) == 2
    err = capsys.readouterr().err
    assert "hardware.runtime.kernel_switch_s" in err and "--start" in err
    unlimited = wss.load_scenario(REPO / "scenarios" / "gpt3_175b.yaml",
                                  {"hardware.activation_store.preset": "host-unlimited"})
    assert calibrate._shipped(unlimited, "hardware.activation_store.bandwidth_Bps") == 0.0


def test_a_parameter_one_row_alone_feels_is_found_and_its_rows_leave_one_out_is_marked(calibrate, monkeypatch):
    """The activation store's rate moves DiT-2B on a CS-2 (M10), which offloads its block inputs, and not GPT-2 small
    (M7), which keeps them on the wafer: fitted, it would be M10's alone, so M10's leave-one-out error could not be a
    prediction of it; WSE-2's efficiency both feel."""
    rows = calibrate.load_cases([REPO / "scenarios" / "validation" / f"measured_{name}.yaml"
                                 for name in ("m7_gpt2_small_r23", "m10_dit_2b_cs2")])
    store = calibrate.Parameter("hardware.activation_store.bandwidth_Bps", "log")
    eff = calibrate.Parameter("hardware.wafer.kernel_efficiency@wse2", "logit")
    values = {store.key: 2.5e10, eff.key: 0.41}
    assert [c.name for c in calibrate.felt_by(store, rows, values, True)] == ["measured_m10_dit_2b_cs2"]
    assert len(calibrate.felt_by(eff, rows, values, True)) == 2
    group = calibrate.Group((store, eff), tuple(rows), None)
    assert calibrate.set_alone([group], values, True) == {"measured_m10_dit_2b_cs2": [store.key]}
    # The refit without a row is stubbed (its search is what the other tests time): only the mark is checked here.
    monkeypatch.setattr(calibrate, "fit_group", lambda g, fixed, *a, **k: {p.key: values[p.key] for p in g.params})
    loo = calibrate.leave_one_out([group], values, True, rows, alone={"measured_m10_dit_2b_cs2"})
    assert loo["measured_m10_dit_2b_cs2"][1] and not loo["measured_m7_gpt2_small_r23"][1]
