"""Models for the real executor and flat-gradient helpers.

* ``small-cnn`` (default): three 3x3 conv + ReLU + 2x2 max-pool blocks (32, 64, 64 channels) and a
  128-unit hidden layer, 188,810 parameters; about 0.8 ms per image forward+backward on one CPU
  thread in float32, so a few workers train it on 2 cores. No batch normalisation, so the gradient
  of a mini-batch is exactly the sum of the gradients of its slices (what gradient coding needs).
* ``resnet18``: ``torchvision.models.resnet18`` (He et al., "Deep Residual Learning", CVPR 2016)
  with the usual CIFAR stem (3x3 stride-1 first convolution, no max-pool) and GroupNorm (Wu & He,
  ECCV 2018; 32 groups) instead of BatchNorm: batch statistics would make slice gradients differ
  from the full mini-batch gradient, and running statistics would live only on the workers.

Inputs are uint8 HWC images ``(N, 32, 32, 3)`` normalised with the CIFAR-10 channel means and
standard deviations; the loss is the mean cross-entropy over the *global* mini-batch, so a slice of
``b`` images contributes ``sum(loss over slice) / B`` and the partition gradients sum to the full
mini-batch gradient.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gcsim.errors import ConfigError

MODELS = ("small-cnn", "resnet18")
#: CIFAR-10 per-channel mean and std of the training set on the 0..1 scale (RGB).
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
DTYPES = {"float32": torch.float32, "float64": torch.float64}


class SmallCNN(nn.Sequential):
    """3 x (conv3x3 + ReLU + maxpool2) -> 1024 -> 128 -> ``num_classes`` logits. Input ``(N, 3, 32, 32)``."""

    def __init__(self, num_classes: int = 10, channels: tuple[int, int, int] = (32, 64, 64), hidden: int = 128):
        c1, c2, c3 = channels
        super().__init__(
            nn.Conv2d(3, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(c3 * 4 * 4, hidden), nn.ReLU(), nn.Linear(hidden, num_classes),
        )


def _resnet18(num_classes: int) -> nn.Module:
    from torchvision.models import resnet18

    net = resnet18(num_classes=num_classes, norm_layer=lambda ch: nn.GroupNorm(32, ch))
    net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    net.maxpool = nn.Identity()
    return net


def build_model(name: str = "small-cnn", *, seed: int = 0, dtype: str = "float32", num_classes: int = 10) -> nn.Module:
    """A freshly initialised model (parameters drawn from ``torch.manual_seed(seed)``).

    Raises:
        ConfigError: unknown ``name`` or ``dtype``.
    """
    if name not in MODELS:
        raise ConfigError("model", f"one of {', '.join(MODELS)}", name)
    if dtype not in DTYPES:
        raise ConfigError("dtype", f"one of {', '.join(DTYPES)}", dtype)
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        net = SmallCNN(num_classes) if name == "small-cnn" else _resnet18(num_classes)
    finally:
        torch.random.set_rng_state(gen_state)
    return net.to(DTYPES[dtype])


def to_input(images_hwc: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """uint8 ``(N, 32, 32, 3)`` -> normalised ``(N, 3, 32, 32)`` tensor of ``dtype``."""
    x = torch.from_numpy(np.ascontiguousarray(images_hwc)).to(dtype).permute(0, 3, 1, 2).div_(255.0)
    mean = torch.tensor(CIFAR10_MEAN, dtype=dtype).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR10_STD, dtype=dtype).view(1, 3, 1, 1)
    return (x - mean) / std


def num_parameters(model: nn.Module) -> int:
    """Number of trainable scalars ``l`` (length of a flat gradient)."""
    return sum(p.numel() for p in model.parameters())


def get_flat_weights(model: nn.Module) -> np.ndarray:
    """All parameters concatenated, ``(l,)`` numpy array in the model's dtype (a copy)."""
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().cpu().numpy().copy()


def set_flat_weights(model: nn.Module, flat: np.ndarray) -> None:
    """Load ``(l,)`` weights into the model's parameters (inverse of :func:`get_flat_weights`)."""
    p0 = next(model.parameters())
    vec = torch.as_tensor(np.asarray(flat), dtype=p0.dtype)
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(vec, model.parameters())


def get_flat_grad(model: nn.Module) -> np.ndarray:
    """All parameter gradients concatenated, ``(l,)`` numpy (zeros where a gradient is None)."""
    parts = [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in model.parameters()]
    return torch.cat(parts).detach().cpu().numpy().copy()


def set_flat_grad(model: nn.Module, flat: np.ndarray) -> None:
    """Write a flat ``(l,)`` gradient into ``p.grad`` of every parameter (for an optimizer step)."""
    offset = 0
    for p in model.parameters():
        n = p.numel()
        chunk = torch.as_tensor(np.asarray(flat[offset:offset + n]), dtype=p.dtype).view_as(p)
        if p.grad is None:
            p.grad = chunk.clone()
        else:
            p.grad.copy_(chunk)
        offset += n
    if offset != len(flat):
        raise ValueError(f"flat gradient: expected length {offset}, got {len(flat)}")


def slice_gradient(model: nn.Module, images_hwc: np.ndarray, labels: np.ndarray, global_batch: int) -> tuple[np.ndarray, float]:
    """Gradient of ``sum(cross-entropy over the slice) / global_batch`` at the model's weights.

    Summing this over the slices of a mini-batch of ``global_batch`` images gives exactly the
    gradient of the mini-batch's mean cross-entropy (linearity of the gradient).

    Returns:
        ``(flat_grad (l,), mean loss over the slice)`` (loss as a float; NaN for an empty slice).
    """
    p0 = next(model.parameters())
    model.zero_grad(set_to_none=False)
    if len(labels) == 0:
        return np.zeros(num_parameters(model), dtype=p0.detach().numpy().dtype), float("nan")
    x = to_input(images_hwc, p0.dtype)
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    losses = nn.functional.cross_entropy(model(x), y, reduction="none")
    (losses.sum() / global_batch).backward()
    return get_flat_grad(model), float(losses.mean().detach())


@torch.no_grad()
def evaluate(model: nn.Module, images_hwc: np.ndarray, labels: np.ndarray, batch_size: int = 1000,
             threads: int | None = None) -> tuple[float, float]:
    """Mean cross-entropy and accuracy (fraction 0..1) of ``model`` on a labelled set, using
    ``threads`` torch threads meanwhile (default: every CPU; restored afterwards)."""
    import os

    p0 = next(model.parameters())
    was_training = model.training
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads or os.cpu_count() or 1)
    model.eval()
    total_loss, correct = 0.0, 0
    try:
        for lo in range(0, len(labels), batch_size):
            x = to_input(images_hwc[lo:lo + batch_size], p0.dtype)
            y = torch.as_tensor(labels[lo:lo + batch_size], dtype=torch.long)
            logits = model(x)
            total_loss += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())
    finally:
        model.train(was_training)
        torch.set_num_threads(old_threads)
    n = max(len(labels), 1)
    return total_loss / n, correct / n
