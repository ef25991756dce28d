"""Horovod's own timeline (config ``horovod_timeline``): the option stays out of the cells
that do not ask for it, the reader takes a trace in Horovod's format (also unterminated), and
each step's all-reduce splits into the part before its last tensor was handed to Horovod
(hidden) and after (exposed).

The trace itself is written by Horovod in tests/integration/test_runners.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from conftest import TABLE_FILES, TABLES, make_cell
from dpscale.analysis.results import horovod_timeline as hvt
from dpscale.plan.errors import ConfigError
from dpscale.plan.matrix import expand
from dpscale.plan.result import make_result, now_iso, validate_result, write_result
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES
from dpscale.runner.timing import throughput_measurement
from dpscale.steps.io import read
from dpscale.steps.results import aggregate
from dpscale.steps.tables import html_tables

SYSTEM = {"host": "h", "cpu_model": "c", "python": "3.11"}
NAME = "n1-d2-b8-r0.horovod-timeline.json"


def trace(steps: list[dict[str, list[tuple[int, int, int]]]]) -> str:
    """A trace as Horovod 0.28 writes it (horovod/common/timeline.cc): header metadata, per
    tensor its process_name at first sight, then B/X/E events, ``}]`` after each event.
    ``steps``: per step, tensor -> (negotiate begin, allreduce begin, allreduce end) in us, or
    (negotiate begin,): a negotiation that ends with no all-reduce (what hvd.join() leaves)."""
    pids: dict[str, int] = {}
    text = '[\n{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_'
    text += 'epoch_in_micros":1}},\n{"name": "process_sort_index", "ph": "M", "pid": 0, '
    text += '"args": {"sort_index": 0}},\n'
    events = []
    for step in steps:
        for tensor, (negotiate, *reduced) in step.items():
            if not reduced:
                events += [(negotiate, tensor, "B", NEGOTIATE), (negotiate + 5, tensor, "E", None)]
                continue
            begin, end = reduced
            events += [
                (negotiate, tensor, "B", NEGOTIATE),
                (negotiate, tensor, "X", "0"),
                (begin - 1, tensor, "E", None),
                (begin, tensor, "B", "ALLREDUCE"),
                (begin, tensor, "B", "MEMCPY_IN_FUSION_BUFFER"),
                (begin + 1, tensor, "E", None),
                (begin + 1, tensor, "B", "GLOO_ALLREDUCE"),
                (end, tensor, "E", None),
                (end, tensor, "E", None),
            ]
    body = []
    for ts, tensor, phase, name in sorted(events, key=lambda e: e[0]):
        if tensor not in pids:
            pids[tensor] = len(pids) + 1
            body.append(
                f'{{"name": "process_name", "ph": "M", "pid": {pids[tensor]}, '
                f'"args": {{"name": "{tensor}"}}}},\n'
                f'{{"name": "process_sort_index", "ph": "M", "pid": {pids[tensor]}, '
                f'"args": {{"sort_index": {pids[tensor]}}}}},\n'
            )
        event = {"ph": phase, **({"name": name} if name else {}), "ts": ts, "pid": pids[tensor]}
        if phase == "X":
            event["dur"] = 0
        body.append(json.dumps(event) + ",")
    return text + "".join(body).rstrip(",") + "]"


NEGOTIATE = "NEGOTIATE_ALLREDUCE"
# gradient tensors as hvd.DistributedGradientTape names them in a tf.function
A = "DistributedGradientTape_Allreduce/cond/then/_0/DistributedGradientTape_Allreduce/cond/"
A += "HorovodAllreduce_gradient_tape_fc_BiasAdd_BiasAddGrad_0"
B = "DistributedGradientTape_Allreduce/cond_1/HorovodAllreduce_gradient_tape_stem_conv_0"


# Two gradient tensors; the last one is handed over (negotiate begin) at 100 us after the step
# starts. A reduces 20..90 (hidden 70), B 110..140 (exposed 30): 100 us all-reduce.
def step(start: int, hidden_end: int = 90) -> dict[str, tuple[int, ...]]:
    return {
        A: (start + 10, start + 20, start + hidden_end),
        B: (start + 100, start + 110, start + 140),
        "HorovodAllreduce": (start + 200, start + 210, start + 900),  # the barrier, eager
    }


JOINED = {A: (9000,), B: (9000,), "HorovodAllreduce": (9000,)}  # hvd.join() at the end
STEPS = [step(0, hidden_end=500), step(1000), step(2000, hidden_end=60), step(3000), JOINED]


def test_the_reader_takes_every_whole_event_of_a_terminated_or_unterminated_trace(tmp_path):
    text = trace(STEPS)
    whole = tmp_path / "whole.json"
    whole.write_text(text)
    events = hvt.read_events(whole)
    assert json.loads(text) == events
    open_end = tmp_path / "open.json"
    open_end.write_text(text[:-1] + ",\n")  # no closing bracket
    assert hvt.read_events(open_end) == events
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.rindex('{"ph"') + 12])  # the last event cut short
    assert hvt.read_events(cut) == events[:-1]


def test_activities_pair_begins_and_ends_per_tensor_with_their_depth(tmp_path):
    table = hvt.activities(json.loads(trace(STEPS[:1])))
    a = table[table["tensor"] == A].set_index("activity")
    assert a.loc[NEGOTIATE, ["depth", "begin_us", "end_us"]].tolist() == [0, 10, 19]
    assert a.loc["ALLREDUCE", ["depth", "begin_us", "end_us"]].tolist() == [0, 20, 500]
    assert a.loc["GLOO_ALLREDUCE", ["depth", "begin_us", "end_us"]].tolist() == [1, 21, 500]


def test_hidden_is_before_the_last_tensor_was_handed_over_exposed_after():
    steps = hvt.step_overlap(hvt.activities(json.loads(trace(STEPS))), warmup_steps=1)
    assert list(steps["step"]) == [1, 2, 3]  # the warm-up step (its A ran 480 us) is out
    assert set(steps["tensors"]) == {2}  # the barrier is no gradient
    assert list(steps["submitted_s"]) == pytest.approx([1100e-6, 2100e-6, 3100e-6])
    assert list(steps["hidden_s"]) == pytest.approx([70e-6, 40e-6, 70e-6])
    assert list(steps["exposed_s"]) == pytest.approx([30e-6, 30e-6, 30e-6])
    assert list(steps["allreduce_s"]) == pytest.approx(steps["hidden_s"] + steps["exposed_s"])


def test_overlapping_all_reduces_count_once_and_a_late_start_is_all_exposed():
    table = hvt.activities(
        json.loads(
            trace(
                [
                    {A: (0, 10, 60), B: (30, 40, 80)},  # union 10..80, cut at 30: 20 + 50
                    {A: (100, 200, 260), B: (150, 210, 230)},  # cut at 150: all after
                ]
            )
        )
    )
    steps = hvt.step_overlap(table)
    assert list(steps["allreduce_s"]) == pytest.approx([70e-6, 60e-6])
    assert list(steps["hidden_s"]) == pytest.approx([20e-6, 0.0])
    assert list(steps["exposed_s"]) == pytest.approx([50e-6, 60e-6])


def test_a_step_cut_short_by_the_end_of_the_trace_is_left_out(tmp_path):
    text = trace(STEPS)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index('"ts": 3140')])  # B's last all-reduce left open
    steps = hvt.step_overlap(hvt.activities(hvt.read_events(cut)))
    assert list(steps["step"]) == [0, 1, 2]


def test_the_median_interval_covers_at_least_95_percent_or_is_empty():
    assert hvt.median_interval([3.0, 1.0, 2.0])[0] == 2.0
    assert all(math.isnan(v) for v in hvt.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])[1:])
    assert hvt.median_interval(range(1, 7)) == (3.5, 1.0, 6.0)  # n=6: the extremes, 96.9%
    assert hvt.median_interval(range(1, 21)) == (10.5, 6.0, 15.0)  # n=20: x(6), x(15)


def timeline_result(cell, name: str | None = NAME) -> dict:
    system = {**SYSTEM, **({"horovod_timeline": name} if name else {})}
    measurement = throughput_measurement([1.0, 1.1, 0.9], 2, cell.batch_per_device, cell.world_size)
    return make_result(cell, "ok", started_at=now_iso(), system=system, measurement=measurement)


def hvd_cell():
    return make_cell(strategy="horovod-tf", devices=2, options=(("horovod_timeline", True),))


def test_the_table_reads_the_trace_beside_the_result_and_drops_the_warm_up(tmp_path):
    cell = hvd_cell()  # make_cell: one warm-up step
    path = write_result(cell.result_path(tmp_path / "study"), timeline_result(cell))
    (path.parent / NAME).write_text(trace(STEPS)[:-1])  # as a killed rank 0 leaves it
    plain = make_cell(strategy="horovod-tf", devices=2, batch=16)
    table = hvt.timeline_table(
        [timeline_result(cell), timeline_result(plain, None)], tmp_path / "study" / "cells"
    )
    assert list(table.columns) == hvt.COLUMNS
    row = table.set_index("cell_id").loc[cell.cell_id]
    assert (row["steps"], row["tensors"], row["warmup_steps"], row["file"]) == (3, 2, 1, NAME)
    assert row["hidden_s"] == pytest.approx(70e-6) and row["exposed_s"] == pytest.approx(30e-6)
    assert row["allreduce_s"] == pytest.approx(100e-6)
    assert math.isnan(row["hidden_s_lo"])  # 3 steps: no 95% interval
    assert row["hidden_fraction"] == pytest.approx(0.7)
    assert row["reason"] is None or math.isnan(row["reason"])


def test_a_named_trace_that_is_missing_gives_a_row_with_the_reason(tmp_path):
    cell = hvd_cell()
    table = hvt.timeline_table([timeline_result(cell)], tmp_path / "cells")
    assert table["steps"].tolist() == [0]
    assert "missing beside the result" in table["reason"].iloc[0]


def test_the_schema_takes_the_trace_s_name_only():
    cell = hvd_cell()
    validate_result(timeline_result(cell))
    with pytest.raises(Exception, match="does not match"):
        validate_result(timeline_result(cell, "../elsewhere.json"))


def aggregate_step(tables: Path, paths: list[Path]) -> None:
    outputs = {name: tables / f"{TABLE_FILES.get(name, name)}.csv" for name in TABLES}
    outputs["horovod_timeline"] = tables / "horovod_timeline.csv"
    aggregate({}, outputs, {"results": [str(p) for p in paths]})


def html_step(tables: Path) -> Path:
    names = ("cells", "systems", "repeatability", "fits", "break_even", "scaling")
    inputs = {name: tables / f"{name}.csv" for name in names}
    inputs["horovod_timeline"] = tables / "horovod_timeline.csv"
    outputs = {f"{name}_html": tables / f"{name}.html" for name in (*names, "horovod_timeline")}
    html_tables(inputs, outputs, {})
    return outputs["horovod_timeline_html"]


def test_a_study_without_timelines_writes_an_empty_table_and_a_page_that_says_so(tmp_path):
    cell = make_cell(strategy="horovod-tf", devices=2)
    path = write_result(cell.result_path(tmp_path), timeline_result(cell, None))
    aggregate_step(tmp_path / "tables", [path])
    table = read(tmp_path / "tables" / "horovod_timeline.csv")
    assert table.empty and list(table.columns) == hvt.COLUMNS
    page = html_step(tmp_path / "tables").read_text()
    assert "no cell of this study kept" in page


def test_aggregate_writes_a_row_per_cell_that_kept_a_trace(tmp_path):
    cell = hvd_cell()
    path = write_result(cell.result_path(tmp_path), timeline_result(cell))
    (path.parent / NAME).write_text(trace(STEPS))
    aggregate_step(tmp_path / "tables", [path])
    table = read(tmp_path / "tables" / "horovod_timeline.csv")
    assert table["cell_id"].tolist() == [cell.cell_id] and table["steps"].tolist() == [3]
    assert "hidden share" in html_step(tmp_path / "tables").read_text()


def horovod_cells(config: dict) -> dict[str, object]:
    config = {**config, "strategies": ["horovod-tf", "mxnet-dist"], "modes": ["synthetic"]}
    cells = expand(plan_study(config, STRATEGIES)[0], STRATEGIES)
    return {c.cell_id: c for c in cells if c.strategy == "horovod-tf"}


def test_the_option_at_its_default_stays_out_of_the_cells(default_config):
    before = horovod_cells(default_config)
    # tensorflow_onednn is carried at its default: turning oneDNN on reran stored cells
    assert before and {c.options for c in before.values()} == {(("tensorflow_onednn", "on"),)}
    for cell in before.values():  # as a horovod-tf cell read before the option existed
        data = cell.to_dict()
        assert "horovod_timeline" not in data
        assert type(cell).from_dict(data).to_dict() == data
        assert STRATEGIES["horovod-tf"].option(cell, "horovod_timeline") is False
    # mxnet_servers keeps being carried at its default: stored results name it
    config = {**default_config, "strategies": ["mxnet-dist"], "modes": ["synthetic"]}
    mxnet = expand(plan_study(config, STRATEGIES)[0], STRATEGIES)
    assert {c.options for c in mxnet} == {(("mxnet_servers", 1),)}


def test_the_option_set_changes_only_the_horovod_cells_params(default_config):
    before = horovod_cells(default_config)
    after = horovod_cells({**default_config, "horovod_timeline": True})
    assert set(before) == set(after)  # the same cell ids
    for cell_id, cell in after.items():
        assert cell.to_dict() != before[cell_id].to_dict()
        assert cell.to_dict()["horovod_timeline"] is True
        assert type(cell).from_json(cell.to_json()) == cell


def test_the_option_is_a_boolean(default_config):
    with pytest.raises(ConfigError, match="horovod_timeline"):
        plan_study({**default_config, "horovod_timeline": "yes"}, STRATEGIES)


def test_the_report_shows_each_measure_with_its_interval_and_the_hidden_share_first():
    from dpscale.analysis.results.horovod_timeline import COLUMNS, shown

    row = dict.fromkeys(COLUMNS)
    row.update(nodes=2, devices_per_node=1, network="1gbe", batch_per_device=16, comm="none")
    row.update(steps=18, hidden_fraction=0.08, reason=None)
    row.update(allreduce_s=0.4, allreduce_s_lo=0.39, allreduce_s_hi=0.41)
    row.update(hidden_s=0.03, hidden_s_lo=0.02, hidden_s_hi=0.05)
    row.update(exposed_s=0.35, exposed_s_lo=float("nan"), exposed_s_hi=float("nan"))
    table = shown(pd.DataFrame([row], columns=COLUMNS))
    assert table.loc[0, "hidden_s [95%]"] == "0.030 [0.020, 0.050]"
    assert table.loc[0, "exposed_s [95%]"] == "0.350 (too few steps for an interval)"
    assert table.loc[0, "hidden share"] == "8%"
    assert "cell_id" not in table.columns
    assert shown(pd.DataFrame(columns=COLUMNS)).empty
