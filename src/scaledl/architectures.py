"""The small architectures scaledl writes itself (torchvision has no LeNet and no CIFAR-sized AlexNet); the
registry (scaledl.models) names them and imports this module on the first build, so that naming a model
costs no torch import (`scaledl train --help`)."""

from __future__ import annotations

import torch
from torch import nn


class LeNet(nn.Module):
    """Caffe's LeNet for MNIST (paper Fig. 3): conv20-5 → pool → conv50-5 → pool → fc500 → ReLU → fc."""

    def __init__(self, in_shape: tuple[int, int, int], classes: int):
        super().__init__()
        c, h, w = in_shape
        self.features = nn.Sequential(
            nn.Conv2d(c, 20, 5),
            nn.MaxPool2d(2),
            nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2),
        )
        flat = _flat_size(self.features, in_shape)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(flat, 500), nn.ReLU(inplace=True), nn.Linear(500, classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class LeNetBN(nn.Module):
    """LeNet with BatchNorm2d after each convolution: a small BatchNorm model (BN statistics are buffers,
    which the algorithms do not exchange; see train._center_evaluator)."""

    def __init__(self, in_shape: tuple[int, int, int], classes: int):
        super().__init__()
        c, h, w = in_shape
        self.features = nn.Sequential(
            nn.Conv2d(c, 20, 5),
            nn.BatchNorm2d(20),
            nn.MaxPool2d(2),
            nn.Conv2d(20, 50, 5),
            nn.BatchNorm2d(50),
            nn.MaxPool2d(2),
        )
        flat = _flat_size(self.features, in_shape)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(flat, 500), nn.ReLU(inplace=True), nn.Linear(500, classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class CifarAlexNet(nn.Module):
    """AlexNet's 5 conv + 3 fc layers adapted to 32×32 inputs.

    The paper's AlexNet on CIFAR has 249 MB of weights, i.e. the full
    ImageNet-width network. Here the convolutions keep AlexNet's widths
    (64-192-384-256-256) with 3×3 kernels and stride 1 (an 11×11/4 stem would
    reduce 32×32 to 7×7), and the classifier keeps the 4096-4096 widths, so
    the weight count stays in AlexNet's regime (~37 M parameters).
    """

    def __init__(self, in_shape: tuple[int, int, int], classes: int, width: int = 4096):
        super().__init__()
        c = in_shape[0]
        self.features = nn.Sequential(
            nn.Conv2d(c, 64, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 192, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(192, 384, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        flat = _flat_size(self.features, in_shape)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(),
            nn.Linear(flat, width),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(width, width),
            nn.ReLU(inplace=True),
            nn.Linear(width, classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class CifarNet(nn.Module):
    """A small CIFAR CNN (Caffe's cifar10_quick shape) for fast CPU runs."""

    def __init__(self, in_shape: tuple[int, int, int], classes: int):
        super().__init__()
        c = in_shape[0]
        self.features = nn.Sequential(
            nn.Conv2d(c, 32, 5, padding=2),
            nn.MaxPool2d(2),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(2),
        )
        flat = _flat_size(self.features, in_shape)
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(flat, 64), nn.Linear(64, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def _flat_size(features: nn.Module, in_shape: tuple[int, int, int]) -> int:
    was_training = features.training
    features.eval()  # BatchNorm: a batch of one has no variance in train mode, and no statistics may change
    with torch.no_grad():
        n = features(torch.zeros(1, *in_shape)).numel()
    features.train(was_training)
    return n
