import math

import pytest

from dpscale.runner import timing


def test_summary_of_a_known_sample():
    summary = timing.summarise([1.0, 2.0, 3.0, 4.0, 5.0])
    sd = math.sqrt(2.5)
    t_975_df4 = 2.7764451051977987  # Student t quantile, from tables
    assert summary.n == 5
    assert summary.mean == 3.0
    assert summary.sd == pytest.approx(sd)
    assert summary.ci95 == pytest.approx(t_975_df4 * sd / math.sqrt(5))
    assert summary.median == 3.0
    assert summary.p10 == pytest.approx(1.4)
    assert summary.p90 == pytest.approx(4.6)
    assert summary.cv == pytest.approx(sd / 3.0)


def test_confidence_interval_covers_the_true_mean_about_95_percent_of_the_time():
    import numpy as np

    rng = np.random.default_rng(1)
    covered = 0
    trials = 2000
    for _ in range(trials):
        s = timing.summarise(rng.normal(10.0, 2.0, size=6))
        covered += abs(s.mean - 10.0) <= s.ci95
    assert 0.93 < covered / trials < 0.97


def test_empty_sample_is_an_error():
    with pytest.raises(ValueError):
        timing.summarise([])


class FakeDevice:
    """A device whose steps are queued and only take time when synchronised."""

    def __init__(self, clock):
        self.clock, self.queued, self.steps = clock, 0, 0

    def step(self):
        self.queued += 1
        self.steps += 1

    def sync(self):
        self.clock.now += 0.5 * self.queued
        self.queued = 0


class FakeClock:
    now = 100.0

    def __call__(self):
        return self.now


def test_windows_exclude_warmup_and_include_queued_work(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    device = FakeDevice(clock)
    lines = []
    windows = timing.time_windows(device.step, device.sync, 4, 3, 2, lines.append)
    assert device.steps == 4 + 3 * 2
    assert windows == [1.0, 1.0, 1.0]  # 2 steps x 0.5 s each, warm-up's 2 s excluded
    assert len(lines) == 3


def test_protocol_rejects_zero_timed_steps():
    with pytest.raises(ValueError):
        timing.time_windows(lambda: None, lambda: None, 1, 0, 5)


def test_slowest_rank_sets_each_window():
    assert timing.slowest_rank([[1.0, 3.0], [2.0, 1.0]]) == [2.0, 3.0]
    with pytest.raises(ValueError):
        timing.slowest_rank([[1.0, 2.0], [1.0]])


def test_throughput_counts_every_device():
    m = timing.throughput_measurement(
        [2.0, 4.0], steps_per_window=5, batch_per_device=8, world_size=2
    )
    assert m["images_per_window"] == 80
    assert m["img_s"] == [40.0, 20.0]
    assert m["summary"]["img_s_per_device"]["mean"] == 15.0
    assert m["summary"]["step_time_s"]["mean"] == pytest.approx(0.6)


class NoisySteps:
    """Steps whose durations come from a list (the clock advances by them)."""

    def __init__(self, clock, durations):
        self.clock, self.durations, self.calls = clock, list(durations), 0

    def step(self):
        self.clock.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1


def adaptive(monkeypatch, durations, **kwargs):
    clock = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    steps = NoisySteps(clock, durations)
    return timing.time_windows(steps.step, lambda: None, 1, 3, 1, **kwargs)


def test_adaptive_stops_as_soon_as_the_interval_is_narrow_enough(monkeypatch):
    steady = [1.0] + [1.0, 1.01, 0.99] + [1.0] * 20  # warm-up, then tight windows
    windows = adaptive(monkeypatch, steady, target_ci=0.05, max_windows=20)
    assert len(windows) == 3  # the minimum: already within 5%


def test_adaptive_keeps_timing_noisy_windows_up_to_max_windows(monkeypatch):
    noisy = [1.0] + [1.0, 2.0] * 20
    windows = adaptive(monkeypatch, noisy, target_ci=0.01, max_windows=8)
    assert len(windows) == 8
    assert not timing.ci_reached(windows, 0.01)


def test_adaptive_adds_windows_until_the_target_is_met(monkeypatch):
    settling = [1.0] + [1.0, 1.5, 1.0] + [1.0] * 40
    windows = adaptive(monkeypatch, settling, target_ci=0.1, max_windows=40)
    assert 3 < len(windows) < 40
    assert timing.ci_reached(windows, 0.1)
    assert not timing.ci_reached(windows[:-1], 0.1)


def test_several_ranks_adapt_only_with_an_agreement(monkeypatch):
    with pytest.raises(ValueError, match="agree"):
        adaptive(monkeypatch, [1.0], target_ci=0.05, max_windows=5, world_size=2)
    votes = []

    def agree(done_here):  # another rank is never done: every rank runs max_windows
        votes.append(done_here)
        return False

    windows = adaptive(
        monkeypatch, [1.0] * 10, target_ci=0.05, max_windows=5, world_size=2, agree=agree
    )
    assert len(windows) == 5 and votes[0] is True


def test_time_windows_records_the_wall_clock_span(monkeypatch):
    before = timing.time.time()
    timing.time_windows(lambda: None, lambda: None, 1, 2, 1)
    start, end = timing.last_timed_span()
    assert before <= start <= end <= timing.time.time()
