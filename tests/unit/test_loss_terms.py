"""The loss carried term by term (laws.loss_terms): at its own layout the law gives back the
measured step; each term follows its own law elsewhere; the range spans the terms' ranges;
and the cluster prediction's columns say what they stand on (answers.term_prediction)."""

import math

import pandas as pd
import pytest

from dpscale.analysis.answers.term_prediction import WITHOUT_CONTROLS, with_terms
from dpscale.analysis.laws.calibrated import expected_max_normal
from dpscale.analysis.laws.loss_terms import Host, TermCalibration, predict_terms, predicted_range

ONE, ONE_LOCAL, LOCAL, WAITING, EXPOSED = 0.200, 0.190, 0.195, 0.010, 0.080
TWO_CORES = Host(ranks=2, cpus=2)


def calibrated(link_ratio=1.3, halves=None, **changes):
    values = dict(
        world=2,
        one=ONE,
        one_local=ONE_LOCAL,
        local=LOCAL,
        waiting=WAITING,
        exposed=EXPOSED,
        link_ratio=link_ratio,
        host=TWO_CORES,
        halves=halves or {"local": 0.002, "waiting": 0.002, "exposed": 0.004},
        where="2 nodes x 1 device over 3gbit",
    )
    values.update(changes)
    return TermCalibration(**values)


def test_at_its_own_layout_the_law_gives_back_the_measured_step():
    predicted = predict_terms(calibrated(), 2, 1.3, TWO_CORES)
    full = LOCAL + WAITING + EXPOSED + (ONE - ONE_LOCAL)
    assert predicted.step == pytest.approx(full)
    assert predicted.efficiency == pytest.approx(ONE / full)
    assert predicted.contention == pytest.approx(LOCAL - ONE_LOCAL)


def test_ranks_outnumbering_the_cores_time_share_the_compute():
    four_on_two = predict_terms(calibrated(), 4, 1.3, Host(ranks=4, cpus=2))
    assert four_on_two.local == pytest.approx(2 * LOCAL)
    assert four_on_two.own_exchange == pytest.approx(2 * (ONE - ONE_LOCAL))  # CPU work too
    own_nodes = predict_terms(calibrated(), 4, 1.3, Host(ranks=1, cpus=2))
    assert own_nodes.local == pytest.approx(LOCAL)  # one rank a node: as measured


def test_waiting_grows_as_the_expected_slowest_of_n():
    at_8 = predict_terms(calibrated(), 8, 1.3, TWO_CORES)
    ratio = expected_max_normal(8) / expected_max_normal(2)
    assert at_8.waiting == pytest.approx(WAITING * ratio)


def test_the_exposed_exchange_follows_the_link_only_exposure():
    at_4 = predict_terms(calibrated(), 4, 1.6, TWO_CORES)
    assert at_4.exposed == pytest.approx(EXPOSED * 0.6 / 0.3)
    unpinned = calibrated(link_ratio=1.0)
    assert unpinned.exposure == 1.0  # nothing exposed at its scale: the link alone
    assert predict_terms(unpinned, 4, 1.6, TWO_CORES).exposed == pytest.approx(0.6 * ONE)


def test_a_negative_waiting_is_noise_and_predicts_none():
    assert predict_terms(calibrated(waiting=-0.004), 8, 1.3, TWO_CORES).waiting == 0


def test_the_range_spans_the_measured_terms_ranges():
    point, lo, hi = predicted_range(calibrated(), 4, 1.6, TWO_CORES)
    assert lo < point.efficiency < hi
    _, lo_wide, hi_wide = predicted_range(
        calibrated(halves={"local": 0.01, "waiting": 0.01, "exposed": 0.02}), 4, 1.6, TWO_CORES
    )
    assert lo_wide < lo and hi_wide > hi


def test_the_prediction_table_says_what_it_stands_on():
    table = pd.DataFrame(
        {"world_size": [1, 2, 4], "devices_per_node": [1, 1, 1], "efficiency": [1.0, 0.77, 0.62]}
    )
    out = with_terms(table, calibrated(), "", one_host=True)
    assert math.isnan(out.loc[0, "terms_efficiency"])
    assert out.loc[2, "terms_kind"].startswith("extrapolated")
    assert "control cells" in out.loc[2, "terms_basis"]
    without = with_terms(table, None, WITHOUT_CONTROLS, one_host=True)
    assert without["terms_efficiency"].isna().all()
    assert (without["terms_basis"] == WITHOUT_CONTROLS).all()
