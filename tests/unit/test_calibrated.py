"""The calibrated scale-out law: fitted terms recovered from points made by the law, one
scale's open split spanned by the range, the arithmetic baselines as defined."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpscale.analysis.laws import calibrated as cal


def link_only(devices: int, comm: float = 0.05) -> float:
    """A ring's exposed time: 2 (n - 1) / n of one all-reduce."""
    return 1 + comm * 2 * (devices - 1) / devices


def made_by(terms: cal.Terms, devices: int, spread: float = 0.0) -> cal.Point:
    r = terms.ratio(devices, link_only(devices))
    return cal.Point(devices, link_only(devices), r, r * (1 - spread), r * (1 + spread))


def test_two_scales_recover_both_terms_and_the_largest_scale():
    truth = cal.Terms(g=2.5, s=0.03, j=0.01)
    fit = cal.calibrate([made_by(truth, 8), made_by(truth, 16)], j=0.01)
    assert fit.unresolved == ()
    assert fit.point.g == pytest.approx(2.5) and fit.point.s == pytest.approx(0.03)
    got = cal.predict(fit, 64, link_only(64))
    assert got.ratio == pytest.approx(truth.ratio(64, link_only(64)))
    assert got.lo == pytest.approx(got.hi)  # exact points: no range


def test_one_scale_spans_both_attributions_and_says_the_split_is_open():
    in_comm, in_sync = cal.Terms(g=3.0, s=0.0), cal.Terms(g=1.0, s=0.1 * 2 * 7 / 8 / 3)
    point = made_by(in_comm, 8)
    assert in_sync.ratio(8, link_only(8)) == pytest.approx(point.measured)
    fit = cal.calibrate([point])
    assert fit.unresolved and "split" in fit.unresolved[0]
    got = cal.predict(fit, 128, link_only(128))
    for truth in (in_comm, in_sync):
        assert got.lo - 1e-12 <= truth.ratio(128, link_only(128)) <= got.hi + 1e-12
    assert got.hi > got.lo


def test_a_wider_measured_range_gives_a_wider_prediction():
    truth = cal.Terms(g=2.0, s=0.02)
    narrow = cal.calibrate([made_by(truth, 8, 0.01), made_by(truth, 16, 0.01)])
    wide = cal.calibrate([made_by(truth, 8, 0.05), made_by(truth, 16, 0.05)])
    a, b = cal.predict(narrow, 64, link_only(64)), cal.predict(wide, 64, link_only(64))
    assert b.lo < a.lo <= a.ratio <= a.hi < b.hi


def test_no_exposed_communication_leaves_g_at_the_link_and_says_so():
    flat = cal.Point(8, 1.0, 1.1, 1.1, 1.1)
    fit = cal.calibrate([flat])
    assert fit.point.g == 1.0 and "g: no exposed communication" in fit.unresolved[0]
    assert cal.predict(fit, 8, 1.5).ratio == pytest.approx(1.1 + 0.5)


def test_stragglers_are_the_expected_largest_of_n_normals():
    assert cal.expected_max_normal(1) == 0.0
    assert cal.expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    values = [cal.expected_max_normal(n) for n in (2, 4, 16, 256)]
    assert values == sorted(values) and values[-1] < math.sqrt(2 * math.log(256))


def test_the_stragglers_interval_widens_the_range_and_is_named():
    truth = cal.Terms(g=2.0, s=0.02, j=0.02)
    points = [made_by(truth, 8), made_by(truth, 16)]
    alone = cal.calibrate(points, j=0.02)
    spanned = cal.calibrate(points, 0.02, (0.01, 0.04))
    a, b = cal.predict(alone, 64, link_only(64)), cal.predict(spanned, 64, link_only(64))
    assert b.ratio == pytest.approx(a.ratio) and b.lo < a.lo <= a.hi < b.hi
    assert "spread (2.0%, 1.0-4.0%)" in spanned.words
    assert "stragglers not measured apart" in cal.calibrate(points).words


def test_the_baselines_hold_or_repeat_the_last_drop():
    points = [cal.Point.from_efficiency(8, 1.0, 0.9), cal.Point.from_efficiency(16, 1.0, 0.85)]
    assert cal.hold_baseline(points) == pytest.approx(1 / 0.85)
    assert 1 / cal.repeat_baseline(points, 64) == pytest.approx(0.85 - 2 * 0.05)
    alone = [cal.Point.from_efficiency(8, 1.0, 0.94)]  # from one device at 100%
    assert 1 / cal.repeat_baseline(alone, 64) == pytest.approx(0.94 - 0.02 * 3)
    steep = [cal.Point.from_efficiency(2, 1.0, 0.6)]  # 40 points a doubling: none left at 8
    assert cal.repeat_baseline(steep, 8) == math.inf


def test_bad_points_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="devices"):
        cal.Point(1, 1.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="does not hold"):
        cal.Point(8, 1.0, 1.2, 1.3, 1.4)
    with pytest.raises(ValueError, match="no multi-device point"):
        cal.calibrate([])


@settings(max_examples=60, deadline=None)
@given(
    g=st.floats(0.0, 20.0),
    s=st.floats(0.0, 0.2),
    scales=st.lists(st.sampled_from([2, 4, 8, 16, 32]), min_size=2, max_size=3, unique=True),
)
def test_points_made_by_the_law_are_predicted_inside_the_range(g, s, scales):
    truth = cal.Terms(g, s)
    fit = cal.calibrate([made_by(truth, n, 0.02) for n in scales])
    got = cal.predict(fit, 256, link_only(256))
    assert got.lo <= got.ratio <= got.hi
    assert got.lo <= truth.ratio(256, link_only(256)) * (1 + 1e-9)
    assert truth.ratio(256, link_only(256)) <= got.hi * (1 + 1e-9)
