"""A strategy's declared traffic (plan.traffic): each form's known answers, the one price,
the study model reading it, and the declaration required of every strategy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_commmodel import NETWORKS, PARAMS, TRUE, value, windows_of

from dpscale.analysis.laws import commmodel
from dpscale.plan import ring, traffic
from dpscale.plan.errors import ConfigError
from dpscale.plan.model_inputs import model_inputs
from dpscale.plan.strategy import Strategy
from dpscale.plan.traffic import (
    ParameterServers,
    ReduceScatterAllGather,
    RingAllReduce,
    traffic_of,
)
from dpscale.registry import STRATEGIES


@pytest.mark.parametrize(("nodes", "devices"), [(1, 1), (1, 2), (2, 1), (4, 2), (8, 8)])
def test_the_ring_is_nccl_tests_ring(nodes, devices):
    ranks = nodes * devices
    priced = traffic.seconds(RingAllReduce(), 4e7, nodes, devices, 1e9, 1e-5)
    assert priced == ring.ring_allreduce_seconds(4e7, ranks, 1e9, 1e-5)


def test_reduce_scatter_and_all_gathers_send_a_ring_pass_each():
    # 8 ranks: each pass carries 7/8 of the bytes and takes 7 hops
    assert ReduceScatterAllGather(1).wire_factor(2, 4) == pytest.approx(2 * 7 / 8)
    assert ReduceScatterAllGather(2).wire_factor(2, 4) == pytest.approx(3 * 7 / 8)
    assert ReduceScatterAllGather(2).hops(2, 4) == 21


@pytest.mark.parametrize(("servers", "factor"), [(8, 1.75), (4, 2.5), (1, 7.0)])
def test_servers_on_eight_machines_summing_their_gpus_first(servers, factor):
    assert ParameterServers(servers, per_node=True).wire_factor(8, 8) == pytest.approx(factor)


def test_as_many_servers_as_nodes_move_what_a_ring_over_the_nodes_moves():
    for nodes in (2, 3, 8):
        shards = ParameterServers(nodes).wire_factor(nodes, 1)
        assert shards == pytest.approx(ring.ring_factor(nodes))


def test_every_device_of_a_node_pushes_its_own_gradient_without_node_sums():
    # one server on node 0 of 8: its NIC takes 7 nodes' pushes, 2 workers each
    assert ParameterServers(1).wire_factor(8, 2) == pytest.approx(14.0)
    # one node: the server process takes both workers' gradients
    assert ParameterServers(1).wire_factor(1, 2) == pytest.approx(2.0)
    assert ParameterServers(1).hops(8, 2) == 2


def test_shards_on_the_devices_of_one_node():
    devices = np.array([1.0, 2.0, 4.0, 8.0])
    # DataParallel: device 0 takes the other replicas' gradients
    assert list(ParameterServers(1, on_workers=True).wire_factor(1, devices)) == [0, 1, 3, 7]
    # a shard on every device: the ring's share
    every = ParameterServers(None, on_workers=True).wire_factor(1, devices)
    assert every == pytest.approx(ring.ring_factor(devices))


def test_arrays_and_numbers_price_alike():
    nodes, devices = np.array([1.0, 2.0, 8.0]), np.array([2.0, 2.0, 1.0])
    for declared in (RingAllReduce(), ReduceScatterAllGather(2), ParameterServers(3)):
        rows = declared.wire_factor(nodes, devices)
        single = [declared.wire_factor(n, d) for n, d in zip(nodes, devices, strict=True)]
        assert rows == pytest.approx(single)


def test_a_strategys_option_sets_its_server_count():
    declared = ParameterServers(1, option="mxnet_servers")
    assert traffic.resolved(declared, {"mxnet_servers": 4}).servers == 4
    assert traffic.resolved(declared, {}).servers == 1
    assert traffic.resolved(RingAllReduce(), {"mxnet_servers": 4}) == RingAllReduce()


def test_every_registered_strategy_declares_its_traffic():
    for strategy in STRATEGIES.values():
        assert strategy.declared_traffic().kind in traffic.KINDS


def test_a_strategy_without_traffic_is_one_line_naming_it():
    bare = Strategy("bare", "torch", "torch", "single", "x", True, False)
    with pytest.raises(ConfigError, match=r"^strategies: bare declares no traffic") as error:
        bare.declared_traffic()
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "entry",
    [
        {"kind": "ring_allreduce"},
        {"kind": "parameter_servers", "servers": 4, "per_node": True},
        {"kind": "parameter_servers", "servers": None, "on_workers": True},
        {"kind": "reduce_scatter_all_gather", "gathers": 2},
    ],
)
def test_traffic_written_as_data_reads_back(entry):
    read = traffic.from_dict(entry, "cases[0].traffic")
    assert traffic.from_dict(read.to_dict(), "again") == read


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["kind", "servers", "per_node", "on_workers", "gathers", "rate"]),
        st.one_of(
            st.sampled_from(list(traffic.KINDS)),
            st.integers(-3, 9),
            st.booleans(),
            st.none(),
            st.text(max_size=5),
            st.floats(allow_nan=True),
        ),
    )
)
def test_any_traffic_entry_reads_or_is_one_line_naming_its_field(entry):
    try:
        read = traffic.from_dict(entry, "cases[3].traffic")
    except ConfigError as error:
        assert str(error).startswith("cases[3].traffic.") and "\n" not in str(error)
        assert "allowed:" in str(error)
    else:
        assert read.kind == entry["kind"]


def test_the_study_model_reads_each_configured_strategys_traffic():
    config = {
        "networks": ["host"],
        "devices_per_node": [1, 2],
        "batch_sizes": [8],
        "strategies": ["torch-ddp", "mxnet-dist"],
        "mxnet_servers": 2,
    }
    read = traffic_of(model_inputs(config, STRATEGIES)["traffic"])
    assert read["torch-ddp"] == RingAllReduce()
    assert read["mxnet-dist"] == ParameterServers(2)


# --- a strategy the model never heard of, with reduce-scatter + all-gather traffic ---

ZERO = "zero-test"


def zero_windows(declared: traffic.Traffic) -> pd.DataFrame:
    """test_commmodel's synthetic study, its network part priced by ``declared``."""
    rate = {"slow": 1e9 / 8 * TRUE["eta"], "fast": 1e10 / 8 * TRUE["eta"], "host": TRUE["host"]}

    def step_of(nodes: int, devices: int, network: str, batch: int) -> float:
        colocated = nodes * devices if network != "host" else devices
        step = (1 + TRUE["sigma"] * (colocated - 1)) * batch / TRUE["v0"] + TRUE["t_c1"]
        if nodes * devices == 1:
            return step
        latency = TRUE["alpha0"]
        return step + traffic.seconds(declared, 4 * PARAMS, nodes, devices, rate[network], latency)

    return windows_of(step_of, strategy=ZERO)


def fit_zero(declared: traffic.Traffic, windows: pd.DataFrame) -> pd.DataFrame:
    _, parameters, _, _ = commmodel.analyse(
        windows, {"m": PARAMS}, NETWORKS, {ZERO: declared}, forms=("additive",), validate=False
    )
    return parameters


def test_a_new_strategys_declared_traffic_is_what_the_model_fits():
    fsdp = ReduceScatterAllGather(gathers=2)
    parameters = fit_zero(fsdp, zero_windows(fsdp))
    for name in ("v0", "t_c1", "sigma", "alpha0", "eta"):
        assert value(parameters, "additive", name) == pytest.approx(TRUE[name], rel=1e-3), name
    # the same measurements read as a ring: the link looks half as fast as it is
    as_ring = fit_zero(RingAllReduce(), zero_windows(fsdp))
    assert not math.isclose(value(as_ring, "additive", "eta"), TRUE["eta"], rel_tol=0.2)


def test_a_strategy_missing_from_the_models_traffic_is_refused():
    with pytest.raises(KeyError, match="zero-test has no declared traffic"):
        fit_zero_missing = commmodel.analyse(
            zero_windows(RingAllReduce()), {"m": PARAMS}, NETWORKS, {}, forms=("additive",)
        )
        del fit_zero_missing
