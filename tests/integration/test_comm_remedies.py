"""torch-ddp's delayed all-reduce and PowerSGD take the steps a numpy reference takes.

tests/helpers/comm_steps.py runs three steps (PowerSGD: its two plain all-reduces, then three
compressed steps) of softmax regression on two gloo ranks with the adapter's own hooks; the
reference below computes the same update from the algorithms' definitions: ChainerMN's
double buffering (step k applies the mean gradient of step k-1, the first step zeros) and
PowerSGD with error feedback and warm start (Vogels et al. 2019, as torch's hook applies it).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpscale.plan.paths import REPO_ROOT
from helpers.env_script import run_script

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]

SCRIPT = REPO_ROOT / "tests" / "helpers" / "comm_steps.py"
POWERSGD_PLAIN_STEPS = 2  # torch_remedies.POWERSGD_START_ITER


def run_steps(remedy: str, steps: int) -> dict:
    return run_script("torch", SCRIPT, remedy, str(steps))


def local_gradient(kernel, bias, x, y):
    """Mean softmax cross-entropy over the batch: d/dkernel, d/dbias."""
    logits = x @ kernel.T + bias
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    p /= len(y)
    return p.T @ x, p.sum(axis=0)


class SGD:
    """torch.optim.SGD: L2 weight decay added to the gradient, then momentum."""

    def __init__(self, lr, momentum, weight_decay):
        self.lr, self.momentum, self.wd, self.buffers = lr, momentum, weight_decay, {}

    def step(self, name, weight, grad):
        grad = grad + self.wd * weight
        buffer = self.buffers.get(name)
        buffer = grad if buffer is None else self.momentum * buffer + grad
        self.buffers[name] = buffer
        return weight - self.lr * buffer


def orthogonalise(matrix):
    """Gram-Schmidt over the columns (torch's hook, epsilon 0)."""
    matrix = matrix.copy()
    for i in range(matrix.shape[1]):
        matrix[:, i] /= np.linalg.norm(matrix[:, i])
        rest = matrix[:, i + 1 :]
        rest -= (matrix[:, i : i + 1] * rest).sum(axis=0) * matrix[:, i : i + 1]
    return matrix


def reference(data: dict, steps: int, averaged) -> tuple[np.ndarray, np.ndarray]:
    kernel, bias = np.asarray(data["kernel"], np.float64), np.asarray(data["bias"], np.float64)
    x, y = np.asarray(data["x"], np.float64), np.asarray(data["y"])
    sgd = SGD(*data["sgd"])
    for step in range(steps):
        grads = [local_gradient(kernel, bias, x[r], y[r]) for r in range(len(x))]
        g_kernel, g_bias = averaged(step, grads)
        kernel, bias = sgd.step("kernel", kernel, g_kernel), sgd.step("bias", bias, g_bias)
    return kernel, bias


def plain(step, grads):
    """The frameworks' own all-reduce: the mean of the ranks' gradients."""
    return tuple(np.mean([g[i] for g in grads], axis=0) for i in range(2))


def delayed_by_one(average):
    """ChainerMN's double buffering of ``average``: step k applies step k-1's averaged
    gradients, the first step zeros (a fresh buffer per reference run)."""
    previous = []

    def applied(step, grads):
        if step == 0:
            previous.clear()
        stale = previous[0] if previous else tuple(np.zeros_like(g) for g in grads[0])
        previous[:] = [average(step, grads)]
        return stale

    return applied


def fp16_mean(step, grads):
    """fp16_compress_hook's arithmetic: each rank's gradient over the world size, rounded to
    float16, summed in float16 (two ranks: one rounding), back to float32."""
    halves = [
        tuple((np.float32(part) / len(grads)).astype(np.float16) for part in g) for g in grads
    ]
    return tuple(sum(h[i] for h in halves).astype(np.float64) for i in range(2))


class PowerSGD:
    """Rank-r PowerSGD of the kernel, the bias all-reduced; error feedback on both (torch
    keeps one error per bucket: every element's local remainder), Q warm-started."""

    def __init__(self, q0):
        self.q, self.errors = np.asarray(q0, np.float64), None

    def __call__(self, step, grads):
        if step < POWERSGD_PLAIN_STEPS:
            return plain(step, grads)
        if self.errors is None:
            self.errors = [tuple(np.zeros_like(part) for part in g) for g in grads]
        m = [tuple(g[i] + e[i] for i in range(2)) for g, e in zip(grads, self.errors, strict=True)]
        self.q = orthogonalise(self.q)
        p = orthogonalise(sum(mk[0] @ self.q for mk in m))
        self.q = np.mean([mk[0].T @ p for mk in m], axis=0)
        kernel, bias = p @ self.q.T, np.mean([mk[1] for mk in m], axis=0)
        self.errors = [(mk[0] - kernel, mk[1] - bias) for mk in m]
        return kernel, bias


@pytest.mark.parametrize(
    ("remedy", "steps"),
    [("delayed", 3), ("delayed-fp16", 3), ("powersgd", 5), ("powersgd-buckets", 5)],
)
def test_the_remedy_takes_the_reference_steps(remedy, steps):
    data = run_steps(remedy, steps)
    averaged = {
        "delayed": delayed_by_one(plain),
        "delayed-fp16": delayed_by_one(fp16_mean),  # ChainerMN's published pair
    }.get(remedy) or PowerSGD(data["q0"])
    kernel, bias = reference(data, steps, averaged)
    first, second = data["ranks"]
    for name in ("kernel", "bias"):  # every rank holds the same weights, bit for bit
        assert first[name] == second[name]
    np.testing.assert_allclose(first["kernel"], kernel, rtol=0, atol=2e-6)
    np.testing.assert_allclose(first["bias"], bias, rtol=0, atol=2e-6)
    # and the remedy did change the steps: the plain all-reduce's reference differs
    plain_kernel, _ = reference(data, steps, plain)
    assert np.abs(plain_kernel - kernel).max() > 1e-4
    if remedy == "delayed-fp16":  # and float16 on the wire is not float32's delayed step
        fp32_kernel, _ = reference(data, steps, delayed_by_one(plain))
        assert np.abs(np.asarray(first["kernel"]) - fp32_kernel).max() > 2e-6


def test_powersgd_on_gloo_gives_each_bucket_its_own_group():
    """Kernel and bias in buckets of their own: two states and two gloo groups, so their
    chains may run at once (how many did is recorded, as on every cell's result)."""
    comm = run_steps("powersgd-buckets", 4)["ranks"][0]["comm"]
    assert "a state and gloo group per bucket (2 groups)" in comm["hook"]
    assert comm["most_buckets_in_flight"] in (1, 2)  # a bucket's chain may finish first
    assert comm["wire_ratio"] > 1


@pytest.mark.parametrize(("remedy", "has_work"), [("powersgd-buckets", True), ("delayed", False)])
def test_the_remedys_own_work_runs_on_one_rank_alone(remedy, has_work):
    """A collectives cell times the remedy's hook on every bucket with nothing sent: rank 0
    runs it four times while rank 1 does not, and finishes (the helper's timeout would say
    otherwise); delayed has no work of its own."""
    ranks = run_steps(remedy, 3)["ranks"]
    assert [r["work"] for r in ranks] == [has_work, has_work]
