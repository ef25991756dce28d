import math

import numpy as np
import pytest

from dpscale.analysis.laws import fits
from dpscale.plan import ring


def synthetic_steps(v0, t_c, batches, per_batch, noise, seed):
    rng = np.random.default_rng(seed)
    b = np.repeat(batches, per_batch).astype(float)
    return b, fits.step_time(b, v0, t_c) * (1 + rng.normal(0, noise, b.size))


@pytest.mark.parametrize(
    ("v0", "t_c", "seed"), [(258.1, 0.054, 0), (513.8, 0.15, 1), (40.0, 0.01, 2)]
)
def test_fit_recovers_known_parameters_within_their_standard_errors(v0, t_c, seed):
    batch, seconds = synthetic_steps(v0, t_c, [8, 16, 32, 64, 128], 10, 0.02, seed)
    fit = fits.fit_throughput_law(batch, seconds)
    assert abs(fit.v0 - v0) < 3 * fit.v0_se
    assert abs(fit.t_c - t_c) < 3 * fit.t_c_se
    assert abs(fit.b90 - 9 * v0 * t_c) < 3 * fit.b90_se
    assert fit.r2 > 0.99
    assert fit.v0_se > 0 and fit.t_c_se > 0


T_975_DF18 = 2.10092204  # 20 points, 2 parameters


def test_standard_errors_are_honest_over_many_noisy_fits():
    inside = 0
    trials = 300
    for seed in range(trials):
        batch, seconds = synthetic_steps(100.0, 0.05, [4, 8, 16, 32], 5, 0.05, seed)
        fit = fits.fit_throughput_law(batch, seconds)
        inside += abs(fit.v0 - 100.0) < T_975_DF18 * fit.v0_se
    assert 0.90 < inside / trials < 0.99


def test_fit_needs_two_batch_sizes():
    with pytest.raises(ValueError, match="two distinct"):
        fits.fit_throughput_law([8, 8, 8], [0.1, 0.11, 0.1])


def test_b90_reaches_ninety_percent_of_the_ceiling():
    v0, t_c = 258.1, 0.054
    b90 = fits.batch_for_fraction(v0, t_c)
    assert b90 == pytest.approx(9 * v0 * t_c)
    assert fits.throughput(b90, v0, t_c) == pytest.approx(0.9 * v0)


def test_break_even_matches_the_closed_form_for_equal_rates():
    v0, t1, tn, n = 258.1, 0.054, 0.15, 2
    expected = v0 * (tn - t1) * n / (n - 1)
    b = fits.break_even_global_batch(v0, t1, v0, tn, n)
    assert b == pytest.approx(expected)
    one = b / v0 + t1
    many = b / (n * v0) + tn
    assert one == pytest.approx(many)


def test_break_even_edge_cases():
    assert fits.break_even_global_batch(100, 0.1, 100, 0.05, 2) == 0.0
    assert fits.break_even_global_batch(100, 0.1, 40, 0.2, 2) == math.inf


def test_ring_allreduce_model():
    size = ring.gradient_bytes(25_557_032)
    assert size == 102_228_128
    beta, alpha = 10e9, 5e-6
    assert ring.ring_allreduce_seconds(size, 1, beta, alpha) == 0.0
    t8 = ring.ring_allreduce_seconds(size, 8, beta, alpha)
    assert t8 == pytest.approx(2 * 7 / 8 * size / beta + 14 * alpha)
    # bus bandwidth inverts the model (latency neglected)
    assert ring.effective_bandwidth(
        size, 8, ring.ring_allreduce_seconds(size, 8, beta)
    ) == pytest.approx(beta)


def test_ratio_interval():
    assert fits.ratio_ci95(2.0, 0.2, 1.0, 0.1) == pytest.approx(2.0 * math.hypot(0.1, 0.1))


def _law(fit: fits.ThroughputFit) -> fits.LawEstimate:
    return fits.LawEstimate.from_fit(fit.v0, fit.v0_se, fit.t_c, fit.t_c_se, fit.slope_t_c_cov)


def test_break_even_interval_covers_the_true_batch_about_95_times_in_100():
    """The delta-method interval against the truth over many noisy pairs of fits: the
    single device's law (100 img/s, 0.02 s) and two devices' (95 img/s, 0.08 s)."""
    truth = fits.break_even_global_batch(100.0, 0.02, 95.0, 0.08, 2)
    inside, trials = 0, 300
    for seed in range(trials):
        one = fits.fit_throughput_law(*synthetic_steps(100.0, 0.02, [4, 8, 16, 32], 5, 0.03, seed))
        two = fits.fit_throughput_law(
            *synthetic_steps(95.0, 0.08, [4, 8, 16, 32], 5, 0.03, seed + trials)
        )
        even = fits.break_even_global_batch(one.v0, one.t_c, two.v0, two.t_c, 2)
        half = fits.break_even_ci95(_law(one), _law(two), 2)
        inside += abs(even - truth) <= half
    assert 0.90 < inside / trials < 0.99


def test_break_even_interval_edges():
    tight = fits.LawEstimate(slope=0.01, slope_var=1e-10, t_c=0.02, t_c_var=1e-8, cov=0.0)
    slow = fits.LawEstimate(slope=0.0105, slope_var=1e-10, t_c=0.08, t_c_var=1e-8, cov=0.0)
    assert 0 < fits.break_even_ci95(tight, slow, 2) < 1
    # two devices always faster: B = 0, no interval to give
    assert math.isnan(fits.break_even_ci95(slow, tight, 2))
    # the per-image gain's interval reaches zero: no upper bound
    vague = fits.LawEstimate(slope=0.0195, slope_var=1e-6, t_c=0.08, t_c_var=1e-8, cov=0.0)
    assert fits.break_even_ci95(tight, vague, 2) == math.inf


def test_overlapping_intervals():
    assert fits.intervals_overlap(10.0, 2.0, 13.0, 1.5)
    assert not fits.intervals_overlap(10.0, 1.0, 13.0, 1.5)
    assert fits.intervals_overlap(10.0, math.nan, 10.0, math.nan)
