"""plan.link.Link: one unit (bytes/s, s) whichever way a link is known."""

from __future__ import annotations

import math

import pytest

from dpscale.plan.link import HOST_LINK, Link


def test_a_configured_rate_and_delay_are_bytes_per_second_and_seconds():
    link = Link.from_rate(
        "10gbe", "10gbit", "50us", field="networks.10gbe", emulated=True, source="rate"
    )
    assert (link.bytes_per_s, link.latency_s) == (1.25e9, pytest.approx(5e-5))
    assert (link.bits_per_s, link.gbit_per_s, link.known) == (1e10, 10.0, True)
    assert link.words() == "10 Gbit/s, 50 us latency"


def test_a_measured_fit_is_the_same_unit_and_a_negative_alpha_is_no_latency():
    link = Link.from_alpha_beta("1gbe", alpha_s=-1e-6, beta_gb_s=0.117)
    assert link.bytes_per_s == pytest.approx(1.17e8) and link.latency_s == 0.0
    assert link.source == "comm_fits" and link.words() == "0.936 Gbit/s"


def test_the_host_link_is_unknown_until_fitted():
    assert HOST_LINK.name == "host" and not HOST_LINK.known and math.isnan(HOST_LINK.bytes_per_s)
    assert HOST_LINK.words() == "host (fitted)"


def test_a_bad_rate_names_its_field():
    with pytest.raises(ValueError, match=r"^predict.networks\[0\].rate: '10 gigabit'"):
        Link.from_rate("x", "10 gigabit", field="predict.networks[0]", emulated=False, source="p")


def test_the_emulation_and_the_model_read_one_link_from_a_network():
    from dpscale.launch.emulation.netns import shaping
    from dpscale.plan.cell import Network
    from dpscale.plan.model_inputs import configured_links

    entry = {"name": "lan", "rate": "2.5gbit", "delay": "100us"}
    link = Network.from_config(entry).link
    assert configured_links([entry]) == [link]
    assert link.bytes_per_s == 2.5e9 / 8 and link.latency_s == pytest.approx(1e-4)
    assert link.emulated
    root, delay = shaping(link)
    assert root[root.index("rate") + 1] == "2500000000bit"
    assert delay[-1] == "50us"  # half the delay on each of the two ports between two nodes
    assert Network.from_config("host").link == Link("host")
