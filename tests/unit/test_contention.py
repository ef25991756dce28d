"""Contention sampling and the quality verdict (the launcher's real-neighbour tests are in
test_launch.py)."""

import pytest

from dpscale.launch import contention as c

TICK = c.CLOCK_TICKS


def sample(wall, busy_s, own_s, steal_s=0.0, idle_s=0.0):
    return c.Sample(
        wall=wall,
        busy=round(busy_s * TICK),
        idle=round(idle_s * TICK),
        steal=round(steal_s * TICK),
        own=round(own_s * TICK),
        loadavg_1m=1.0,
    )


def summary(samples, span=None, cpus=2, used=2):
    return c.summarise_contention(samples, span, cpus, used)


def test_foreign_cpu_is_machine_busy_minus_the_cell():
    # 2 s: the machine was busy 3 CPU-seconds, the cell used 2 of them
    s = summary(
        [sample(0, 0, 0, idle_s=0), sample(1, 1.5, 1, idle_s=0.5), sample(2, 3, 2, idle_s=1)]
    )
    assert s["foreign_cpu_cores_mean"] == pytest.approx(0.5)
    assert s["cell_cpu_cores_mean"] == pytest.approx(1.0)
    assert s["samples"] == 3


def test_only_the_samples_that_bracket_the_timed_span_count():
    samples = [sample(0, 0, 0), sample(1, 2, 0), sample(2, 3, 1), sample(3, 4, 2), sample(4, 6, 2)]
    s = summary(samples, span=[1.2, 2.8])  # bracketed by the samples at 1 and 3
    assert s["samples"] == 3
    assert s["foreign_cpu_cores_mean"] == pytest.approx(0.0)
    assert s["foreign_cpu_cores_max"] == pytest.approx(0.0)
    assert summary(samples)["foreign_cpu_cores_max"] == pytest.approx(2.0)


def test_verdicts_follow_the_documented_thresholds():
    quiet = summary([sample(0, 0, 0), sample(10, 20, 20)])
    assert c.verdict(quiet)[0] == "ok"
    light = summary([sample(0, 0, 0), sample(10, 21, 20)])  # 0.1 core taken from the cell
    assert c.verdict(light)[0] == "noisy"
    heavy = summary([sample(0, 0, 0), sample(10, 25, 20)])  # 0.5 core
    assert c.verdict(heavy)[0] == "contaminated"
    stolen = summary([sample(0, 0, 0), sample(10, 20, 20, steal_s=2)])
    assert c.verdict(stolen)[0] == "contaminated"


def test_work_on_spare_cpus_is_noise_not_contamination():
    # the cell uses 1 of 2 CPUs; a neighbour on the other CPU takes none of its CPU time
    # but shares the machine's caches and memory bandwidth
    s = summary([sample(0, 0, 0), sample(10, 19, 10)], cpus=2, used=1)
    assert s["spare_cpus"] == 1
    assert c.verdict(s)[0] == "noisy"
    barely = summary([sample(0, 0, 0), sample(10, 10.2, 10)], cpus=2, used=1)
    assert c.verdict(barely)[0] == "ok"  # 0.02 core: below the noise threshold


def test_too_few_samples_is_unknown():
    assert c.verdict(summary([sample(0, 0, 0)]))[0] == "unknown"


def test_descendants_of_a_tree():
    parents = {2: 1, 3: 2, 4: 2, 5: 9, 6: 3}
    assert c.descendants(2, parents) == {2, 3, 4, 6}


def test_a_disabled_sampler_takes_no_sample_and_annotates_nothing(tmp_path):
    with c.sampling(enabled=False) as sampler:
        pass
    assert sampler.samples == []
    assert c.annotate({"status": "ok"}, sampler, cell=None) is None


def fake_proc(root, processes):
    """/proc with the machine's counters and ``{pid: (ppid, utime, cutime)}``."""
    root.mkdir(exist_ok=True)
    (root / "stat").write_text("cpu  100 0 0 100 0 0 0 0\ncpu0 50 0 0 50\ncpu1 50 0 0 50\n")
    (root / "loadavg").write_text("0.10 0.10 0.10 1/100 1\n")
    for entry in root.iterdir():
        if entry.name.isdigit() and int(entry.name) not in processes:
            (entry / "stat").unlink()
            entry.rmdir()
    for pid, (ppid, utime, cutime) in processes.items():
        (root / str(pid)).mkdir(exist_ok=True)
        fields = f"{pid} (py) S {ppid} " + "0 " * 9 + f"{utime} 0 {cutime} 0 0 0"
        (root / str(pid) / "stat").write_text(fields)


def test_a_child_that_exits_between_samples_is_counted_whole_in_its_parent(tmp_path):
    proc = tmp_path / "proc"
    fake_proc(proc, {10: (1, 5, 0), 11: (10, 40, 0)})
    sampler = c.ContentionSampler(root=10, proc=proc)
    sampler.sample()
    # the child ran 30 more jiffies, exited, and the parent waited for it (cutime 70)
    fake_proc(proc, {10: (1, 5, 70)})
    sampler.sample()
    first, second = sampler.samples
    assert second.own - first.own == 30


def test_an_orphan_reaped_outside_the_tree_keeps_its_last_reading(tmp_path):
    proc = tmp_path / "proc"
    fake_proc(proc, {10: (1, 5, 0), 11: (10, 40, 0), 12: (11, 20, 0)})
    sampler = c.ContentionSampler(root=10, proc=proc)
    sampler.sample()
    fake_proc(proc, {10: (1, 5, 40), 12: (1, 25, 0)})  # 11 exited, 10 waited; 12 ran on
    sampler.sample()
    fake_proc(proc, {10: (1, 5, 40)})  # 12 exited, reaped by init, outside the tree
    sampler.sample()
    assert [s.own for s in sampler.samples] == [65, 70, 70]


def test_interrupt_work_is_reported_and_not_foreign(tmp_path):
    # /proc/stat: user nice system idle iowait irq softirq steal, in jiffies
    def stat(user, system, idle, softirq):
        line = f"cpu {user} 0 {system} {idle} 0 0 {softirq} 0"
        (tmp_path / "stat").write_text(f"{line}\ncpu0 0\ncpu1 0\n")
        return c.read_machine_times(tmp_path)

    before, after = stat(100, 50, 1000, 10), stat(100 + TICK, 50, 1000, 10 + TICK // 5)
    assert after.busy - before.busy == TICK and after.interrupts - before.interrupts == TICK // 5
    # 1 s: the cell used the one busy core, softirq took another 0.2 core (its traffic)
    samples = [
        c.Sample(0, before.busy, before.idle, 0, 0, 1.0, before.interrupts),
        c.Sample(1, after.busy, after.idle, 0, TICK, 1.0, after.interrupts),
    ]
    s = summary(samples)
    assert s["foreign_cpu_cores_mean"] == pytest.approx(0.0)
    assert s["interrupt_cpu_cores_mean"] == pytest.approx((TICK // 5) / TICK)
    assert c.verdict(s)[0] == "ok"


def test_a_parent_and_child_that_exit_together_are_counted_once(tmp_path):
    proc = tmp_path / "proc"
    fake_proc(proc, {10: (1, 5, 0), 11: (10, 10, 0), 12: (11, 20, 0)})
    sampler = c.ContentionSampler(root=10, proc=proc)
    sampler.sample()
    # 12 ran 10 more jiffies and was reaped by 11, which then exited and 10 reaped it:
    # 10's cutime holds both (10 + 30), and neither may count a second time
    fake_proc(proc, {10: (1, 5, 40)})
    sampler.sample()
    assert [s.own for s in sampler.samples] == [35, 45]


def oversubscribed(own_cores: float, cpus: int = 2, used: int = 8) -> dict:
    """An 8-rank cell on 2 CPUs whose own ranks used ``own_cores`` cores, nothing else."""
    s = summary([sample(0, 0, 0), sample(10, 10 * own_cores, 10 * own_cores)], cpus=cpus, used=used)
    s["oversubscribed"] = True
    return s


def test_an_oversubscribed_cell_that_waits_on_the_network_is_kept_and_named():
    quality, reason = c.verdict(oversubscribed(0.6))
    assert quality == "ok"
    assert reason.startswith("oversubscribed: 8 CPUs wanted on 2")
    assert "0.60 cores (30% of the CPUs" in reason and "network-bound" in reason


def test_an_oversubscribed_cell_whose_ranks_fill_the_cores_is_left_out():
    quality, reason = c.verdict(oversubscribed(1.8))
    assert quality == "contaminated"
    assert "CPU-bound, their compute time-shared the cores" in reason


def test_a_cell_within_the_cpus_is_not_called_oversubscribed():
    quiet = summary([sample(0, 0, 0), sample(10, 20, 20)])
    assert "oversubscribed" not in c.verdict(quiet)[1]
