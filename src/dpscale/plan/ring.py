"""The ring all-reduce, as every side counts it (nccl-tests' conventions).

An all-reduce of S bytes over N ranks in a ring sends 2(N-1)/N S bytes over each link in
2(N-1) steps: ``t = 2(N-1)/N S/beta + 2(N-1) alpha`` for link bandwidth beta and per-step
latency alpha. Its algorithm bandwidth is ``algbw = S/t``, its bus bandwidth ``busbw = algbw
2(N-1)/N``: what each link carried, comparable across N and, for large messages, close to the
slowest link's rate. Plain arithmetic: the functions work on numbers and on numpy arrays.
"""

from __future__ import annotations

from typing import Any

FP32_BYTES = 4
FP16_BYTES = 2
# a gradient value's type on the wire by its bytes, as the report names it (a precision, not
# plan.remedies' fp16 remedy, which sends the same type)
VALUE_TYPES = {FP32_BYTES: "fp32", FP16_BYTES: "fp16"}


def gradient_bytes(trainable_params: int, bytes_per_value: int = FP32_BYTES) -> int:
    """The message a data-parallel step all-reduces: one value per trainable parameter."""
    return trainable_params * bytes_per_value


def _check_ranks(ranks: Any) -> None:
    if isinstance(ranks, int | float) and ranks < 1:
        raise ValueError("ranks must be >= 1")


def ring_factor(ranks: Any) -> Any:
    """2(N-1)/N: the share of the message each link of the ring carries, twice."""
    _check_ranks(ranks)
    return 2 * (ranks - 1) / ranks


def ring_allreduce_seconds(
    message_bytes: Any, ranks: Any, bandwidth_bytes_s: Any, latency_s: Any = 0.0
) -> Any:
    """``2(N-1)/N S/beta + 2(N-1) alpha``; 0 for one rank."""
    return ring_factor(ranks) * message_bytes / bandwidth_bytes_s + 2 * (ranks - 1) * latency_s


def effective_bandwidth(message_bytes: float, ranks: int, extra_seconds: float) -> float:
    """The link bandwidth that would explain ``extra_seconds`` of all-reduce at N ranks
    (latency neglected): the ring law solved for beta. NaN when there is nothing to explain."""
    if ranks < 2 or extra_seconds <= 0:
        return float("nan")
    return ring_factor(ranks) * message_bytes / extra_seconds


def algorithm_bandwidth(message_bytes: float, seconds: float) -> float:
    """Bytes per second of an all-reduce of ``message_bytes`` taking ``seconds``."""
    return message_bytes / seconds


def bus_bandwidth(algbw: float, ranks: int) -> float:
    """nccl-tests' all-reduce bus bandwidth: algbw x 2(N-1)/N."""
    return algbw * ring_factor(ranks)
