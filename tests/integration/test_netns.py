"""Emulated nodes: network namespaces are built, shaped and always removed.

Needs root and iproute2 (this project's CI and development machines have both); without
them the tests are skipped, and so are emulated cells (with that reason).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import make_cell
from dpscale.launch import checks, launcher, supervise
from dpscale.launch.emulation import netns
from dpscale.plan.cell import Network
from dpscale.plan.link import Link
from dpscale.registry import STRATEGIES
from helpers.quiet import machine_bench_lock, wait_for_quiet

# the strategy of the two-node cells the namespace tests start and kill
TWO_NODES = "torch-ddp"


def link(rate: str, delay: str | None = None) -> Link:
    """The link a cell's emulated network gives (plan.cell.Network.link)."""
    return Network("lan", rate=rate, delay=delay).link


pytestmark = pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable()))


def test_namespaces_are_created_and_removed():
    before = set(netns.leftover())
    with netns.emulated_nodes(3, link("100mbit")) as nodes:
        assert set(netns.leftover()) - before == {*nodes.names, nodes.hub}
        shown = subprocess.run(
            [*nodes.exec_prefix(2), "ip", "-o", "-4", "addr", "show", "dev", nodes.interface],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert nodes.addresses[2] in shown
    assert set(netns.leftover()) == before


def test_namespaces_are_removed_when_the_body_fails():
    before = set(netns.leftover())
    with pytest.raises(RuntimeError), netns.emulated_nodes(2, link("1gbit")):
        raise RuntimeError("a cell crashed")
    assert set(netns.leftover()) == before


@pytest.mark.parametrize("rate", ["100mbit", "1gbit"])
def test_a_shaped_link_carries_its_rate(rate):
    with netns.emulated_nodes(2, link(rate)) as nodes:
        carried = netns.probe(nodes, mbytes=8 if rate == "100mbit" else 48)
    assert carried == pytest.approx(link(rate).bytes_per_s, rel=0.15)


def test_a_delay_without_netem_is_a_reason_not_a_silent_run():
    reason = netns.unavailable(link("1gbit", "100us").latency_s)
    if reason is None:
        pytest.skip("this kernel has netem: delays are emulated")
    cell = make_cell("torch-ddp", nodes=2, network=Network("lan", rate="1gbit", delay="100us"))
    assert checks.runtime_skip_reason(cell) == reason


def test_emulated_cells_are_for_one_machine_not_for_slurm_jobs():
    cell = make_cell("torch-ddp", nodes=2, network=Network("lan", rate="1gbit"))
    assert checks.runtime_skip_reason(cell) is None
    allocation = object()  # any allocation: the cell must not run on the host network
    assert "emulated on one machine" in checks.runtime_skip_reason(cell, allocation)


def wait_until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
    return condition()


def two_node_cell(measure):
    """The namespace tests' cell: TWO_NODES on 2 emulated nodes over 1 GbE, one process each."""
    cell = make_cell(TWO_NODES, nodes=2, batch=4, network=Network("lan", rate="1gbit"))
    return type(cell).from_dict({**cell.to_dict(), "measure": vars(measure)})


def start_two_node_cell(tmp_path, own_group: bool = False, **measure_fields):
    """A 2-node torch-ddp cell on an emulated 1 GbE link, its launcher started as Snakemake
    starts it (``own_group``: in a process group of its own, as a job scheduler starts a job);
    returns (launcher, result path, log path) once the first window is logged."""
    from dpscale.launch.setup.envs import ensure_env
    from dpscale.plan.cell import Measure

    cell = two_node_cell(Measure(1, 500, 2, 300, **measure_fields))
    out, log = tmp_path / "cells" / "c.json", tmp_path / "c.log"
    command = [sys.executable, "-m", "dpscale.launch", "--cell", cell.to_json()]
    command += [
        "--env",
        str(ensure_env(STRATEGIES[TWO_NODES].env)),
        "--out",
        str(out),
        "--log",
        str(log),
    ]
    env = dict(os.environ, DPSCALE_LOCK_DIR=str(tmp_path))
    launcher = subprocess.Popen(command, env=env, start_new_session=own_group)
    first_window = wait_until(lambda: "window 1/" in (log.read_text() if log.exists() else ""), 120)
    if not first_window:
        launcher.kill()
    assert first_window
    return launcher, out, log


@pytest.mark.slow
def test_a_killed_emulated_cell_leaves_no_namespace_and_no_rank(tmp_path):
    """SIGTERM to the launcher of a 2-node torch-ddp cell while it measures (what Snakemake
    sends a job it stops): its namespaces and rank processes are gone within seconds."""
    before = set(netns.leftover())
    launcher, out, _ = start_two_node_cell(tmp_path)
    try:
        assert len(set(netns.leftover()) - before) == 3  # two nodes and the switch
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(timeout=30)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert wait_until(lambda: set(netns.leftover()) == before, 10)
    ranks = subprocess.run(["pgrep", "-f", str(out)], capture_output=True)
    assert ranks.stdout.strip() == b"", ranks.stdout


def scratch_folders_of(pid: int) -> list[Path]:
    """The scratch folders whose record names launcher ``pid`` (supervise.scratch_folder)."""
    folders = Path(tempfile.gettempdir()).glob(supervise.SCRATCH_PREFIX + "*")
    return [
        folder
        for folder in folders
        if (folder / supervise.SCRATCH_OWNER).is_file()
        and json.loads((folder / supervise.SCRATCH_OWNER).read_text())["pid"] == pid
    ]


@pytest.mark.slow
def test_what_a_killed_launcher_left_is_removed_by_the_next_launch(tmp_path, monkeypatch):
    """SIGKILL of the launcher's whole process group (a closed terminal, a scheduler's kill):
    its ranks die with it, its namespaces and scratch folder cannot be removed by it; the
    next launch removes them before it builds its own, and measures."""
    from dpscale.launch.setup.envs import ensure_env
    from dpscale.plan.cell import Measure
    from dpscale.plan.result import read_result

    before = set(netns.leftover())
    killed, out, _ = start_two_node_cell(tmp_path, own_group=True)
    left = set(netns.leftover()) - before
    assert len(left) == 3  # two nodes and the switch
    [scratch] = scratch_folders_of(killed.pid)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    pgrep = ["pgrep", "-f", str(out)]
    ranks_gone = wait_until(lambda: not subprocess.run(pgrep, capture_output=True).stdout, 30)
    assert ranks_gone
    assert set(netns.leftover()) - before == left  # nothing removed them

    cell = two_node_cell(Measure(1, 2, 2, 300))
    out, log = cell.result_path(tmp_path / "next"), tmp_path / "next.log"
    monkeypatch.setenv("DPSCALE_LOCK_DIR", str(tmp_path))
    status = launcher.launch(cell, out, ensure_env(STRATEGIES[TWO_NODES].env), log)
    result = read_result(out)
    assert status == result["status"] == "ok", result["reason"]
    assert "removed namespaces of launchers that died" in log.read_text()
    assert set(netns.leftover()) == before
    assert f"removed scratch folders of launchers that died: ['{scratch.name}'" in log.read_text()
    assert not scratch.exists()
    # what the multi-node test below checks of every other strategy's two-node cell
    assert len(result["measurement"]["per_rank_window_seconds"]) == 2


def test_only_namespaces_whose_recorded_launcher_died_are_reaped(tmp_path, monkeypatch):
    """A namespace no record names is not dpscale's, and one whose launcher still runs is in
    use: both stay. Records are kept in a folder of the test's own."""
    monkeypatch.setattr(netns, "OWNERS", tmp_path / "owners")
    dead, alive, foreign = "dpstestdead", "dpstestalive", "dpstestforeign"
    gone = subprocess.Popen(["sleep", "0"])
    gone_start = netns.process_start(gone.pid)
    gone.wait()
    try:
        for name in (dead, alive, foreign):
            subprocess.run(["ip", "netns", "add", name], check=True, timeout=10)
        netns._record_owner("dpstestmine", [alive])  # this process: alive
        record = netns.OWNERS / "dpstestgone.json"
        record.write_text(json.dumps({"pid": gone.pid, "start": gone_start, "namespaces": [dead]}))
        assert netns.reap_orphans() == [dead]
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        names = {line.split()[0] for line in listed.splitlines()}
        assert dead not in names and {alive, foreign} <= names
        assert not record.exists()
    finally:
        netns.remove([dead, alive, foreign])


# every multi-node strategy but the one whose two-node cell the killed-launcher test
# measures after the kill (the same cell: 2 nodes over 1 GbE, one process each)
MULTI_NODE = sorted(
    name
    for name, s in STRATEGIES.items()
    if s.multi_node and not s.one_process and name != TWO_NODES
)
# mxnet-dist with a server per node: server k in node k's namespace, at its address
SPREAD_SERVERS = pytest.param("mxnet-dist", (("mxnet_servers", 2),), id="mxnet-dist-2-servers")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "options"), [*((name, ()) for name in MULTI_NODE), SPREAD_SERVERS]
)
def test_every_multi_node_strategy_measures_two_nodes_over_an_emulated_link(
    tmp_path, monkeypatch, name, options
):
    """One process on each of 2 emulated nodes, for every multi-node strategy: the ranks find
    each other over the shaped link (Horovod's process sets once advertised 127.0.0.1 there),
    and no namespace or /etc/netns file is left. mxnet-dist's servers: the one of the
    default beside the scheduler on node 0, or one on each node."""
    from dpscale.launch.setup.envs import ensure_env
    from dpscale.plan.cell import Measure
    from dpscale.plan.result import read_result

    before = set(netns.leftover())
    network = Network("lan", rate="1gbit")
    cell = make_cell(name, nodes=2, batch=4, network=network, options=options)
    cell = type(cell).from_dict({**cell.to_dict(), "measure": vars(Measure(1, 2, 2, 300))})
    out, log = cell.result_path(tmp_path / "results"), tmp_path / "cell.log"
    monkeypatch.setenv("DPSCALE_LOCK_DIR", str(tmp_path))
    status = launcher.launch(cell, out, ensure_env(STRATEGIES[name].env), log)
    result = read_result(out)
    assert status == result["status"] == "ok", (result["reason"], log.read_text()[-2000:])
    assert result["cell"]["world_size"] == 2
    assert len(result["measurement"]["per_rank_window_seconds"]) == 2
    if name == "mxnet-dist":
        servers = dict(options).get("mxnet_servers", 1)
        assert result["system"]["mxnet_server_nodes"] == [0, 1][:servers]
    assert set(netns.leftover()) == before


@pytest.mark.slow
def test_a_network_cell_on_a_quiet_machine_is_ok(tmp_path, monkeypatch):
    """The kernel's work for the cell's own traffic (softirq over the veth pair and the
    shaped link) is reported apart, not as a neighbour; both emulated nodes' ranks are
    the cell's CPUs."""
    from dpscale.launch.contention import NOISY_CORES
    from dpscale.launch.setup.envs import ensure_env
    from dpscale.plan.cell import Measure
    from dpscale.plan.result import read_result

    cell = make_cell("torch-ddp", nodes=2, batch=8, network=Network("lan", rate="10gbit"))
    cell = type(cell).from_dict({**cell.to_dict(), "measure": vars(Measure(2, 3, 3, 300))})
    out, log = cell.result_path(tmp_path / "results"), tmp_path / "cell.log"
    prefix = ensure_env("torch")
    monkeypatch.setenv("DPSCALE_LOCK_DIR", str(tmp_path))  # this test holds the real one
    with machine_bench_lock():
        wait_for_quiet(below_cores=NOISY_CORES / 2)
        status = launcher.launch(cell, out, prefix, log)
    result = read_result(out)
    assert status == "ok", result["reason"]
    contention = result["system"]["contention"]
    assert contention["cpus_used_by_cell"] == 2
    assert contention["interrupt_cpu_cores_mean"] is not None
    assert result["quality"] == "ok", f"{result['quality_reason']}: {json.dumps(contention)}"


@pytest.mark.slow
def test_a_network_study_runs_two_nodes_over_emulated_links(tmp_path):
    """studies/post003_interconnect_mini.yaml, shrunk: 2 processes on one node and on 2
    emulated nodes over 1 GbE and 10 GbE, without and (on one node and 1 GbE) with fp16
    compression; every 2-node cell measured, every rank in step; the all-reduce per message
    size on each network; the remedy beside no remedy, with the fraction of the slow link's
    cost it recovers."""
    import pandas as pd

    from conftest import REPO

    shrink = tmp_path / "shrink.yaml"
    shrink.write_text(
        "batch_sizes: [8]\n"
        # the preset adds windows up to 10 (target_ci) and measures noisy cells again: a fixed
        # 2 windows, once, is what this test needs (adaptive windows and again have their own)
        "measure: {warmup_steps: 1, windows: 2, steps_per_window: 2, repeats: 1, timeout_s: 300,"
        " target_ci: null, max_windows: null, again: []}\n"
        "collectives: {max_bytes: 4194304, factor: 32, windows: 2}\n"
        "modes: [synthetic, collectives]\n"
        # fp16 where the remedies table reads it (the slow link) and on one node: its cells
        # over the fast link would add two 2-node cells and nothing this test checks
        "comm: [none, {name: fp16, networks: [host, 1gbe]}]\n"
    )
    # the tables checked below and what they are made from, not every figure and page of
    # the report (the e2e tests run a whole study's DAG)
    target = tmp_path / "post003_interconnect_mini" / "tables" / "remedies.csv"
    command = [sys.executable, "-m", "snakemake", str(target), "--configfile"]
    command += ["studies/post003_interconnect_mini.yaml", str(shrink)]
    command += ["--config", f"results_dir={tmp_path}"]
    env = dict(os.environ, DPSCALE_LOCK_DIR=str(tmp_path))
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    cells = pd.read_csv(tmp_path / "post003_interconnect_mini" / "tables" / "cells.csv")
    two_nodes = cells[(cells["nodes"] == 2) & (cells["devices_per_node"] == 1)]
    assert sorted(set(two_nodes["network"])) == ["10gbe", "1gbe"]
    assert set(two_nodes["status"]) == {"ok"}, two_nodes[["cell_id", "reason"]]
    four = cells[(cells["nodes"] == 2) & (cells["devices_per_node"] == 2)]
    assert set(four["status"]) == {"skipped"}  # 4 processes on 2 cores
    fits = pd.read_csv(tmp_path / "post003_interconnect_mini" / "tables" / "fits.csv")
    assert {"1gbe", "10gbe", "host"} <= set(fits["network"])
    tables = tmp_path / "post003_interconnect_mini" / "tables"
    sizes = pd.read_csv(tables / "collectives.csv")
    assert set(sizes["network"]) == {"1gbe", "10gbe", "host"}
    assert set(sizes["message_bytes"]) == {4, 128, 4096, 131072, 4194304}
    assert set(pd.read_csv(tables / "comm_fits.csv")["network"]) == {"1gbe", "10gbe", "host"}
    fp16 = sizes[sizes["comm"] == "fp16"]
    assert set(fp16["network"]) == {"1gbe", "host"}
    assert (fp16["wire_bytes"] * 2 == fp16["message_bytes"]).all()
    remedies = pd.read_csv(tables / "remedies.csv")
    slow = remedies[(remedies["network"] == "1gbe") & (remedies["comm"] == "fp16")]
    assert len(slow) == 1 and (slow["fastest_network"] == "10gbe").all()
    assert slow["fraction_recovered"].notna().all() and slow["gain_vs_none"].notna().all()
    assert (remedies["wire_ratio"] == 2.0).all()
    assert set(netns.leftover()) == set()


@pytest.mark.slow
def test_a_partitioned_network_fails_the_cell_and_removes_the_namespaces(tmp_path):
    """The emulated link of a 2-node torch-ddp cell is taken down while it measures: the
    cell ends failed with the reason (gloo's timeout, twice measure.collective_timeout_s),
    within the bound, and no namespace or rank is left."""
    from dpscale.plan.result import read_result

    before = set(netns.leftover())
    launcher, out, _ = start_two_node_cell(tmp_path, collective_timeout_s=5)
    try:
        hub = next(n for n in set(netns.leftover()) - before if n.endswith("hub"))
        subprocess.run(["ip", "-n", hub, "link", "set", "p1", "down"], check=True, timeout=10)
        cut = time.monotonic()
        launcher.wait(timeout=120)
        detected_s = time.monotonic() - cut
    finally:
        if launcher.poll() is None:
            launcher.kill()
    result = read_result(out)
    assert result["status"] == "failed", result["reason"]
    assert result["reason"], result
    print(f"partition detected after {detected_s:.1f} s: {result['reason']}")
    assert wait_until(lambda: set(netns.leftover()) == before, 10)
    ranks = subprocess.run(["pgrep", "-f", str(out)], capture_output=True)
    assert ranks.stdout.strip() == b"", ranks.stdout
