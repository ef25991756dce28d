"""A bucket timeline of torch's synthetic step: a few extra steps, each timed in its parts
(forward, backward, optimiser), with the time each gradient bucket became ready.

Why: a step's time alone does not say how much of DDP's communication hides behind the
backward pass. A bucket is ready when the last of its parameters' gradients is accumulated
(``register_post_accumulate_grad_hook``, torch>=2.1); what backward takes after the last
bucket is ready is communication left exposed. On CUDA the marks are events on the device's
stream (what the GPU did, not when Python queued it); on CPU, ``time.perf_counter()``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import torch


class Step(Protocol):
    """A training step in its parts (torch_ops.SyntheticStep)."""

    def zero(self) -> None: ...
    def forward(self) -> torch.Tensor: ...
    def backward(self, loss: torch.Tensor) -> None: ...
    def optimize(self) -> None: ...


class Clock:
    """Marks on the host (CPU) or on the current CUDA stream, read as seconds after a
    synchronize (:meth:`settle`)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.name = "cuda events" if self.cuda else "perf_counter"

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def settle(self) -> None:
        """Waits until the device has done the work queued so far (every mark recorded)."""
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def seconds(self, start: Any, end: Any) -> float:
        if self.cuda:
            return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds
        return end - start


@contextlib.contextmanager
def ready_marks(parameters: Sequence[torch.Tensor], clock: Clock) -> Iterator[dict[int, Any]]:
    """Index -> the latest mark of that parameter's gradient accumulation (the caller
    clears it per step); the hooks are removed on leaving, exceptions included."""
    marks: dict[int, Any] = {}
    handles = []

    def marker(index: int) -> Any:
        def fired(_: torch.Tensor) -> None:
            marks[index] = clock.mark()

        return fired

    try:
        for index, parameter in enumerate(parameters):
            handles.append(parameter.register_post_accumulate_grad_hook(marker(index)))
        yield marks
    finally:
        for handle in handles:
            handle.remove()


def timed_step(step: Step, clock: Clock, marks: dict[int, Any]) -> dict[str, Any]:
    """One step in its parts, and each parameter's ready time since backward began."""
    clock.settle()  # the step starts on an idle device
    marks.clear()
    step.zero()
    start = clock.mark()
    loss = step.forward()
    backward = clock.mark()
    step.backward(loss)
    backward_end = clock.mark()
    step.optimize()
    end = clock.mark()
    clock.settle()
    return {
        "forward_s": clock.seconds(start, backward),
        "backward_s": clock.seconds(backward, backward_end),
        "optimizer_s": clock.seconds(backward_end, end),
        "ready": {index: clock.seconds(backward, mark) for index, mark in marks.items()},
    }


def bucket_ready(ready: dict[int, float], indices: range) -> float:
    """A bucket's ready time: its last parameter's."""
    missing = [i for i in indices if i not in ready]
    if missing:
        raise RuntimeError(f"bucket timeline: parameters {missing} got no gradient in backward")
    return max(ready[i] for i in indices)


def record(
    step: Step,
    buckets: Sequence[Sequence[torch.Tensor]],
    steps: int,
    device: torch.device,
    bucket_cap_mb: float,
) -> dict[str, Any]:
    """``steps`` timed steps; ``buckets``: the trainable parameters of each gradient bucket,
    in the order DDP reduces them (torch_remedies.gradient_buckets)."""
    clock = Clock(device)
    flat = [parameter for bucket in buckets for parameter in bucket]
    spans, start = [], 0
    for bucket in buckets:
        spans.append(range(start, start + len(bucket)))
        start += len(bucket)
    with ready_marks(flat, clock) as marks:
        timed = [timed_step(step, clock, marks) for _ in range(steps)]
    return {
        "clock": clock.name,
        "steps": steps,
        "bucket_cap_mb": float(bucket_cap_mb),
        **{part: [t[part] for t in timed] for part in ("forward_s", "backward_s", "optimizer_s")},
        "buckets": [
            {
                "index": index,
                "parameters": len(bucket),
                "bytes": 4 * sum(p.numel() for p in bucket),  # float32 gradients
                "ready_s": [bucket_ready(t["ready"], span) for t in timed],
            }
            for index, (bucket, span) in enumerate(zip(buckets, spans, strict=True))
        ],
    }
