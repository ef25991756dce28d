"""Cells measured again after the last cell: which are, and which result the tables use."""

from __future__ import annotations

from typing import Any

import pytest

from dpscale.analysis.results import again


def result(cell_id: str, status: str = "ok", quality: str | None = "ok", foreign=0.0) -> dict:
    contention: dict[str, Any] = {} if foreign is None else {"foreign_cpu_cores_mean": foreign}
    return {
        "cell": {"cell_id": cell_id},
        "status": status,
        "quality": quality,
        "system": {"contention": contention},
    }


def test_only_measured_cells_of_the_asked_qualities_are_measured_again():
    results = [
        result("a", quality="noisy"),
        result("b", quality="contaminated"),
        result("c", quality="ok"),
        result("d", status="failed", quality=None),
        result("e", quality="unknown"),
    ]
    assert again.to_measure_again(results, ["noisy", "contaminated"]) == ["a", "b"]
    assert again.to_measure_again(results, []) == []


def test_a_drift_probe_is_never_measured_again():
    probe = result("torch-dp/m/drift/n1-d1-b4-r0", quality="noisy")
    probe["cell"]["drift_probe"] = True
    assert again.to_measure_again([probe, result("a", quality="noisy")], ["noisy"]) == ["a"]


@pytest.mark.parametrize(
    ("first", "second", "kept"),
    [
        (
            result("a", quality="noisy", foreign=0.1),
            result("a", quality="ok", foreign=0.0),
            "again",
        ),
        (result("a", quality="contaminated", foreign=0.5), result("a", quality="noisy"), "again"),
        (
            result("a", quality="noisy", foreign=0.08),
            result("a", quality="noisy", foreign=0.2),
            "first",
        ),
        (
            result("a", quality="noisy", foreign=0.2),
            result("a", quality="noisy", foreign=0.08),
            "again",
        ),
        (result("a", quality="noisy"), result("a", status="failed", quality=None), "first"),
        (result("a", quality="noisy"), result("a", quality="contaminated", foreign=0.4), "first"),
    ],
)
def test_the_quieter_result_is_kept_and_says_so(first, second, kept):
    chosen = again.better_result(first, second)
    assert chosen["measured_again"]["kept"] == kept
    assert chosen["measured_again"]["first_quality"] == first["quality"]
    expected = second if kept == "again" else first
    assert {k: v for k, v in chosen.items() if k != "measured_again"} == expected


def test_cells_not_measured_again_are_unchanged():
    results = [result("a", quality="noisy"), result("b")]
    chosen = again.with_second_measurements(results, [result("a")])
    assert chosen[0]["measured_again"]["kept"] == "again"
    assert chosen[1] is results[1]
    assert "measured_again" not in results[0]  # the first result itself is not touched


def test_the_landing_page_sentence_counts_both_kinds():
    import pandas as pd

    cells = pd.DataFrame(
        {
            "measured_again": [True, True, False],
            "first_quality": ["noisy", "contaminated", None],
            "kept": ["again", "first", None],
        }
    )
    line = again.again_sentence(cells)
    assert line.startswith("2 cells read contaminated, noisy and were measured again")
    assert "second measurement for 1 and the first for 1" in line
    assert again.again_sentence(cells.iloc[2:]) == ""
