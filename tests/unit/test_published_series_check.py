"""The calibrated check on published series, by its protocol: which points calibrate and
which is predicted, the baselines from published figures alone, abstaining as an infinite
error, a tie going to the baseline."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dpscale.analysis.answers import published_series as ps


def case(series: str, devices: int, img_s: float, one: float = 100.0) -> dict:
    return {
        "id": f"{series}-{devices}",
        "series": series,
        "model": "resnet50",
        "devices_total": devices,
        "single_device": {"img_s": one},
        "published": {"kind": "throughput", "value": img_s},
        "source": {"title": f"source of {series}", "url": f"https://example.org/{series}"},
    }


def check_of(cases: list[dict], link_only: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [c["id"] for c in cases],
            "predicted": [link_only[c["devices_total"]] for c in cases],
        }
    )


def test_roles_follow_the_protocol():
    assert ps.roles([1, 8, 16, 32, 64]) == ([8, 16], 64)
    assert ps.roles([1, 8, 16]) == ([8], 16)
    assert ps.roles([1, 8]) is None


def test_the_largest_point_is_never_read():
    cases = [case("a", 8, 720.0), case("a", 16, 1360.0), case("a", 32, 2500.0)]
    link_only = {8: 99.0, 16: 98.0, 32: 97.0}
    first = ps.series_table(cases, check_of(cases, link_only))
    cases[-1]["published"]["value"] = 1.0  # a different published figure at the largest
    second = ps.series_table(cases, check_of(cases, link_only))
    for column in ("calibrated_pct", "hold_pct", "repeat_pct", "link_only_pct"):
        assert first[column].iloc[0] == pytest.approx(second[column].iloc[0])
    assert first["published_pct"].iloc[0] == pytest.approx(100 * 2500 / 3200)


def test_baselines_need_no_link_only_prediction_and_the_model_abstains_without_one():
    cases = [case("a", 8, 720.0), case("a", 16, 1360.0), case("a", 32, 2500.0)]
    row = ps.series_table(cases, check_of(cases, {8: math.nan, 16: 98.0, 32: 97.0})).iloc[0]
    assert row["hold_pct"] == pytest.approx(85.0)  # 1360 / 1600
    assert row["repeat_pct"] == pytest.approx(85.0 - 5.0)  # 90 -> 85 repeats once
    assert math.isnan(row["calibrated_pct"]) and row["status"].startswith("not predicted")
    assert math.isinf(ps.errors(pd.DataFrame([row]))["calibrated"].iloc[0])


def test_a_tie_goes_to_the_baseline():
    table = pd.DataFrame(
        {
            "series": ["a", "b"],
            "source": ["s", "t"],
            "published_pct": [80.0, 90.0],
            "calibrated_pct": [81.0, 91.0],
            "link_only_pct": [99.0, 99.0],
            "hold_pct": [81.04, 91.04],
            "repeat_pct": [70.0, 70.0],
        }
    )
    got = ps.verdict(table)
    assert got["beats"] == {"hold": False, "repeat": True}
    assert got["median_points"]["calibrated"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "calibrated, outcome",
    [
        ([81.0, 91.0], "does not beat both baselines"),  # beats repeat only: a tie on hold
        ([60.0, 60.0], "does not beat either baseline"),
        ([80.0, 90.0], "beats both baselines"),
    ],
)
def test_the_record_a_prediction_carries_says_how_the_law_fared(calibrated, outcome):
    table = pd.DataFrame(
        {
            "series": ["a", "b"],
            "source": ["s", "t"],
            "published_pct": [80.0, 90.0],
            "calibrated_pct": calibrated,
            "link_only_pct": [99.0, 99.0],
            "hold_pct": [81.04, 91.04],
            "repeat_pct": [70.0, 70.0],
        }
    )
    words = ps.record_words(table)
    assert "on 2 published series" in words and f"the law {outcome}:" in words
    medians = ps.verdict(table)["median_points"]
    assert f"median error {medians['calibrated']:.1f} efficiency points against 1.0 (held)" in (
        words
    )
    assert ps.record_words(table.iloc[:0]) == "not checked on published series (none given)"


def test_the_published_page_gives_each_efficiency_its_interval_and_the_series_below():
    from dpscale.plan.published import published_files
    from dpscale.render.published_page import INTERVAL, SERIES_TITLE, published_html
    from dpscale.steps.published import checked

    files = published_files({})
    table, lines, series = checked(files["cases"], files["profile"])
    compared = table.dropna(subset=["error_points"])
    assert compared["interval_lo"].notna().all()
    assert (compared["interval_lo"] < compared["interval_hi"]).all()
    assert any("leave-one-source-out" in line for line in lines)
    assert any(line.startswith("Calibrated on each of") for line in lines)
    page = published_html(table, lines, "title", series)
    assert INTERVAL in page and SERIES_TITLE in page and "calibrated [range]" in page
    assert page.count("<table>") == 2
