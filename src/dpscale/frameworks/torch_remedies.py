"""torch-ddp's communication remedies (config ``comm``) as DDP communication hooks: torch's own
``fp16_compress_hook``, ``bf16_compress_hook`` and ``powerSGD_hook``, and
:class:`DelayedAllreduce` (ChainerMN's double buffering, which torch does not have); each
remedy's all-reduce of one message for collectives mode; what the rank applied, for its
result. ``bucket_mb`` is DDP's ``bucket_cap_mb`` (the adapter passes it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel

from dpscale.frameworks.torch_comm_hooks import DelayedAllreduce, PowerSGDBuckets
from dpscale.plan.remedies import (
    NO_REMEDY,
    POWERSGD_MIN_START,
    Comm,
    powersgd_matrix,
    powersgd_start,
)

# torch's default bucket_cap_mb
DEFAULT_BUCKET_MB = 25.0
# the remedies that are torch's compress hooks (default_hooks.<name>_compress_hook), with the
# dtype each sends
COMPRESSED = {"fp16": torch.float16, "bf16": torch.bfloat16}
# the dtype a remedy's buckets go on the wire in, where it is not float32 (PowerSGD: its own
# three all-reduces, bucket_messages)
WIRE_DTYPES = {**COMPRESSED, "delayed-fp16": torch.float16}
# PowerSGD compresses from this step on in synthetic cells (torch's minimum with error
# feedback and warm start: DDP rebuilds its buckets after the first step), so their timed
# windows are compressed; training cells start where torch advises (powersgd_start_iter).
POWERSGD_START_ITER = POWERSGD_MIN_START


def wire_bytes_per_step(state: Any) -> float | None:
    """PowerSGD's float32 elements sent per compressed step, from torch's own statistics
    (the hook counts only compressed steps), in bytes; None before the first."""
    _, _, after = state.compression_stats()
    steps = (
        state.compressed_steps()
        if isinstance(state, PowerSGDBuckets)
        else max(state.iter - state.start_powerSGD_iter, 0)
    )
    return 4 * after / steps if steps else None


def bucket_bound(model: torch.nn.Module, bucket_mb: float) -> int:
    """At most how many buckets DDP makes: each but the last holds at least its cap (the
    first's cap is 1 MiB or less), and none is empty."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    total = sum(p.numel() * p.element_size() for p in parameters)
    return min(len(parameters), 2 + int(total // (bucket_mb * 2**20)) + 1)


def gradient_buckets(model: torch.nn.Module, bucket_mb: float) -> list[list[torch.Tensor]]:
    """The trainable parameters of each gradient bucket, in the order DDP reduces them
    once it has rebuilt its buckets after the first step: torch's own assignment with the
    cap ``bucket_mb``, over the parameters in reverse order, which is the order their
    gradients become ready up to the shortcut convolutions' (ResNet-18: 2 buckets, as
    DDP's own logging data reads, sizes within 2 MB of its)."""
    parameters = [p for p in model.parameters() if p.requires_grad][::-1]
    indices, _ = dist._compute_bucket_assignment_by_size(
        parameters, [int(bucket_mb * 2**20)], [False] * len(parameters)
    )
    return [[parameters[i] for i in bucket] for bucket in indices]


# PowerSGDState's default: a matrix is compressed only where it saves at least half
POWERSGD_MIN_COMPRESSION_RATE = 2


def bucket_messages(tensors: list[torch.Tensor], comm: Comm) -> list[tuple[int, torch.dtype]]:
    """The all-reduces one bucket's gradients take under the remedy, (elements, dtype) each:
    PowerSGD's three (the uncompressed tensors, then P, then Q, sized as torch's hook sizes
    them), the compress hooks' one in half precision, else one in float32."""
    total = sum(t.numel() for t in tensors)
    if comm.name != "powersgd":
        return [(total, WIRE_DTYPES.get(comm.name, torch.float32))]
    uncompressed = ps = qs = 0
    for tensor in tensors:
        n, m = tensor.shape[0], tensor.numel() // tensor.shape[0]
        rank = min(n, m, comm.rank or 1)
        worth, _, _ = powerSGD_hook._should_compress(n, m, rank, POWERSGD_MIN_COMPRESSION_RATE)
        if worth:
            ps, qs = ps + n * rank, qs + m * rank
        else:
            uncompressed += tensor.numel()
    return [(uncompressed, torch.float32), (ps, torch.float32), (qs, torch.float32)]


def gradient_traffic(
    model: torch.nn.Module, comm: Comm, device: torch.device
) -> tuple[Callable[[], None], dict[str, Any]]:
    """One step's gradient traffic as training sends it (collectives mode): every bucket's
    all-reduces, bucket by bucket, in the order DDP reduces them, on buffers made once;
    and what it sends. The bytes and the collectives are training's; the overlap with the
    backward pass and PowerSGD's matrix work are not replayed."""
    buckets = gradient_buckets(model, comm.bucket_mb or DEFAULT_BUCKET_MB)
    messages = [m for bucket in buckets for m in bucket_messages(bucket, comm)]
    buffers = [torch.ones(numel, dtype=dtype, device=device) for numel, dtype in messages]
    logical = sum(t.numel() for bucket in buckets for t in bucket) * 4

    def step() -> None:
        for buffer in buffers:
            dist.all_reduce(buffer)  # [distributed] one bucket's message, as training sends it

    return step, {
        "buckets": len(buckets),
        "collectives_per_step": len(buffers),
        "logical_bytes_per_step": logical,
        "wire_bytes_per_step": sum(b.numel() * b.element_size() for b in buffers),
    }


def wire_ratio(comm: Comm, state: Any) -> float:
    """Logical gradient bytes over bytes sent: PowerSGD's from its own statistics."""
    if comm.name == "powersgd":
        rate, before, after = state.compression_stats()
        return float(rate) if after else 1.0
    return float(comm.nominal_ratio or 1.0)


def powersgd_allreduce(buffer: torch.Tensor, rank: int, world_size: int) -> Callable[[], None]:
    """PowerSGD's own path for one message viewed as a square matrix (torch's batched
    variant): P = MQ, all-reduce P, orthogonalise, Q = M^T P, all-reduce Q, M = PQ^T."""
    side, rank = powersgd_matrix(buffer.numel() * 4, rank)
    matrix = torch.zeros(side * side, dtype=buffer.dtype, device=buffer.device)
    matrix[: buffer.numel()] = buffer
    matrix = matrix.view(side, side)
    q = torch.randn(side, rank, generator=torch.Generator().manual_seed(0)).to(buffer.device)
    p = torch.empty(side, rank, dtype=buffer.dtype, device=buffer.device)

    def step() -> None:
        torch.matmul(matrix, q, out=p)
        dist.all_reduce(p)  # [distributed]
        powerSGD_hook._orthogonalize(p.unsqueeze(0))
        torch.matmul(matrix.t(), p, out=q)
        dist.all_reduce(q)  # [distributed]
        q.div_(world_size)
        buffer.copy_(torch.matmul(p, q.t()).view(-1)[: buffer.numel()])

    return step


def compressed_allreduce(buffer: torch.Tensor, comm: Comm, world_size: int) -> Callable[[], None]:
    """The remedy's all-reduce of one float32 message (collectives mode)."""
    if comm.name == "powersgd":
        return powersgd_allreduce(buffer, comm.rank or 1, world_size)
    dtype = COMPRESSED[comm.name]

    def step() -> None:  # as default_hooks' compress hooks: average, cast, sum, cast back
        sent = buffer.div(world_size).to(dtype)
        dist.all_reduce(sent)  # [distributed]
        buffer.copy_(sent)

    return step


class AloneBucket:
    """What torch's comm hooks read of a ``dist.GradBucket`` (buffer, index, gradients as
    views of the buffer, is_last), built from one bucket's parameter shapes: a hook's own
    work can then be timed outside DDP (:func:`remedy_work`)."""

    def __init__(self, index: int, parameters: list[torch.Tensor], last: bool) -> None:
        generator = torch.Generator().manual_seed(index)
        total = sum(p.numel() for p in parameters)
        self._buffer = torch.randn(total, generator=generator).to(parameters[0].device)
        self._index, self._last = index, last
        self._shapes = [p.shape for p in parameters]

    def buffer(self) -> torch.Tensor:
        return self._buffer

    def set_buffer(self, buffer: torch.Tensor) -> None:
        self._buffer = buffer

    def index(self) -> int:
        return self._index

    def is_last(self) -> bool:
        return self._last

    def gradients(self) -> list[torch.Tensor]:
        views, start = [], 0
        for shape in self._shapes:
            count = shape.numel()
            views.append(self._buffer[start : start + count].view(shape))
            start += count
        return views


def _one_rank_group() -> Any:
    """A process group of this rank alone."""
    # [distributed] every rank creates every rank's one-rank group, in the same order
    groups = [dist.new_group([rank]) for rank in range(dist.get_world_size())]
    return groups[dist.get_rank()]


def remedy_work(
    model: torch.nn.Module, comm: Comm, device: torch.device
) -> Callable[[], None] | None:
    """Collectives mode: one step of the remedy's own work on every bucket's gradients with
    nothing sent: training's hook (PowerSGD's matrix products, orthogonalisation, error
    feedback; the compress hooks' casts) over a process group of this rank alone. None where
    the remedy does no work of its own (none, delayed)."""
    if comm.name not in (*COMPRESSED, "powersgd"):
        return None
    buckets = gradient_buckets(model, comm.bucket_mb or DEFAULT_BUCKET_MB)
    fakes = [AloneBucket(i, b, i == len(buckets) - 1) for i, b in enumerate(buckets)]
    # a one-rank group per bucket, as training has a group per bucket: PowerSGD's callbacks
    # wait on their group's next collective, so two buckets' chains on one group can block
    # each other's worker threads for good
    alone = [_one_rank_group() for _ in fakes]
    if comm.name == "powersgd":
        state = PowerSGDBuckets(alone, comm.rank or 1, POWERSGD_START_ITER)
        hook: Callable[[Any], torch.futures.Future] = state
    else:
        compress = getattr(default_hooks, f"{comm.name}_compress_hook")
        hook = lambda bucket: compress(alone[bucket.index()], bucket)  # noqa: E731

    def step() -> None:
        # [distributed] on a group of this rank alone: nothing leaves the process
        torch.futures.wait_all([hook(bucket) for bucket in fakes])

    return step


class RemedyHooks:
    """The cell's communication remedy on this rank (torch_ops.DistributedTorchRank's ``remedy``):
    registers its DDP hook, times its own all-reduce path, says what it applied."""

    def __init__(self, comm: Comm) -> None:
        self.comm, self.state = comm, None
        self.bucket_mb = comm.bucket_mb or DEFAULT_BUCKET_MB  # DDP's bucket_cap_mb
        self.applied: dict[str, Any] = {
            "remedy": comm.key,
            "bucket_mb": self.bucket_mb,
            "hook": "DDP's own all-reduce",
        }

    def register(self, model: DistributedDataParallel) -> None:
        """Replaces DDP's all-reduce of each bucket by the remedy's hook (``REGISTER``; a
        remedy without one keeps DDP's own all-reduce)."""
        register = REGISTER.get(self.comm.name)
        if register is not None:
            register(self, model)

    def _register_compress(self, model: DistributedDataParallel) -> None:
        """torch's own compress hook of the remedy's dtype (fp16, bf16)."""
        hook = getattr(default_hooks, f"{self.comm.name}_compress_hook")
        model.register_comm_hook(None, hook)  # [distributed]
        self.applied["hook"] = f"torch default_hooks.{hook.__name__}"

    def _register_delayed(self, model: DistributedDataParallel) -> None:
        """:class:`DelayedAllreduce` on a process group of its own, sending the remedy's
        wire dtype (delayed-fp16: float16; delayed: the gradients' own)."""
        # [distributed] every rank creates the group, in the same order
        group = dist.new_group(backend=dist.get_backend())
        dtype = WIRE_DTYPES.get(self.comm.name)
        self.state = DelayedAllreduce(dist.get_world_size(), group, dtype)
        delayed = self.state
        # a lambda: DDP checks a hook's annotations, which this module keeps as text
        model.register_comm_hook(None, lambda _, bucket: delayed(bucket))  # [distributed]
        # results before its own group read "... (1 step stale)": the hook's text says
        # which of the two a cell measured
        self.applied["hook"] = (
            "dpscale torch_ddp.DelayedAllreduce (1 step stale, a process group of its own"
            + (", float16 on the wire)" if dtype else ")")
        )

    def _register_powersgd(self, model: DistributedDataParallel) -> None:
        """torch's PowerSGD hook (:meth:`_powersgd_hook`), started where a synthetic cell
        times compressed steps (:meth:`planned` moves a training cell's start)."""
        self._powersgd_hook(model)
        self.applied.update(
            rank=self.comm.rank,
            start_iter=POWERSGD_START_ITER,
            start_iter_rule="torch's minimum: a synthetic cell times compressed steps",
            error_feedback=True,
        )

    def _powersgd_hook(self, model: DistributedDataParallel) -> None:
        """torch's hook as torch registers it on nccl; on gloo one state and process group
        per bucket (:class:`PowerSGDBuckets`), so buckets overlap."""
        if dist.get_backend() != "gloo":
            self.state = powerSGD_hook.PowerSGDState(
                process_group=None,
                matrix_approximation_rank=self.comm.rank,
                start_powerSGD_iter=POWERSGD_START_ITER,
                use_error_feedback=True,
                warm_start=True,
            )
            model.register_comm_hook(self.state, powerSGD_hook.powerSGD_hook)  # [distributed]
            self.applied["hook"] = "torch powerSGD_hook.powerSGD_hook"
            return
        bound = bucket_bound(model.module, self.comm.bucket_mb or DEFAULT_BUCKET_MB)
        # [distributed] every rank creates the groups, in the same order
        groups = [dist.new_group(backend="gloo") for _ in range(bound)]
        self.state = PowerSGDBuckets(groups, self.comm.rank or 1, POWERSGD_START_ITER)
        buckets = self.state
        # a lambda: DDP checks a hook's annotations, which this module keeps as text
        model.register_comm_hook(None, lambda _, bucket: buckets(bucket))  # [distributed]
        self.applied["hook"] = (
            f"torch powerSGD_hook.powerSGD_hook, a state and gloo group per bucket ({bound} groups)"
        )

    def buckets(self, model: torch.nn.Module) -> list[list[torch.Tensor]]:
        """The trainable parameters of each of ``model``'s gradient buckets (DDP's module),
        in the order DDP reduces them, under this cell's cap (:func:`gradient_buckets`)."""
        return gradient_buckets(model, self.bucket_mb)

    def allreduce(self, buffer: torch.Tensor, world_size: int) -> Callable[[], None] | None:
        """Collectives mode: the remedy's all-reduce of one message, None for DDP's own."""
        if self.comm.name in (NO_REMEDY, "delayed", "delayed-fp16"):
            return None
        return compressed_allreduce(buffer, self.comm, world_size)

    def traffic(
        self, model: torch.nn.Module, device: torch.device
    ) -> tuple[Callable[[], None], dict[str, Any]]:
        """Collectives mode: one step's gradient traffic under this remedy."""
        return gradient_traffic(model, self.comm, device)

    def work(self, model: torch.nn.Module, device: torch.device) -> Callable[[], None] | None:
        """Collectives mode: one step of the remedy's own work, nothing sent
        (:func:`remedy_work`)."""
        return remedy_work(model, self.comm, device)

    def planned(self, total_steps: int, warmup_steps: int) -> None:
        """A training cell's length, before its first step: PowerSGD starts where torch
        advises (synthetic cells keep step 2, so their timed windows are compressed)."""
        if self.comm.name != "powersgd":
            return
        start, rule = powersgd_start(self.comm, total_steps, warmup_steps)
        states = getattr(self.state, "states", [self.state])
        for state in states:
            state.start_powerSGD_iter = start
        self.applied.update(start_iter=start, start_iter_rule=rule)

    def record(self) -> dict[str, Any]:
        if isinstance(self.state, PowerSGDBuckets):
            self.applied["most_buckets_in_flight"] = self.state.most_in_flight
            self.applied["buckets"] = self.state.buckets_seen
        if self.comm.name == "powersgd" and self.state is not None:
            self.applied["wire_bytes_per_step"] = wire_bytes_per_step(self.state)
        return {"comm": {**self.applied, "wire_ratio": wire_ratio(self.comm, self.state)}}

    def flush(self) -> None:
        if isinstance(self.state, DelayedAllreduce):
            self.state.flush()


# remedy -> how it registers its DDP communication hook, as torch registers hooks: one
# callable per remedy (plan.remedies declares them; none keeps DDP's own all-reduce)
REGISTER: dict[str, Callable[[RemedyHooks, DistributedDataParallel], None]] = {
    "fp16": RemedyHooks._register_compress,
    "bf16": RemedyHooks._register_compress,
    "powersgd": RemedyHooks._register_powersgd,
    "delayed": RemedyHooks._register_delayed,
    "delayed-fp16": RemedyHooks._register_delayed,
}
