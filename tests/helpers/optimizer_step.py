"""Three SGD steps of each framework's synthetic-mode optimiser on one tiny model.

    python tests/helpers/optimizer_step.py torch|tensorflow|mxnet    # in its environment

The model is softmax regression (one dense layer, 8 inputs, 3 classes) with the same
weights, batch and labels in every framework; the optimiser is built by the adapters' own
functions from ``plan.cell.SYNTHETIC_SGD``. Prints the weights after the steps as JSON:
``{"kernel": [[...] 8 x 3], "bias": [...]}``.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from dpscale.plan.cell import Cell, ModelConfig

STEPS = 3
rng = np.random.default_rng(7)
KERNEL = rng.normal(0, 0.5, (8, 3)).astype(np.float32)
BIAS = rng.normal(0, 0.1, 3).astype(np.float32)
X = rng.normal(0, 1, (4, 8)).astype(np.float32)
Y = np.array([0, 2, 1, 2])
CELL = Cell("parity", "none", ModelConfig("resnet18", "cifar", 32, 10), "synthetic", 1, 1, 4)


def torch_steps() -> tuple[np.ndarray, np.ndarray]:
    import torch

    from dpscale.frameworks.torch_ops import make_sgd

    layer = torch.nn.Linear(8, 3)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(KERNEL.T))
        layer.bias.copy_(torch.from_numpy(BIAS))
    optimizer = make_sgd(layer.parameters(), CELL.sgd)
    x, y = torch.from_numpy(X), torch.from_numpy(Y)
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(layer(x), y).backward()
        optimizer.step()
    return layer.weight.detach().numpy().T, layer.bias.detach().numpy()


def tensorflow_steps() -> tuple[np.ndarray, np.ndarray]:
    import tensorflow as tf

    from dpscale.frameworks.tf_ops import apply_sgd, make_sgd

    layer = tf.keras.layers.Dense(3)
    layer.build((None, 8))
    layer.set_weights([KERNEL, BIAS])
    optimizer = make_sgd(CELL)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(Y, layer(X))
        grads = tape.gradient(loss, layer.trainable_variables)
        apply_sgd(optimizer, CELL.sgd, grads, layer.trainable_variables)
    kernel, bias = layer.get_weights()
    return kernel, bias


def mxnet_steps() -> tuple[np.ndarray, np.ndarray]:
    import mxnet as mx
    from mxnet import autograd, gluon

    from dpscale.frameworks.mxnet_ops import OPTIMIZER, optimizer_params

    layer = gluon.nn.Dense(3, in_units=8)
    layer.initialize()
    layer.weight.set_data(mx.nd.array(KERNEL.T))
    layer.bias.set_data(mx.nd.array(BIAS))
    trainer = gluon.Trainer(
        layer.collect_params(), OPTIMIZER, optimizer_params(CELL.sgd), kvstore="device"
    )
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = mx.nd.array(X), mx.nd.array(Y)
    for _ in range(STEPS):
        with autograd.record():
            loss = loss_fn(layer(x), y)
        loss.backward()
        trainer.step(len(Y))  # the gradient of the batch-mean loss
    return layer.weight.data().asnumpy().T, layer.bias.data().asnumpy()


def numpy_steps() -> tuple[np.ndarray, np.ndarray]:
    """The reference: torch's convention (L2 decay added to the gradient, momentum buffer)."""
    sgd = CELL.sgd
    kernel, bias = KERNEL.astype(np.float64), BIAS.astype(np.float64)
    buffers = [np.zeros_like(kernel), np.zeros_like(bias)]
    for _ in range(STEPS):
        logits = X @ kernel + bias
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(Y)), Y] -= 1
        grads = [X.T @ p / len(Y), p.sum(0) / len(Y)]
        params = [kernel, bias]
        for i, (w, g) in enumerate(zip(params, grads, strict=True)):
            buffers[i] = sgd.momentum * buffers[i] + g + sgd.weight_decay * w
            params[i] = w - sgd.lr * buffers[i]
        kernel, bias = params
    return kernel, bias


STEPPERS = {
    "torch": torch_steps,
    "tensorflow": tensorflow_steps,
    "mxnet": mxnet_steps,
    "numpy": numpy_steps,
}

if __name__ == "__main__":
    kernel, bias = STEPPERS[sys.argv[1]]()
    print(json.dumps({"kernel": np.asarray(kernel).tolist(), "bias": np.asarray(bias).tolist()}))
