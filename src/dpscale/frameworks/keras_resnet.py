"""Keras (TensorFlow 2.15, Keras 2) builder of dpscale's ResNet specification.

No keras.applications: the network is walked from `ResNetSpec`, like the PyTorch builder.
PyTorch pads a convolution symmetrically by `padding`; Keras' 'same' pads asymmetrically
for stride 2 (more on the bottom/right), so every padded layer here is an explicit
ZeroPadding2D followed by a 'valid' layer, which sees exactly PyTorch's windows.
"""

from __future__ import annotations

import math

import tensorflow as tf

from dpscale.plan.resnet_spec import Block, Conv, ResNetSpec, print_parity_counts

layers = tf.keras.layers

# torch.nn.BatchNorm2d(eps=1e-5, momentum=0.1) updates running = 0.9 running + 0.1 batch;
# Keras' momentum is the weight of the old value.
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9


def _conv_init() -> tf.keras.initializers.Initializer:
    """torchvision's kaiming_normal_(mode="fan_out", nonlinearity="relu").

    A fresh instance per layer: an unseeded Keras initializer reused across layers gives
    every layer of the same shape identical weights.
    """
    return tf.keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")


def _data_format(channels_last: bool) -> str:
    return "channels_last" if channels_last else "channels_first"


def _conv_bn(x: tf.Tensor, conv: Conv, name: str, channels_last: bool, relu: bool) -> tf.Tensor:
    data_format = _data_format(channels_last)
    if conv.padding:
        x = layers.ZeroPadding2D(conv.padding, data_format=data_format, name=f"{name}_pad")(x)
    x = layers.Conv2D(
        conv.out_channels,
        conv.kernel,
        strides=conv.stride,
        padding="valid",
        data_format=data_format,
        use_bias=False,
        kernel_initializer=_conv_init(),
        name=f"{name}_conv",
    )(x)
    x = layers.BatchNormalization(
        axis=-1 if channels_last else 1,
        epsilon=BN_EPSILON,
        momentum=BN_MOMENTUM,
        name=f"{name}_bn",
    )(x)
    return layers.ReLU(name=f"{name}_relu")(x) if relu else x


def _residual_block(x: tf.Tensor, block: Block, name: str, channels_last: bool) -> tf.Tensor:
    shortcut = x
    if block.shortcut is not None:
        shortcut = _conv_bn(x, block.shortcut, f"{name}_shortcut", channels_last, relu=False)
    last = len(block.convs) - 1
    for index, conv in enumerate(block.convs):
        x = _conv_bn(x, conv, f"{name}_{index + 1}", channels_last, relu=index < last)
    x = layers.Add(name=f"{name}_add")([x, shortcut])
    return layers.ReLU(name=f"{name}_out")(x)


def _stem(x: tf.Tensor, spec: ResNetSpec, channels_last: bool) -> tf.Tensor:
    x = _conv_bn(x, spec.stem_conv, "stem", channels_last, relu=True)
    if spec.stem_maxpool:
        # Zero padding equals PyTorch's -inf padding here: the input is post-ReLU (>= 0)
        # and every window holds at least one real value.
        data_format = _data_format(channels_last)
        x = layers.ZeroPadding2D(1, data_format=data_format, name="stem_pool_pad")(x)
        x = layers.MaxPooling2D(3, 2, data_format=data_format, name="stem_pool")(x)
    return x


def _classifier(x: tf.Tensor, spec: ResNetSpec, channels_last: bool) -> tf.Tensor:
    x = layers.GlobalAveragePooling2D(data_format=_data_format(channels_last), name="pool")(x)
    # torch.nn.Linear's default init: weight and bias uniform in +-1/sqrt(fan_in).
    bound = 1.0 / math.sqrt(spec.feature_channels)
    return layers.Dense(
        spec.classes,
        kernel_initializer=tf.keras.initializers.VarianceScaling(1.0 / 3, "fan_in", "uniform"),
        bias_initializer=tf.keras.initializers.RandomUniform(-bound, bound),
        name="fc",
    )(x)


def build_keras_resnet(spec: ResNetSpec, channels_last: bool = True) -> tf.keras.Model:
    """The functional Keras model of `spec`; outputs logits.

    channels_first (NCHW) builds everywhere but TensorFlow runs NCHW convolutions on GPUs only.
    """
    size = spec.image_size
    shape = (size, size, 3) if channels_last else (3, size, size)
    inputs = tf.keras.Input(shape=shape, name="images")
    x = _stem(inputs, spec, channels_last)
    for stage_index, stage in enumerate(spec.stages(), start=1):
        for block_index, block in enumerate(stage, start=1):
            x = _residual_block(x, block, f"stage{stage_index}_block{block_index}", channels_last)
    return tf.keras.Model(inputs, _classifier(x, spec, channels_last), name=spec.name)


def trainable_param_count(model: tf.keras.Model) -> int:
    return sum(weight.shape.num_elements() for weight in model.trainable_weights)


def _spatial_size(shape: tf.TensorShape, channels_last: bool) -> int:
    height, width = (shape[1], shape[2]) if channels_last else (shape[2], shape[3])
    return height * width


def count_forward_flops(model: tf.keras.Model, spec: ResNetSpec) -> int:
    """FLOPs of convolutions and dense layers, read from the built layers' output shapes."""
    expected = spec.image_size
    if expected not in model.input_shape[1:3] and expected not in model.input_shape[2:4]:
        raise ValueError(f"model input {model.input_shape} is not {expected}px")
    total = 0
    for layer in model.layers:
        if isinstance(layer, layers.Conv2D):
            kh, kw, in_channels, out_channels = layer.kernel.shape
            channels_last = layer.data_format == "channels_last"
            out_pixels = _spatial_size(layer.output.shape, channels_last)
            total += 2 * kh * kw * in_channels * out_channels * out_pixels
        elif isinstance(layer, layers.Dense):
            in_features, out_features = layer.kernel.shape
            total += 2 * in_features * out_features
    return int(total)


def main(argv: list[str] | None = None) -> None:
    print_parity_counts(
        build_keras_resnet,
        trainable_param_count,
        count_forward_flops,
        argv,
        after_each=tf.keras.backend.clear_session,
    )


if __name__ == "__main__":
    main()
