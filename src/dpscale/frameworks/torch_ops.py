"""The PyTorch training step shared by the DataParallel and DDP runners."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from dpscale.builders.torch_resnet import build_torch_resnet, trainable_param_count
from dpscale.core.cell import Cell
from dpscale.core.runner_support import param_checksum

AMP_DTYPES = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}


@dataclass
class TorchSetup:
    device: torch.device
    model: nn.Module  # possibly wrapped (DataParallel, DistributedDataParallel)
    trainable_params: int
    step: Callable[[], None]
    sync: Callable[[], None]


def configure_threads(cell: Cell) -> int:
    if cell.accelerator == "cpu":
        torch.set_num_threads(cell.threads_per_device)
    else:
        torch.backends.cudnn.benchmark = True
    return torch.get_num_threads()


def synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None  # CPU kernels have finished when the Python call returns


def build_model(cell: Cell, device: torch.device) -> tuple[nn.Module, int]:
    torch.manual_seed(cell.seed)
    model = build_torch_resnet(cell.model.spec())
    count = trainable_param_count(model)
    model = model.to(device)
    if cell.memory_format == "channels_last":
        model = model.to(memory_format=torch.channels_last)
    return model, count


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


def make_train_step(
    cell: Cell, model: nn.Module, device: torch.device, batch: int
) -> Callable[[], None]:
    images, labels = synthetic_batch(cell, batch, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    loss_fn = nn.CrossEntropyLoss()
    amp_dtype = AMP_DTYPES.get(cell.precision)
    scaler = torch.amp.GradScaler("cuda", enabled=cell.precision == "amp_fp16")
    model.train()

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=amp_dtype)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return step


def trained_param_checksum(model: nn.Module) -> str:
    """Checksum of the trainable parameters (see runner_support.param_checksum)."""
    return param_checksum(p.detach().cpu().numpy() for p in model.parameters() if p.requires_grad)


def versions() -> dict[str, str]:
    found = {"torch": torch.__version__}
    if torch.cuda.is_available():
        found["cuda"] = str(torch.version.cuda)
        found["cudnn"] = str(torch.backends.cudnn.version())
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    return found


def gpu_names(count: int) -> list[str]:
    return [torch.cuda.get_device_name(i) for i in range(count)]


class TorchTrainingBackend:
    """One optimiser step or evaluation on numpy NHWC batches (see core.training)."""

    def __init__(self, cell: Cell, model: nn.Module, device: torch.device, distributed: bool):
        train = cell.training
        assert train is not None
        self.model, self.device, self.distributed = model, device, distributed
        self.channels_last = cell.memory_format == "channels_last"
        self.optimizer = torch.optim.SGD(
            model.parameters(),
            lr=train.base_lr,
            momentum=train.momentum,
            weight_decay=train.weight_decay,
        )
        self.loss_fn = nn.CrossEntropyLoss(reduction="sum")
        self.sync = synchronizer(device)

    def _inputs(self, images: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.from_numpy(images).permute(0, 3, 1, 2)
        x = x.contiguous(
            memory_format=torch.channels_last if self.channels_last else torch.contiguous_format
        )
        return x.to(self.device, non_blocking=True), torch.from_numpy(labels).to(self.device)

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
        torch.distributed.all_reduce(tensor, op=op)
        return tensor.tolist()

    def reduce_sum(self, values: list[float]) -> list[float]:
        return self._reduce(values, torch.distributed.ReduceOp.SUM)

    def reduce_max(self, values: list[float]) -> list[float]:
        return self._reduce(values, torch.distributed.ReduceOp.MAX)
