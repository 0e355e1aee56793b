# SPDX-License-Identifier: BSD-3-Clause
"""The training check's data, models and optimizer settings, shared by
train.py (one run under MPI and libnfcoll) and simulate.py (the routes'
formulas in one process). Importing this starts nothing."""

import gzip
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

DATA = os.environ.get("NF_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
TEXT = os.environ.get("NF_WORDNET", "/usr/share/wordnet")  # Debian's wordnet-base
MEAN, STD = 0.2860, 0.3530  # of the Fashion-MNIST training images


def idx(path, header):
    """A gzipped IDX file as a uint8 array (the header's dimensions)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(header)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * header).reshape(dims)


def load_data(subset=0):
    """(train images, train labels, test images, test labels): the first
    subset training images (0: all), every test image."""
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    if subset:
        xtr, ytr = xtr[:subset], ytr[:subset]
    return xtr, ytr, xte, yte


def load(split):
    """(images as float32 N x 1 x 28 x 28, normalized; labels as int64)."""
    x = idx(os.path.join(DATA, "%s-images-idx3-ubyte.gz" % split), 3)
    y = idx(os.path.join(DATA, "%s-labels-idx1-ubyte.gz" % split), 1)
    x = ((x.astype(np.float32) / 255.0 - MEAN) / STD)[:, None, :, :]
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


class CNN(torch.nn.Module):
    """Two 5x5 conv layers, one hidden fully connected layer, a classifier head."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(8, 16, 5, padding=2)
        self.fc = torch.nn.Linear(16 * 7 * 7, 128)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(F.relu(self.fc(x.flatten(1))))


class MLP(torch.nn.Module):
    """784-256-128-10."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 256)
        self.fc2 = torch.nn.Linear(256, 128)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


class ViT(torch.nn.Module):
    """A small Vision Transformer: the 28x28 image cut into 16 patches of 7x7,
    each embedded to WIDTH, a class token, learned positions, LAYERS pre-norm
    encoder layers (HEADS heads, MLP 2x WIDTH, GELU, no dropout), a
    LayerNorm and a linear head on the class token."""

    WIDTH, LAYERS, HEADS, PATCH = 64, 3, 4, 7

    def __init__(self):
        super().__init__()
        w, p = self.WIDTH, self.PATCH
        self.embed = torch.nn.Linear(p * p, w)
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, w))
        self.pos = torch.nn.Parameter(torch.randn(1, (28 // p) ** 2 + 1, w) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(w, self.HEADS, 2 * w, dropout=0.0,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, self.LAYERS,
                                                   enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(w)
        self.head = torch.nn.Linear(w, 10)

    def forward(self, x):
        p = self.PATCH
        b = x.shape[0]
        # (b, 1, 28, 28) -> (b, 16, 49): row-major 7x7 patches
        t = x.reshape(b, 28 // p, p, 28 // p, p).permute(0, 1, 3, 2, 4).reshape(b, -1, p * p)
        t = torch.cat([self.cls.expand(b, -1, -1), self.embed(t)], 1) + self.pos
        return self.head(self.norm(self.encoder(t)[:, 0]))


class CharLM(torch.nn.Module):
    """A small decoder-only Transformer over bytes: token embedding (wte) and
    learned positions (wpe) of width WIDTH, LAYERS pre-norm layers with a
    causal mask (HEADS heads, MLP 4x WIDTH, GELU, no dropout), a LayerNorm and
    a linear head to the 256 byte values (not tied to wte)."""

    WIDTH, LAYERS, HEADS, VOCAB = 96, 4, 4, 256

    def __init__(self, context=None):
        super().__init__()
        w, t = self.WIDTH, context or CONTEXT
        self.wte = torch.nn.Embedding(self.VOCAB, w)
        self.wpe = torch.nn.Parameter(torch.randn(1, t, w) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(w, self.HEADS, 4 * w, dropout=0.0,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, self.LAYERS, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(w)
        self.head = torch.nn.Linear(w, self.VOCAB)
        self.register_buffer("mask", torch.triu(torch.full((t, t), float("-inf")), 1),
                             persistent=False)

    def forward(self, x):
        """Logits (b, t, 256) for the next byte after each of x's (b, t)."""
        t = x.shape[1]
        h = self.wte(x) + self.wpe[:, :t]
        return self.head(self.norm(self.blocks(h, mask=self.mask[:t, :t])))


# The language model's text: WordNet 3.0's glosses, one line per synset
# ("lemma: gloss"), in the files' order; every tenth synset is validation.
CONTEXT = 256         # bytes a window predicts from (a window is CONTEXT + 1 bytes)
LM_TRAIN_WINDOWS = 2048  # the training windows a run uses (0 given: these)
LM_VALID_WINDOWS = 512


def load_text(subset=0):
    """(training windows, validation windows) as int64 tensors N x (CONTEXT +
    1): windows start every CONTEXT bytes of each text (neighbours share one
    byte); subset (0: LM_TRAIN_WINDOWS) training and LM_VALID_WINDOWS
    validation windows are taken evenly spaced over the whole text, so every
    part of speech is in both."""
    parts = ([], [])
    k = 0
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(TEXT, "data." + pos), "rb") as f:
            for line in f:
                if line.startswith(b"  "):  # the license header
                    continue
                bar = line.find(b" | ")
                if bar < 0:
                    continue
                lemma = line.split(b" ", 5)[4].replace(b"_", b" ")
                parts[k % 10 == 9].append(lemma + b": " + line[bar + 3:].strip() + b"\n")
                k += 1
    out = []
    for text, n in zip(parts, (subset or LM_TRAIN_WINDOWS, LM_VALID_WINDOWS)):
        buf = np.frombuffer(b"".join(text), dtype=np.uint8)
        starts = np.arange(0, len(buf) - CONTEXT - 1, CONTEXT)
        if n > len(starts):
            raise ValueError("%d windows asked for, the text has %d" % (n, len(starts)))
        pick = starts[np.linspace(0, len(starts) - 1, n).round().astype(np.int64)]
        win = np.stack([buf[s:s + CONTEXT + 1] for s in pick]).astype(np.int64)
        out.append(torch.from_numpy(win))
    return out[0], out[1]


MODELS = {"cnn": CNN, "mlp": MLP, "vit": ViT, "lm": CharLM}
TEXT_MODELS = ("lm",)  # trained on load_text(), scored by validation perplexity
OPTIMIZERS = {  # name: (lr, weight decay, warm-up fraction of the steps)
    "sgd": (0.05, 5e-4, 0.0),
    "adamw": (1e-3, 0.05, 0.1),
}
DEFAULT_OPTIMIZER = {"cnn": "sgd", "mlp": "sgd", "vit": "adamw", "lm": "adamw"}


def lr_factor(step, total, warmup, schedule):
    """The learning rate's factor at step (0-based) of total: a linear warm-up
    over the first warmup steps, then cosine to 0 (or constant)."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / (total - warmup)))
