"""dpscale's own DDP communication hooks (torch's are used as they are where they fit):
the delayed all-reduce (ChainerMN's double buffering) and PowerSGD with a process group per
bucket. torch_remedies registers them for the remedies that name them."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook


class DelayedAllreduce:
    """A DDP communication hook: each step applies the previous step's averaged gradients
    while its own all-reduce runs on, behind the next forward and backward pass (ChainerMN's
    double buffering; the first step applies zeros). Kept per parameter, not per bucket:
    DDP rebuilds its buckets after the first step.

    ``group``: a process group of its own, so that DDP's broadcast of the buffers before the
    next forward (``broadcast_buffers``, on the default group) does not queue behind these
    all-reduces: gloo serves one group's collectives in order
    (docs/decisions/comm-remedies.md)."""

    def __init__(
        self, world_size: int, group: Any = None, dtype: torch.dtype | None = None
    ) -> None:
        self.world_size = world_size
        self.group = group
        # the all-reduce's dtype (``delayed-fp16``: float16, as fp16_compress_hook sends)
        self.dtype = dtype
        # id(parameter) -> (the all-reduce of its bucket, the summed buffer, offset, length)
        self.pending: dict[int, tuple[Any, torch.Tensor, int, int]] = {}

    def __call__(self, bucket: dist.GradBucket) -> torch.futures.Future:
        parameters = bucket.parameters()
        previous = torch.cat([self._previous(p).reshape(-1) for p in parameters])
        sending = bucket.buffer().div(self.world_size).to(self.dtype or bucket.buffer().dtype)
        work = dist.all_reduce(
            sending, group=self.group, async_op=True
        )  # [distributed] left running
        offset = 0
        for parameter in parameters:
            self.pending[id(parameter)] = (work, sending, offset, parameter.numel())
            offset += parameter.numel()
        done: torch.futures.Future = torch.futures.Future()
        done.set_result(previous.to(bucket.buffer().dtype))
        return done

    def _previous(self, parameter: torch.Tensor) -> torch.Tensor:
        if id(parameter) not in self.pending:
            return torch.zeros_like(parameter)
        work, summed, offset, length = self.pending[id(parameter)]
        work.wait()  # [distributed] the previous step's all-reduce
        return summed[offset : offset + length].to(parameter.dtype)

    def flush(self) -> None:
        """Waits for the last step's all-reduces (their gradients are never applied)."""
        for work, *_ in self.pending.values():
            work.wait()  # [distributed]


class PowerSGDBuckets:
    """torch's PowerSGD hook with a state and a process group of its own per bucket, so on
    gloo several buckets' chains (three collectives, orthogonalisation, decompression) run at
    once: gloo matches one group's collectives in order, and each bucket's chain issues its
    collectives in the same order on every rank, while chains of different buckets finish in
    different orders on different ranks (one group for all: "Received data size doesn't
    match expected size"). Numerics are torch's (error feedback and warm start per bucket);
    only Q's random start is drawn per bucket's state. torch counts steps on the state of the
    last bucket, so this hook keeps the count for all of them."""

    def __init__(self, groups: list[Any], rank: int, start_iter: int) -> None:
        self.states = [
            powerSGD_hook.PowerSGDState(
                process_group=group,
                matrix_approximation_rank=rank,
                start_powerSGD_iter=start_iter,
                use_error_feedback=True,
                warm_start=True,
            )
            for group in groups
        ]
        self.iter = 0
        self.buckets_seen = 0
        # this step's chains so far; how many ran at once, at most (1: no overlap)
        self.step_futures: list[torch.futures.Future] = []
        self.most_in_flight = 0

    def __call__(self, bucket: dist.GradBucket) -> torch.futures.Future:
        index = bucket.index()
        if index >= len(self.states):
            raise RuntimeError(f"PowerSGD: bucket {index} but {len(self.states)} process groups")
        state = self.states[index]
        state.iter = self.iter
        self.buckets_seen = max(self.buckets_seen, index + 1)
        running = sum(not future.done() for future in self.step_futures) + 1
        self.most_in_flight = max(self.most_in_flight, running)
        future = powerSGD_hook.powerSGD_hook(state, bucket)  # [distributed] on its own group
        self.step_futures.append(future)
        if bucket.is_last():
            self.iter += 1
            self.step_futures = []
        return future

    def compression_stats(self) -> tuple[float, int, int]:
        """(ratio, elements before, elements after) over every bucket, as torch's state."""
        before = sum(s.total_numel_before_compression for s in self.states)
        after = sum(s.total_numel_after_compression for s in self.states)
        return (before / after if after else 0.0), before, after

    def compressed_steps(self) -> int:
        start = self.states[0].start_powerSGD_iter if self.states else 0
        return max(self.iter - start, 0)
