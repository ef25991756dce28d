"""The bucket timeline of torch-ddp synthetic cells (issue 33): the core loop records the
rank's timeline in the result, the schema checks it, and the tidy table reads it.

The timeline itself is recorded by torch in tests/integration/test_bucket_timeline_torch.py.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import jsonschema
import pytest

from conftest import aggregate, make_cell
from dpscale.analysis.results.bucket_tables import TIMELINE_COLUMNS, bucket_timeline_table
from dpscale.analysis.results.tables import cells_table
from dpscale.plan.result import make_result, now_iso, read_result, validate_result, write_result
from dpscale.runner.measure import TIMELINE_STEPS, Guards, run_cell
from dpscale.runner.rank import Rank
from dpscale.runner.timing import throughput_measurement

SYSTEM = {"host": "h", "cpu_model": "c", "python": "3.11"}


def timeline(backward_s: list[float], ready: list[list[float]]) -> dict[str, Any]:
    """A timeline of len(backward_s) steps; ``ready``: each bucket's ready times."""
    steps = len(backward_s)
    return {
        "clock": "perf_counter",
        "steps": steps,
        "bucket_cap_mb": 25.0,
        "forward_s": [0.1 * (i + 1) for i in range(steps)],
        "backward_s": backward_s,
        "optimizer_s": [0.01] * steps,
        "buckets": [
            {"index": i, "parameters": 3 + i, "bytes": 4000 * (i + 1), "ready_s": times}
            for i, times in enumerate(ready)
        ],
    }


def result(cell, status="ok", bucket_timeline=None) -> dict[str, Any]:
    if status != "ok":
        return make_result(cell, status, started_at=now_iso(), system=SYSTEM, reason="boom")
    measurement = throughput_measurement([1.0, 1.1, 0.9], 2, cell.batch_per_device, cell.world_size)
    if bucket_timeline is not None:
        measurement["bucket_timeline"] = bucket_timeline
    return make_result(cell, "ok", started_at=now_iso(), system=SYSTEM, measurement=measurement)


# three steps, two buckets; the last bucket's ready times 0.5, 0.9, 0.7 against backward
# 0.6, 0.8, 1.0: exposed 0.1, 0 (clipped from -0.1), 0.3
TIMED = timeline([0.6, 0.8, 1.0], [[0.2, 0.4, 0.3], [0.5, 0.9, 0.7]])


def test_the_table_has_a_row_per_bucket_with_medians_over_steps():
    cell = make_cell(devices=2)
    table = bucket_timeline_table([result(cell, bucket_timeline=TIMED)])
    assert list(table.columns) == TIMELINE_COLUMNS
    assert list(table["bucket"]) == [0, 1]
    first, last = table.iloc[0], table.iloc[1]
    assert first["ready_s"] == pytest.approx(0.3)
    assert (first["ready_lo_s"], first["ready_hi_s"]) == pytest.approx((0.2, 0.4))
    assert last["ready_s"] == pytest.approx(0.7)
    assert (last["ready_lo_s"], last["ready_hi_s"]) == pytest.approx((0.5, 0.9))
    assert list(table["last_ready_s"]) == pytest.approx([0.7, 0.7])
    assert list(table["exposed_s"]) == pytest.approx([0.1, 0.1])  # median of 0.1, 0, 0.3
    assert first["forward_s"] == pytest.approx(0.2)
    assert first["backward_s"] == pytest.approx(0.8)
    assert first["optimizer_s"] == pytest.approx(0.01)
    assert (first["bucket_bytes"], first["bucket_parameters"], first["steps"]) == (4000, 3, 3)


def test_exposed_communication_is_never_negative():
    late = timeline([0.5, 0.5, 0.5], [[0.1, 0.1, 0.1], [0.6, 0.7, 0.4]])  # 0, 0, 0.1
    table = bucket_timeline_table([result(make_cell(), bucket_timeline=late)])
    assert table["exposed_s"].iloc[0] == pytest.approx(0.0)


def test_only_ok_cells_with_a_timeline_give_rows_that_join_the_cells_table():
    timed, plain, failed = make_cell(batch=8), make_cell(batch=16), make_cell(batch=32)
    results = [
        result(timed, bucket_timeline=TIMED),
        result(plain),
        result(failed, status="failed"),
    ]
    table = bucket_timeline_table(results)
    assert set(table["cell_id"]) == {timed.cell_id}
    cells = cells_table(results).set_index("cell_id")
    for column in ("comm", "network", "world_size", "batch_per_device", "strategy", "model"):
        assert table[column].iloc[0] == cells.loc[timed.cell_id, column]


def test_no_timeline_is_an_empty_table_with_the_columns():
    table = bucket_timeline_table([result(make_cell())])
    assert table.empty and list(table.columns) == TIMELINE_COLUMNS


def test_aggregate_writes_the_timeline_table(tmp_path):
    cell = make_cell()
    path = write_result(cell.result_path(tmp_path), result(cell, bucket_timeline=TIMED))
    aggregate(tmp_path / "tables", [path])
    written = (tmp_path / "tables" / "bucket_timeline.csv").read_text().splitlines()
    assert written[0].split(",") == TIMELINE_COLUMNS and len(written) == 3


def test_the_schema_accepts_a_timeline_and_rejects_a_bucket_without_ready_times():
    cell = make_cell()
    validate_result(result(cell, bucket_timeline=TIMED))
    broken = copy.deepcopy(TIMED)
    del broken["buckets"][1]["ready_s"]
    with pytest.raises(jsonschema.ValidationError, match="ready_s"):
        validate_result(result(cell, bucket_timeline=broken))
    for key, value in (("clock", "wall"), ("buckets", []), ("forward_s", [-1.0])):
        with pytest.raises(jsonschema.ValidationError):
            validate_result(result(cell, bucket_timeline={**TIMED, key: value}))


class TimelineRank(Rank):
    """A one-process rank with trivial steps; ``timeline``: what its bucket_timeline gives."""

    framework, trainable_params, threads_used, batch = "fake", 10, 1, 8

    def __init__(self, timeline: dict[str, Any] | None) -> None:
        self.timeline = timeline
        self.asked: list[int] = []

    def synthetic_step(self):
        return (lambda: sum(range(2000))), (lambda: None)

    def matmul(self, n: int, dtype: str):
        return (lambda: sum(range(2000))), (lambda: None)

    def param_checksums(self) -> list[str]:
        return ["0" * 64]

    def bucket_timeline(self, steps: int) -> dict[str, Any] | None:
        self.asked.append(steps)
        return self.timeline


@pytest.mark.parametrize("recorded", [TIMED, None])
def test_a_synthetic_cell_writes_rank_zeros_timeline(tmp_path, recorded):
    cell = make_cell()
    rank = TimelineRank(recorded)
    run_cell(cell, cell.result_path(tmp_path), rank)
    measurement = read_result(cell.result_path(tmp_path))["measurement"]
    assert rank.asked == [TIMELINE_STEPS]
    assert measurement.get("bucket_timeline") == recorded


def test_a_strategy_without_buckets_has_no_timeline():
    assert Rank().bucket_timeline(TIMELINE_STEPS) is None


def test_guards_call_runs_under_the_watchdog_where_there_is_one(tmp_path):
    class TwoRanks:
        rank, size, times_out_collectives = 0, 2, False

    guards = Guards(make_cell(devices=2), tmp_path / "cell.json", TwoRanks())
    seen: list[float | None] = []
    assert guards.call(lambda x: seen.append(guards.watchdog.waiting_since) or x, 3) == 3
    assert seen[0] is not None and guards.watchdog.waiting_since is None

    class OneRank(TwoRanks):
        size = 1

    alone = Guards(make_cell(), tmp_path / "cell.json", OneRank())
    assert alone.watchdog is None and alone.call(math.sqrt, 4.0) == 2.0


def test_the_report_page_has_a_row_per_cell_with_the_hidden_share_of_the_replay():
    import pandas as pd

    from dpscale.analysis.results.bucket_tables import TIMELINE_SUMMARY_COLUMNS, timeline_summary

    one, two = make_cell(devices=1), make_cell(devices=2)
    table = bucket_timeline_table(
        [result(one, bucket_timeline=TIMED), result(two, bucket_timeline=TIMED)]
    )
    replay = pd.DataFrame(
        [
            {
                "strategy": "torch-ddp",
                "nodes": 1,
                "devices_per_node": 2,
                "network": table["network"].iloc[0],
                "comm": "none",
                "step_s": 0.4,
                "quality": "ok",
            }
        ]
    )
    summary = timeline_summary(table, replay)
    assert list(summary.columns) == TIMELINE_SUMMARY_COLUMNS
    assert len(summary) == 2
    single, pair = summary.iloc[0], summary.iloc[1]
    assert single["buckets_ready"] == "0.0 MB at 300 ms; 0.0 MB at 700 ms"
    assert math.isnan(single["exposed_s"]) and math.isnan(single["hidden_s"])
    assert pair["exposed_s"] == pytest.approx(0.1)
    assert pair["replay_s"] == pytest.approx(0.4)
    assert pair["hidden_s"] == pytest.approx(0.3)
    # the same parts as the one process: its compute is one process's
    assert single["compute_vs_one"] == pytest.approx(1.0)
    assert pair["compute_vs_one"] == pytest.approx(1.0)
    no_replay = timeline_summary(table, pd.DataFrame())
    assert no_replay["hidden_s"].isna().all()
    assert timeline_summary(table.iloc[:0], replay).empty


def test_compute_beside_co_located_ranks_is_set_against_one_process():
    from dpscale.analysis.results.bucket_tables import compute_vs_one

    one, four = make_cell(devices=1), make_cell(devices=2)
    slower = {**TIMED, "forward_s": [2 * f for f in TIMED["forward_s"]]}
    table = bucket_timeline_table(
        [result(one, bucket_timeline=TIMED), result(four, bucket_timeline=slower)]
    )
    cells = table.drop_duplicates("cell_id")
    forward, last = cells["forward_s"].iloc[0], cells["last_ready_s"].iloc[0]
    ratios = compute_vs_one(table)
    assert ratios[0] == pytest.approx(1.0)
    assert ratios[1] == pytest.approx((2 * forward + last) / (forward + last))
    # without a one-process cell to compare with, nothing is said
    assert all(math.isnan(r) for r in compute_vs_one(table[table["world_size"] > 1]))
