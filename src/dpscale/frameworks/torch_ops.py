"""PyTorch code shared by the torch-dp and torch-ddp adapters: threads, device, the model,
the synthetic step, the training backend, and the ranks the core loop drives: :class:`TorchRank`
(one process) and :class:`DistributedTorchRank` (a torch.distributed group).

Every call that talks to other ranks is marked ``[distributed]``: in the adapters, and here
in DistributedTorchRank's gather, all-reduce, bucket timeline and finish.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from dpscale.frameworks import torch_timeline, torch_zoo
from dpscale.frameworks.torch_resnet import build_torch_resnet, trainable_param_count
from dpscale.plan.cell import SGD, Cell
from dpscale.plan.controls import BARRIER, LOCAL
from dpscale.plan.remedies import NO_REMEDY
from dpscale.runner.rank import ModelCounts, Rank
from dpscale.runner.support import param_checksum, require_devices, require_gpu_code

AMP_DTYPES = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}


def configure_threads(cell: Cell) -> int:
    if cell.accelerator == "cpu":
        torch.set_num_threads(cell.threads_per_device)
    else:
        # cuDNN times its kernels in the warm-up steps; fp32 runs on TF32 tensor cores, as
        # NVIDIA's and Lambda's fp32 figures do (convolutions already do by torch's default)
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return torch.get_num_threads()


def pin_device(cell: Cell, local_rank: int = 0) -> torch.device:
    """This process's (first) device: the GPU of its local rank, or the CPU."""
    if cell.accelerator != "cuda":
        return torch.device("cpu")
    require_devices(cell, torch.cuda.device_count())
    capability = torch.cuda.get_device_capability(local_rank)
    require_gpu_code(f"torch {torch.__version__}", capability, torch.cuda.get_arch_list())
    torch.cuda.set_device(local_rank)
    return torch.device(f"cuda:{local_rank}")


def synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None  # CPU kernels have finished when the Python call returns


def build_model(cell: Cell, device: torch.device) -> tuple[nn.Module, ModelCounts]:
    """The cell's model on its device: a shared ResNet from its spec, or a torchvision model
    by name (torch_zoo), whose FLOPs are counted here, before it moves."""
    torch.manual_seed(cell.seed)
    if cell.model.zoo is None:
        model = build_torch_resnet(cell.model.spec())
        counts = ModelCounts(trainable_param_count(model))
    else:
        model = torch_zoo.build_zoo_model(cell.model)
        flops = torch_zoo.count_forward_flops(model, cell.model.image_size)
        counts = ModelCounts(trainable_param_count(model), flops)
    model = model.to(device)
    if cell.memory_format == "channels_last":
        model = model.to(memory_format=torch.channels_last)
    return model, counts


def make_sgd(parameters, sgd: SGD) -> torch.optim.Optimizer:
    """torch's SGD adds weight_decay * w to the gradient: the convention of plan.cell.SGD."""
    return torch.optim.SGD(
        parameters, lr=sgd.lr, momentum=sgd.momentum, weight_decay=sgd.weight_decay
    )


def synthetic_batch(
    cell: Cell, batch: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random images and labels, created once on the device (no input pipeline)."""
    generator = torch.Generator().manual_seed(cell.seed)
    size = cell.model.image_size
    images = torch.randn(batch, 3, size, size, generator=generator).to(device)
    if cell.memory_format == "channels_last":
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, cell.model.classes, (batch,), generator=generator).to(device)
    return images, labels


class SyntheticStep:
    """One optimiser step on the synthetic batch, in its parts (zero, forward, backward,
    optimize), so the bucket timeline (torch_timeline) can time each; a call runs all four,
    as the timed windows do."""

    def __init__(self, cell: Cell, model: nn.Module, device: torch.device, batch: int) -> None:
        self.model, self.device = model, device
        self.images, self.labels = synthetic_batch(cell, batch, device)
        self.optimizer = make_sgd(model.parameters(), cell.sgd)
        self.loss_fn = nn.CrossEntropyLoss()
        self.amp_dtype = AMP_DTYPES.get(cell.precision)
        self.scaler = torch.amp.GradScaler("cuda", enabled=cell.precision == "amp_fp16")
        model.train()

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def zero(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def forward(self) -> torch.Tensor:
        with self._autocast():
            return self.loss_fn(self.model(self.images), self.labels)

    def backward(self, loss: torch.Tensor) -> None:
        """DDP with several ranks: returns once its bucket all-reduces are done (or queued)."""
        self.scaler.scale(loss).backward()

    def optimize(self) -> None:
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def __call__(self) -> None:
        self.zero()
        self.backward(self.forward())
        self.optimize()


def make_train_step(
    cell: Cell, model: nn.Module, device: torch.device, batch: int
) -> SyntheticStep:
    return SyntheticStep(cell, model, device, batch)


def trained_param_checksum(model: nn.Module) -> str:
    """Checksum of the trainable parameters (see runner.support.param_checksum)."""
    return param_checksum(p.detach().cpu().numpy() for p in model.parameters() if p.requires_grad)


def versions() -> dict[str, str]:
    found = {"torch": torch.__version__}
    if torch.cuda.is_available():
        found["cuda"] = str(torch.version.cuda)
        found["cudnn"] = str(torch.backends.cudnn.version())
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        found["tf32"] = str(
            torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        )
    return found


def cpu_kernels() -> dict[str, Any]:
    """The CPU kernels this torch runs: oneDNN (``torch.backends.mkldnn``) on or off, the
    instruction set its own kernels were dispatched to (``get_cpu_capability``) and the
    oneDNN version its build names."""
    import re

    on = bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)
    built = re.search(r"(?:MKL-DNN|oneDNN) v([\d.]+)", torch.__config__.show())
    return {
        "library": "oneDNN" if on else "ATen",
        "onednn": on,
        "why": "torch's default" if on else "torch.backends.mkldnn is off or not built",
        "isa": str(torch.backends.cpu.get_cpu_capability()),
        "version": built.group(1) if built else None,
    }


class TorchTrainingBackend:
    """One optimiser step or evaluation on numpy NHWC batches (see runner.training)."""

    def __init__(
        self,
        cell: Cell,
        model: nn.Module,
        device: torch.device,
        distributed: bool,
        remedy: Any = None,
    ):
        self.model, self.device, self.distributed = model, device, distributed
        self.remedy = remedy  # torch_remedies.RemedyHooks of a torch-ddp rank
        self.channels_last = cell.memory_format == "channels_last"
        self.optimizer = make_sgd(model.parameters(), cell.sgd)
        self.loss_fn = nn.CrossEntropyLoss(reduction="sum")
        self.sync = synchronizer(device)

    def _inputs(self, images: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.from_numpy(images).permute(0, 3, 1, 2)
        x = x.contiguous(
            memory_format=torch.channels_last if self.channels_last else torch.contiguous_format
        )
        return x.to(self.device, non_blocking=True), torch.from_numpy(labels).to(self.device)

    def planned(self, total_steps: int, warmup_steps: int) -> None:
        """PowerSGD starts compressing where torch advises for this training's length."""
        if self.remedy is not None:
            self.remedy.planned(total_steps, warmup_steps)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def train_step(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        x, y = self._inputs(images, labels)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(x)
        loss = self.loss_fn(logits, y)
        (loss / len(y)).backward()
        self.optimizer.step()
        return loss.item(), int((logits.argmax(1) == y).sum().item())

    @torch.no_grad()
    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        x, y = self._inputs(images, labels)
        self.model.eval()
        logits = self.model(x)
        return self.loss_fn(logits, y).item(), int((logits.argmax(1) == y).sum().item())

    def _reduce(self, values: list[float], op) -> list[float]:
        if not self.distributed:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=op)  # [distributed]
        return tensor.tolist()

    def reduce_sum(self, values: list[float]) -> list[float]:
        return self._reduce(values, dist.ReduceOp.SUM)

    def reduce_max(self, values: list[float]) -> list[float]:
        return self._reduce(values, dist.ReduceOp.MAX)


class TorchRank(Rank):
    """A torch process that drives every device of its node itself (torch-dp): the one-process
    defaults of runner.rank.Rank, torch's step, training backend and checksums."""

    framework = "torch"
    times_out_collectives = True  # the process group's timeout (the DDP adapter sets it)
    distributed = False

    def __init__(
        self,
        cell: Cell,
        model: nn.Module,
        device: torch.device,
        counts: ModelCounts,
        threads_used: int,
        batch: int,
    ) -> None:
        self.cell, self.model, self.device = cell, model, device
        self.trainable_params, self.forward_flops = counts.trainable_params, counts.forward_flops
        self.threads_used, self.batch = threads_used, batch
        self._step: SyntheticStep | None = None  # the synthetic step, kept for the timeline
        self._folder: Any = None  # mode folder: torch_folder.FolderPipeline, made once

    def _pipeline(self) -> Any:
        """The folder pipeline, made at first use: Pillow and torchvision are imported only
        by folder cells, so an interpreter without them still runs every other cell."""
        if self._folder is None:
            from dpscale.frameworks import torch_folder

            self._folder = torch_folder.FolderPipeline(self.cell, self.batch, self.rank, self.size)
        return self._folder

    def folder_step(self) -> tuple[Callable[[], None], Callable[[], None]]:
        batches = self._pipeline().batches
        step = make_train_step(self.cell, self.model, self.device, self.batch)
        layout = torch.channels_last if self.cell.memory_format == "channels_last" else None

        def train_on_next_batch() -> None:
            images, labels = batches.next()  # waits for the loader when it is behind
            images = images.to(self.device, non_blocking=True)
            step.images = images.contiguous(memory_format=layout) if layout else images
            step.labels = labels.to(self.device, non_blocking=True)
            step()

        return train_on_next_batch, synchronizer(self.device)

    def loader_step(self) -> tuple[Callable[[], None], Callable[[], None]]:
        batches = self._pipeline().batches
        return batches.next, lambda: None  # the batches stay on the host: nothing to wait for

    def folder_record(self) -> dict[str, Any]:
        return self._pipeline().record()

    def synthetic_step(self) -> tuple[Callable[[], None], Callable[[], None]]:
        self._step = make_train_step(self.cell, self.model, self.device, self.batch)
        return self._step, synchronizer(self.device)

    def training_backend(self) -> TorchTrainingBackend:
        return TorchTrainingBackend(self.cell, self.model, self.device, self.distributed)

    def matmul(self, n: int, dtype: str) -> tuple[Callable[[], None], Callable[[], None]]:
        kind = getattr(torch, dtype)
        a, b = (torch.randn(n, n, device=self.device).to(kind) for _ in range(2))
        c = torch.empty(n, n, device=self.device, dtype=kind)
        return (lambda: torch.mm(a, b, out=c)), synchronizer(self.device)

    def param_checksums(self) -> list[str]:
        return [trained_param_checksum(self.model)]

    def device_names(self) -> list[str]:
        if self.device.type != "cuda":
            return []
        return [torch.cuda.get_device_name(i) for i in range(self.cell.devices_per_node)]

    def versions(self) -> dict[str, str]:
        return versions()

    def cpu_kernels(self) -> dict[str, Any]:
        return cpu_kernels()


class DistributedTorchRank(TorchRank):
    """One rank of a torch.distributed group (torch-ddp): one device, the group's collectives,
    and the cell's communication remedy (``remedy``: torch_remedies.RemedyHooks, with its
    collectives path, its record and its last wait)."""

    distributed = True

    def __init__(
        self,
        cell: Cell,
        model: nn.Module,
        device: torch.device,
        counts: ModelCounts,
        threads_used: int,
        remedy: Any,
    ) -> None:
        super().__init__(cell, model, device, counts, threads_used, cell.batch_per_device)
        self.remedy = remedy
        self.rank, self.size = dist.get_rank(), dist.get_world_size()

    def training_backend(self) -> TorchTrainingBackend:
        return TorchTrainingBackend(self.cell, self.model, self.device, True, self.remedy)

    def allreduce(self, nbytes: int) -> tuple[Callable[[], None], Callable[[], None]]:
        buffer = torch.ones(nbytes // 4, dtype=torch.float32, device=self.device)
        remedied = self.remedy.allreduce(buffer, self.size)
        if remedied is not None:
            return remedied, synchronizer(self.device)
        # [distributed] sum over the ranks, in place; gloo on CPU returns when it is done,
        # nccl queues it on the stream that sync waits for
        return (lambda: dist.all_reduce(buffer, op=dist.ReduceOp.SUM)), synchronizer(self.device)

    def control_step(self, control: str) -> tuple[Callable[[], None], Callable[[], None]]:
        """``local``: the synthetic step inside DDP's no_sync(), which skips the gradient
        all-reduce (each rank's SGD applies its own gradients); ``barrier``: the same, the
        device synchronised, then torch.distributed.barrier()."""
        step = make_train_step(self.cell, self.model, self.device, self.batch)
        sync = synchronizer(self.device)

        def local() -> None:
            with self.model.no_sync():  # no all-reduce: this rank's own gradients
                step()

        def local_then_barrier() -> None:
            local()
            sync()  # the barrier waits for this rank's step, not for its launch
            dist.barrier()  # [distributed] every rank has finished its step

        return {LOCAL: local, BARRIER: local_then_barrier}[control], sync

    def gradient_traffic(self) -> tuple[Callable[[], None], Callable[[], None], dict[str, Any]]:
        step, sends = self.remedy.traffic(self.model.module, self.device)
        return step, synchronizer(self.device), sends

    def remedy_work(self) -> tuple[Callable[[], None], Callable[[], None]] | None:
        step = self.remedy.work(self.model.module, self.device)
        return None if step is None else (step, synchronizer(self.device))

    def bucket_timeline(self, steps: int) -> dict[str, Any] | None:
        """After the timed windows: ``steps`` more synthetic steps, each timed in its parts,
        with each gradient bucket's ready time (torch_timeline); None before a synthetic step."""
        if self._step is None:
            return None
        buckets = self.remedy.buckets(self.model.module)
        # [distributed] every step's backward all-reduces the buckets, as a timed step does
        return torch_timeline.record(self._step, buckets, steps, self.device, self.remedy.bucket_mb)

    def allreduce_description(self) -> dict[str, str]:
        op = "torch.distributed.all_reduce(SUM)"
        if self.cell.comm.name != NO_REMEDY:
            op = f"{self.cell.comm.key}: {op}"
        return {"op": op, "backend": str(dist.get_backend())}

    def gather(self, value: Any) -> list[Any]:
        values: list[Any] = [None] * self.size
        dist.all_gather_object(values, value)  # [distributed] every rank's value, rank order
        return values

    def agree(self, done: bool) -> bool:
        flag = torch.tensor([int(done)], dtype=torch.int32)
        if self.device.type == "cuda":  # nccl reduces CUDA tensors only
            flag = flag.to(self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)  # [distributed] done only if all are
        return bool(flag.item())

    def device_names(self) -> list[str]:
        return [torch.cuda.get_device_name(self.device)] if self.device.type == "cuda" else []

    def system_extra(self) -> dict[str, Any]:
        return self.remedy.record()

    def finish(self) -> None:
        self.remedy.flush()  # [distributed] a delayed all-reduce still running
        dist.barrier()  # [distributed] rank 0 has written the result
        dist.destroy_process_group()
