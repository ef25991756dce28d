"""studies/published/series.yaml, the published series a calibrated model is checked on
(docs/decisions/calibrated-published-series.md): every point passes the cases' check, the
points of a series describe one setup at several device counts, and no point carries another
point's published figure."""

from __future__ import annotations

from collections import defaultdict

import pytest
import yaml

from conftest import REPO
from dpscale.plan.published import read_cases

SERIES_FILE = REPO / "studies" / "published" / "series.yaml"
CASES = yaml.safe_load(SERIES_FILE.read_text("utf-8"))["cases"]
BY_SERIES: dict[str, list[dict]] = defaultdict(list)
for _case in CASES:
    BY_SERIES[_case["series"]].append(_case)

# what must not change between the points of one series
SAME_SETUP = ("model", "per_device_batch", "gpu", "compute_precision", "wire_precision")


def test_every_point_passes_the_published_cases_check():
    assert len(read_cases(SERIES_FILE)) == len(CASES)


def test_enough_series_from_enough_sources():
    sources = {points[0]["source"]["repository"] for points in BY_SERIES.values()}
    assert len(BY_SERIES) >= 6 and len(sources) >= 3, (sorted(BY_SERIES), sources)


@pytest.mark.parametrize("name", sorted(BY_SERIES))
def test_a_series_is_one_setup_at_two_or_more_device_counts(name):
    points = BY_SERIES[name]
    scales = [point["devices_total"] for point in points]
    assert len(set(scales)) == len(scales) >= 2 and min(scales) >= 2, scales
    for key in SAME_SETUP:
        assert len({repr(point.get(key)) for point in points}) == 1, key
    one_device = {point["single_device"]["img_s"] for point in points}
    assert len(one_device) == 1, one_device
    assert {point["source"]["repository"] for point in points} == {
        points[0]["source"]["repository"]
    }


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_a_point_holds_only_its_own_figure_quoted_as_printed(case):
    assert "series" not in case["published"], "a column would hand the predicted figure over"
    value = case["published"]["value"]
    printed = (f"{value:g}", f"{value:.2f}")  # 3333.20 is read back as 3333.2
    assert any(text in case["source"]["quote"] for text in printed), value
