"""Keras models: MLP and small CNN for quick runs, ResNet-v2 and MobileNet as in the paper.

Every model outputs **logits** (no softmax) and names its penultimate layer
``"embedding"`` (used by the Coreset and Cluster-Margin strategies).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MODELS", "RESNET_DEPTHS", "build_model", "check_model", "embedding_model"]

MODELS = ("mlp", "cnn", "resnet", "mobilenet")
#: Depths of the CIFAR-style bottleneck ResNet-v2 (He et al., 2016): 9 n + 2.
RESNET_DEPTHS = (11, 20, 29, 56, 110)


def build_model(
    name: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    *,
    width: int = 64,
    depth: int = 11,
    alpha: float = 1.0,
    seed: int | None = None,
) -> Any:
    """Build an uncompiled Keras model that outputs logits.

    Parameters
    ----------
    name : {"mlp", "cnn", "resnet", "mobilenet"}
    input_shape : tuple
        ``(H, W, C)`` images, or ``(L,)`` sequences (the CNN then uses 1-D convolutions).
    num_classes : int
    width : int
        Hidden units of the MLP / filters of the CNN's first layer.
    depth : int
        ResNet-v2 depth, one of :data:`RESNET_DEPTHS`.
    alpha : float
        MobileNet width multiplier (e.g. 0.25, 0.5, 1.0).
    seed : int, optional
        Seed for ``keras.utils.set_random_seed`` before the weights are drawn.
    """
    import keras

    check_model(name, input_shape, depth=depth, alpha=alpha)
    if seed is not None:
        keras.utils.set_random_seed(int(seed))
    if name == "mlp":
        return _mlp(input_shape, num_classes, width)
    if name == "cnn":
        return _cnn(input_shape, num_classes, width)
    if name == "resnet":
        return _resnet_v2(input_shape, num_classes, depth)
    return _mobilenet(input_shape, num_classes, alpha)


def check_model(name: str, input_shape: tuple[int, ...] | None = None, *, depth: int = 11,
                alpha: float = 1.0) -> None:
    """Raise ``ValueError`` unless :func:`build_model` can build ``name`` with these options.

    ``input_shape`` (when known) must be ``(H, W, C)`` images for the ResNet and MobileNet.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {MODELS}")
    if name == "resnet" and depth not in RESNET_DEPTHS:
        raise ValueError(f"ResNet-v2 depth must be one of {RESNET_DEPTHS}, got {depth}")
    if name == "mobilenet" and not alpha > 0:
        raise ValueError(f"MobileNet width multiplier must be > 0, got {alpha}")
    if name in ("resnet", "mobilenet") and input_shape is not None and len(input_shape) != 3:
        raise ValueError(f"{name} needs (H, W, C) images, got input shape {input_shape}")


def embedding_model(model: Any) -> Any:
    """A model sharing ``model``'s weights that outputs its ``"embedding"`` layer."""
    import keras

    return keras.Model(model.inputs, model.get_layer("embedding").output)


def _mlp(shape: tuple[int, ...], k: int, width: int) -> Any:
    from keras import Input, Model, layers

    inp = Input(shape)
    h = layers.Flatten()(inp)
    h = layers.Dense(width, activation="relu")(h)
    h = layers.Dense(width, activation="relu", name="embedding")(h)
    return Model(inp, layers.Dense(k)(h), name="mlp")


def _cnn(shape: tuple[int, ...], k: int, width: int) -> Any:
    from keras import Input, Model, layers

    inp = Input(shape)
    if len(shape) == 1:
        h = layers.Reshape((shape[0], 1))(inp)
        conv, pool = layers.Conv1D, layers.MaxPooling1D
    elif len(shape) == 3:
        h = inp
        conv, pool = layers.Conv2D, layers.MaxPooling2D
    else:
        raise ValueError(f"cnn needs (L,) or (H, W, C) inputs, got {shape}")
    f = max(4, width // 2)
    h = conv(f, 3, padding="same", activation="relu")(h)
    h = pool(2)(h)
    h = conv(2 * f, 3, padding="same", activation="relu")(h)
    h = pool(2)(h)
    h = layers.Flatten()(h)
    h = layers.Dense(width, activation="relu", name="embedding")(h)
    return Model(inp, layers.Dense(k)(h), name="cnn")


def _resnet_v2(shape: tuple[int, ...], k: int, depth: int) -> Any:
    """CIFAR ResNet-v2 with pre-activation bottleneck blocks (Keras example layout)."""
    from keras import Input, Model, layers

    n_blocks = (depth - 2) // 9

    def bn_relu(x: Any) -> Any:
        return layers.Activation("relu")(layers.BatchNormalization()(x))

    inp = Input(shape)
    filters_in = 16
    x = layers.Conv2D(filters_in, 3, padding="same", use_bias=False)(inp)
    for stage in range(3):
        filters_out = filters_in * (4 if stage == 0 else 2)
        for block in range(n_blocks):
            strides = 2 if (stage > 0 and block == 0) else 1
            pre = bn_relu(x)
            y = layers.Conv2D(filters_in, 1, strides=strides, use_bias=False)(pre)
            y = layers.Conv2D(filters_in, 3, padding="same", use_bias=False)(bn_relu(y))
            y = layers.Conv2D(filters_out, 1, use_bias=False)(bn_relu(y))
            if block == 0:
                x = layers.Conv2D(filters_out, 1, strides=strides, use_bias=False)(pre)
            x = layers.Add()([x, y])
        filters_in = filters_out
    x = bn_relu(x)
    x = layers.GlobalAveragePooling2D(name="embedding")(x)
    return Model(inp, layers.Dense(k)(x), name=f"resnet{depth}_v2")


def _mobilenet(shape: tuple[int, ...], k: int, alpha: float) -> Any:
    """MobileNet-v1 style depthwise-separable stack with width multiplier ``alpha``.

    Fewer stride-2 stages than ImageNet MobileNet so that 28x28 / 32x32 inputs work.
    """
    from keras import Input, Model, layers

    def ch(c: int) -> int:
        return max(8, int(c * alpha))

    inp = Input(shape)
    x = layers.Conv2D(ch(32), 3, padding="same", use_bias=False)(inp)
    x = layers.ReLU(6.0)(layers.BatchNormalization()(x))
    for c, s in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (1024, 1)):
        x = layers.DepthwiseConv2D(3, strides=s, padding="same", use_bias=False)(x)
        x = layers.ReLU(6.0)(layers.BatchNormalization()(x))
        x = layers.Conv2D(ch(c), 1, use_bias=False)(x)
        x = layers.ReLU(6.0)(layers.BatchNormalization()(x))
    x = layers.GlobalAveragePooling2D(name="embedding")(x)
    return Model(inp, layers.Dense(k)(x), name=f"mobilenet_{alpha:g}")
