"""Models of Keras' applications by name (config models ``keras.<name>``), and the FLOPs one
forward pass of such a model does, as TensorFlow's profiler counts them.

TensorFlow 2.15 with Keras 2: ``tf.keras.applications.<Name>(weights=None, classes=...,
input_shape=...)``, never with downloaded weights. The model is built in the layout the cell
runs in (tf_ops.channels_last): NHWC on CPU, NCHW on CUDA unless channels_last.
"""

from __future__ import annotations

import difflib

import tensorflow as tf

from dpscale.plan.cell import ModelConfig

ZOO = "keras"
NAMES_SHOWN = 6  # of the zoo's names, in the one line a missing name fails with


def zoo_names() -> list[str]:
    """The model functions of tf.keras.applications (``MobileNetV2``), not its modules
    (``mobilenet_v2``, which hold their preprocessing)."""
    applications = tf.keras.applications
    return sorted(
        n for n in dir(applications) if n[:1].isupper() and callable(getattr(applications, n))
    )


def build_zoo_model(model: ModelConfig, channels_last: bool) -> tf.keras.Model:
    """``tf.keras.applications.<name>(weights=None, classes=classes, input_shape=...)``; a
    name the applications lack raises one line naming some that exist."""
    if model.zoo != ZOO:
        raise ValueError(f"model {model.name} is not from {ZOO}'s zoo")
    known = zoo_names()
    if model.zoo_name not in known:
        near = difflib.get_close_matches(model.zoo_name, known, n=NAMES_SHOWN, cutoff=0.5)
        raise ValueError(
            f"model {model.name}: tf.keras.applications {tf.__version__} has no model "
            f"{model.zoo_name!r}; allowed: e.g. {near or known[:NAMES_SHOWN]}"
        )
    size = model.image_size
    data_format = "channels_last" if channels_last else "channels_first"
    shape = (size, size, 3) if channels_last else (3, size, size)
    before = tf.keras.backend.image_data_format()
    tf.keras.backend.set_image_data_format(data_format)  # the applications read it
    try:
        build = getattr(tf.keras.applications, model.zoo_name)
        return build(weights=None, classes=model.classes, input_shape=shape)
    finally:
        tf.keras.backend.set_image_data_format(before)


def count_forward_flops(model: tf.keras.Model) -> int:
    """Forward FLOPs per sample by TensorFlow's profiler (``float_operation``) on the graph of
    one sample's forward pass in inference mode: its convolutions and matrix products count
    a multiply-add as two (resnet_spec's convention); it also counts element-wise operations
    the spec leaves out (the residual additions among them), well under 1% on ResNet-50."""
    shape = (1, *model.input_shape[1:])
    forward = tf.function(lambda images: model(images, training=False))
    graph = forward.get_concrete_function(tf.TensorSpec(shape, tf.float32)).graph
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    profile = tf.compat.v1.profiler.profile(graph=graph, options=options)
    return int(profile.total_float_ops)
