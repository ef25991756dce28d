"""The link-only band by scale group (docs/decisions/published-intervals-by-scale.md): each
case's interval from the other sources of its group (within one node, across nodes), widened
to every other source where its group has too few; each group's band, pooled where the group
holds too few sources; a predicted row carries its own group's band."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpscale.analysis.answers import calibrated_prediction
from dpscale.analysis.answers import published_intervals as pi
from dpscale.analysis.laws.conformal import Band


def rows(spec: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    """(source, scale, cases, residual) -> that many cases at link-only 100%."""
    out = []
    for source, scale, count, residual in spec:
        for i in range(count):
            out.append(
                {
                    "id": f"{source}-{i}",
                    "group": source,
                    "scale": scale,
                    "predicted": 100.0,
                    "published": 100.0 + residual - 0.1 * i,
                }
            )
    return pd.DataFrame(out)


def test_the_scale_group_is_the_node_count_s_and_nothing_else():
    assert pi.scale_group(1) == pi.WITHIN
    assert pi.scale_group(2) == pi.scale_group(64) == pi.ACROSS


def test_a_case_takes_its_groups_other_sources_or_is_widened_to_every_source():
    table = rows(
        [
            ("a", pi.WITHIN, 6, -1.0),
            ("b", pi.WITHIN, 6, -2.0),
            ("c", pi.ACROSS, 10, -20.0),
            ("d", pi.ACROSS, 10, -25.0),
            ("e", pi.ACROSS, 10, -15.0),
        ]
    )
    held = pi.held_out(table).set_index("id")
    # within one node: the other within source holds 6 residuals, too few at 80%: widened
    assert held.loc["a-0", "widened"] and held.loc["b-0", "widened"]
    # across nodes: 20 residuals of the two other across sources, never the within ones
    assert not held.loc["c-0", "widened"]
    others = table[(table["scale"] == pi.ACROSS) & (table["group"] != "c")]
    residuals = np.sort(others["published"] - others["predicted"])
    assert held.loc["c-0", "hi"] == pytest.approx(100 + residuals[math.ceil(21 * 0.9) - 1])


def test_a_group_of_too_few_sources_carries_the_pooled_band_and_says_so():
    table = pi.held_out(
        rows(
            [
                ("a", pi.WITHIN, 12, -1.0),
                ("b", pi.WITHIN, 12, -2.0),
                ("c", pi.ACROSS, 10, -20.0),
                ("d", pi.ACROSS, 10, -25.0),
                ("e", pi.ACROSS, 10, -15.0),
            ]
        )
    )
    found = pi.scale_summaries(table).set_index("scale")
    everything = pi.coverage_summary(table)
    assert found.loc[pi.WITHIN, "pooled"] and not found.loc[pi.ACROSS, "pooled"]
    assert found.loc[pi.WITHIN, "band_lo_points"] == everything["band_lo_points"]
    assert found.loc[pi.ACROSS, "band_hi_points"] < -10  # its own, far from the within cases
    words = pi.band_words({**found.loc[pi.WITHIN].to_dict(), "scale": pi.WITHIN})
    assert words.startswith("80% band for layouts within one node (pooled over every group")
    line = pi.interval_line(table)
    assert "By scale group: within one node: " in line and "across nodes: " in line


def test_a_predicted_row_carries_its_own_scale_group_s_band():
    bands = {
        pi.WITHIN: (Band(-3.0, -1.0, 20), "within words", "coverage 9 of 10"),
        pi.ACROSS: (Band(-20.0, -5.0, 40), "across words", "coverage 30 of 35"),
        pi.POOLED: (Band(-20.0, -1.0, 60), "pooled words", "coverage 40 of 45"),
    }
    table = pd.DataFrame({"nodes": [1, 2, 8], "world_size": [8, 16, 64]}).assign(efficiency=0.99)
    carried = calibrated_prediction.with_scale_bands(table, bands)
    assert list(carried["band_basis"]) == ["within words", "across words", "across words"]
    assert carried["efficiency_band_hi"].tolist() == pytest.approx([0.98, 0.94, 0.94])
    assert list(carried["band_coverage"]) == ["coverage 9 of 10"] + ["coverage 30 of 35"] * 2
