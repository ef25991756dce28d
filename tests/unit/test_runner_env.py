"""The environment a cell's processes start with (launch.launcher.runner_env)."""

from __future__ import annotations

import sys

import pytest

from conftest import make_cell
from dpscale.launch import launcher
from dpscale.launch.setup.interpreters import Interpreter


@pytest.mark.parametrize(("accelerator", "visible"), [("cpu", ""), ("cuda", "0,1")])
def test_a_cpu_cell_sees_no_gpu_and_a_cuda_cell_keeps_its_own(monkeypatch, accelerator, visible):
    # torch's PowerSGD hook synchronises CUDA wherever CUDA is available, on CPU tensors too:
    # a CPU cell on a GPU machine failed there until its ranks saw no GPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    cell = make_cell(accelerator=accelerator)
    env = launcher.runner_env(cell, Interpreter("torch", (sys.executable,)))
    assert env["CUDA_VISIBLE_DEVICES"] == visible
