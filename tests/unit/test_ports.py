"""Rendezvous ports come from below the kernel's ephemeral range, where no bind(0) or
connect() of another process can take them between the pick and the rendezvous's bind."""

from __future__ import annotations

import socket

from dpscale.launch import ports


def test_a_port_is_picked_below_the_ephemeral_range_and_can_be_bound(tmp_path, monkeypatch):
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", ranges)
    for _ in range(20):
        port = ports.free_port("127.0.0.1")
        assert ports.LOWEST <= port < 32768
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_taken_is_not_picked(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        number = taken.getsockname()[1]
        taken.listen()
        assert not ports.bindable(number, "127.0.0.1")
        monkeypatch.setattr(ports.random, "sample", lambda *_: [number, number + 1])
        assert ports.free_port("127.0.0.1") != number


def test_without_room_below_the_ephemeral_range_the_kernel_picks(tmp_path, monkeypatch):
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("1024 65535\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", ranges)
    assert ports.ephemeral_start(ranges) == 1024
    assert 0 < ports.free_port("127.0.0.1") < 65536
    assert ports.ephemeral_start(tmp_path / "missing") == 32768
