"""LEAF's two reference models (Caldas et al. 2018, the LEAF benchmark's femnist/cnn.py and
shakespeare/stacked_lstm.py), rebuilt in PyTorch layer for layer.

- `leaf_cnn`, FEMNIST's CNN for 1×28×28 images: conv 5×5 (32, same padding) → ReLU → max-pool 2 → conv 5×5
  (64, same padding) → ReLU → max-pool 2 → Linear(64·7·7 → 2048) → ReLU → Linear(2048 → classes).
- `leaf_lstm`, Shakespeare's next-character model: int64 character indices (N, L) → Embedding(80 → 8) →
  2-layer LSTM of 256 units (batch first) → the last time step's output → Linear(256 → 80).

Weights start from PyTorch's default initialisation, not TensorFlow's Glorot-uniform of the reference code: the
layers and their sizes are LEAF's, the initial draw is not.
"""

from __future__ import annotations

import torch
from torch import nn

LEAF_VOCABULARY = 80  # LEAF's Shakespeare characters: the inputs' indices and the next character's classes
EMBEDDING_DIM = 8
LSTM_HIDDEN = 256
LSTM_LAYERS = 2


class LeafCNN(nn.Module):
    """LEAF's FEMNIST CNN: 6,603,710 parameters for 1 channel and 62 classes (conv1 832 + conv2 51,264 +
    dense 6,424,576 + output 127,038); 97% of them in the 3136 → 2048 dense layer. Inputs 28×28 only."""

    def __init__(self, num_classes: int = 62, in_channels: int = 1) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=5, padding=2),  # "same": (N, 32, 28, 28)
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2, stride=2),  # (N, 32, 14, 14)
            nn.Conv2d(32, 64, kernel_size=5, padding=2),  # (N, 64, 14, 14)
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2, stride=2),  # (N, 64, 7, 7)
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),  # (N, 3136)
            nn.Linear(64 * 7 * 7, 2048),
            nn.ReLU(inplace=True),
            nn.Linear(2048, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class LeafStackedLSTM(nn.Module):
    """LEAF's Shakespeare stacked LSTM: 819,920 parameters for 80 characters (embedding 640 + LSTM layer 1
    272,384 + layer 2 526,336 + dense 20,560). PyTorch's LSTM keeps two bias vectors per layer where
    TensorFlow's cell keeps one, so it has 2,048 more parameters than LEAF's 817,872; they train as one bias.

    `vocabulary` is both the input indices' range and the number of classes (the next character)."""

    def __init__(self, vocabulary: int = LEAF_VOCABULARY) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, EMBEDDING_DIM)
        self.lstm = nn.LSTM(EMBEDDING_DIM, LSTM_HIDDEN, num_layers=LSTM_LAYERS, batch_first=True)
        self.output = nn.Linear(LSTM_HIDDEN, vocabulary)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N, L) int64 character indices → (N, vocabulary) logits of the character after them."""
        steps, _ = self.lstm(self.embedding(tokens))  # (N, L, hidden)
        return self.output(steps[:, -1])


def leaf_cnn(num_classes: int, in_channels: int) -> nn.Module:
    return LeafCNN(num_classes=num_classes, in_channels=in_channels)


def leaf_lstm(num_classes: int, in_channels: int) -> nn.Module:
    """`num_classes` is the vocabulary (80 for LEAF's Shakespeare). `in_channels` is ignored: a sequence of
    character indices has no channels (a token dataset's first input dimension is its sequence length)."""
    del in_channels
    return LeafStackedLSTM(vocabulary=num_classes)
