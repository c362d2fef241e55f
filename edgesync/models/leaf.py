"""LEAF's reference models (Caldas et al. 2018, the LEAF benchmark's femnist/cnn.py, shakespeare/stacked_lstm.py,
sent140/stacked_lstm.py and celeba/cnn.py), rebuilt in PyTorch layer for layer.

- `leaf_cnn`, FEMNIST's CNN for 1×28×28 images: conv 5×5 (32, same padding) → ReLU → max-pool 2 → conv 5×5
  (64, same padding) → ReLU → max-pool 2 → Linear(64·7·7 → 2048) → ReLU → Linear(2048 → classes).
- `leaf_lstm`, Shakespeare's next-character model: int64 character indices (N, L) → Embedding(80 → 8) →
  2-layer LSTM of 256 units (batch first) → the last time step's output → Linear(256 → 80).
- `leaf_sent140_lstm`, Sent140's sentiment model: int64 word indices (N, 25) → Embedding(10,001 → 100) → 2-layer
  LSTM of 100 units → the last time step's output → Linear(100 → 128) (no activation, as LEAF's) →
  Linear(128 → 2). LEAF's code (its create_model) builds the embedding as a trainable variable of
  (vocabulary + 1) × 100, the LSTM's width, initialised at random: the paper's 300-d GloVe vectors are loaded
  into `emb_arr` but not used. So here: a trainable embedding of 100 dimensions, its 10,001 rows the index space
  of edgesync/data/leaf_sent140.py (a vocabulary of at most 10,000 training words, then one row shared by
  unknown words and padding), where LEAF's rows are GloVe's 400,000 words and one for unknown words and
  padding.
- `leaf_celeba_cnn`, CelebA's smile classifier for 3×84×84 images: four blocks of conv 3×3 (32, same padding) →
  batch norm → max-pool 2 (TensorFlow's same padding: the side rounds up, 84 → 42 → 21 → 11 → 6) → ReLU, then
  Linear(32·6·6 → 2). LEAF's TensorFlow graph normalises with the batch's statistics also when it
  evaluates (`training=True`); here evaluation uses the running statistics, as PyTorch's BatchNorm2d does in
  eval mode.

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
SENT140_TOKENS = 10_001  # word indices 0..10,000: edgesync/data/leaf_sent140.py's TOKEN_INDICES
SENT140_HIDDEN = 100  # LEAF's n_hidden: the embedding's and each LSTM layer's width
SENT140_DENSE = 128
CELEBA_FILTERS = 32
CELEBA_BLOCKS = 4


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


class LeafSent140LSTM(nn.Module):
    """LEAF's Sent140 stacked LSTM: 1,174,886 parameters for 2 classes (embedding 1,000,100 + LSTM layer 1 80,800
    + layer 2 80,800 + dense 12,928 + output 258); 85% of them in the embedding."""

    def __init__(self, num_classes: int = 2, tokens: int = SENT140_TOKENS) -> None:
        super().__init__()
        self.embedding = nn.Embedding(tokens, SENT140_HIDDEN)
        self.lstm = nn.LSTM(SENT140_HIDDEN, SENT140_HIDDEN, num_layers=LSTM_LAYERS, batch_first=True)
        self.dense = nn.Linear(SENT140_HIDDEN, SENT140_DENSE)
        self.output = nn.Linear(SENT140_DENSE, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N, L) int64 word indices → (N, num_classes) logits."""
        steps, _ = self.lstm(self.embedding(tokens))  # (N, L, hidden)
        return self.output(self.dense(steps[:, -1]))


class LeafCelebaCNN(nn.Module):
    """LEAF's CelebA CNN: 31,202 parameters for 3 channels and 2 classes (conv1 896 + three convs of 9,248 + four
    batch norms of 64 + output 2,306), and each batch norm's running mean and variance as buffers. Inputs 84×84
    only."""

    def __init__(self, num_classes: int = 2, in_channels: int = 3) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        for i in range(CELEBA_BLOCKS):
            blocks += [nn.Conv2d(in_channels if i == 0 else CELEBA_FILTERS, CELEBA_FILTERS, kernel_size=3, padding=1),
                       nn.BatchNorm2d(CELEBA_FILTERS),
                       nn.MaxPool2d(2, stride=2, ceil_mode=True),  # TensorFlow's "same": 21 → 11, 11 → 6
                       nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*blocks)  # (N, 32, 6, 6) from 84×84
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(CELEBA_FILTERS * 6 * 6, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def leaf_cnn(num_classes: int, in_channels: int) -> nn.Module:
    return LeafCNN(num_classes=num_classes, in_channels=in_channels)


def leaf_lstm(num_classes: int, in_channels: int) -> nn.Module:
    """`num_classes` is the vocabulary (80 for LEAF's Shakespeare). `in_channels` is ignored: a sequence of
    character indices has no channels (a token dataset's first input dimension is its sequence length)."""
    del in_channels
    return LeafStackedLSTM(vocabulary=num_classes)


def leaf_sent140_lstm(num_classes: int, in_channels: int) -> nn.Module:
    """`num_classes`: 2 for LEAF's Sent140. `in_channels` is ignored (a token dataset's first input dimension is
    its sequence length, 25); the embedding's rows are the fixed index space of LEAF's Sent140 reader."""
    del in_channels
    return LeafSent140LSTM(num_classes=num_classes)


def leaf_celeba_cnn(num_classes: int, in_channels: int) -> nn.Module:
    return LeafCelebaCNN(num_classes=num_classes, in_channels=in_channels)
