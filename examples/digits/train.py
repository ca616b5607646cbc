"""Train a small classifier on real images through a DatasetRT cache.

    python examples/digits/train.py            # 12 epochs, about 15 seconds on 2 CPU cores
    python examples/digits/train.py --quick    # 4 epochs, about 5 seconds

Needs torch, Pillow and scikit-learn (`pip install torch pillow scikit-learn`).

1. scikit-learn's bundled handwritten digits (1,797 real 8x8 grey images of
   0-9, shipped with the package: no download) are saved as PNG files, one
   folder per digit: `digits/train/3/0042.png`. Every fifth image goes to
   `digits/test/` instead.
2. `dataset_rt.sources.FolderSource` writes each folder to a cache: the PNG
   bytes as the payload, the relative path, size and label as metadata. The
   label is the class index, the position of the parent folder's name among
   the sorted class names (as torchvision's ImageFolder numbers them): folder
   `3` is class 3.
3. A small convolutional network trains on the train cache through
   `dataset_rt.torch.DataLoader` with two worker processes, which decode the
   PNGs; every epoch is a fresh permutation of the training images
   (`ReaderConfig(replacement=False)`).
4. After each epoch it reads the test cache in order and prints the accuracy;
   the run fails if the last accuracy is below `--min-accuracy`.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from sklearn.datasets import load_digits
from torch import nn

from dataset_rt import CachedSample, CacheSource, CacheWriteError, DatasetRuntime, ReaderConfig
from dataset_rt.sources import FolderSource
from dataset_rt.torch import DataLoader

BATCH_SIZE = 32


def save_pngs(root: Path) -> tuple[int, int]:
    """Writes the digits as PNG files under root/train and root/test; returns the counts."""
    digits = load_digits()
    counts = {"train": 0, "test": 0}
    for index, (image, label) in enumerate(zip(digits.images, digits.target, strict=True)):
        split = "test" if index % 5 == 0 else "train"
        folder = root / split / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        pixels = np.round(image * (255 / 16)).astype(np.uint8)  # 0..16 grey levels to 0..255
        Image.fromarray(pixels, mode="L").save(folder / f"{index:04d}.png")
        counts[split] += 1
    return counts["train"], counts["test"]


def decode(sample: CachedSample) -> tuple[torch.Tensor, int]:
    """Runs in the DataLoader workers: PNG bytes to a 1x8x8 tensor in [0, 1]."""
    with Image.open(io.BytesIO(sample.data)) as image:
        pixels = np.asarray(image, dtype=np.float32) / 255.0
    label = sample.metadata["label"]  # the class index, an int
    assert isinstance(label, int)
    return torch.from_numpy(pixels).unsqueeze(0), label


def model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 32 x 4 x 4
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def accuracy(network: nn.Module, loader: DataLoader) -> float:
    network.eval()
    right = total = 0
    with torch.no_grad():
        for images, labels in loader:
            right += int((network(images).argmax(dim=1) == labels).sum())
            total += len(labels)
    network.train()
    return right / total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 epochs instead of 12")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    parser.add_argument("--min-accuracy", type=float, default=0.9)
    parser.add_argument(
        "--keep", type=Path, default=None, help="write the PNGs and caches here and keep them"
    )
    args = parser.parse_args(argv)
    epochs = args.epochs or (4 if args.quick else 12)
    work = args.keep or Path(tempfile.mkdtemp(prefix="dataset_rt_digits_"))
    started = time.perf_counter()
    try:
        train_count, test_count = save_pngs(work / "digits")
        print(
            f"saved {train_count} training and {test_count} test images "
            f"as PNG under {work / 'digits'}"
        )

        runtime = DatasetRuntime(num_workers=2)
        train_source = FolderSource(work / "digits" / "train", name="digits-train")
        # The test images numbered with the training classes, whatever folders they have.
        test_source = FolderSource(
            work / "digits" / "test", name="digits-test", classes=train_source.classes
        )
        assert train_source.classes == [str(digit) for digit in range(10)]
        sources: list[CacheSource] = [train_source, test_source]
        for result in runtime.write_cache(sources, work / "caches"):
            if isinstance(result, CacheWriteError):
                print(f"error: {result.source_name}: {result.message}", file=sys.stderr)
                return 1
        train_set = runtime.cached_dataset(
            [work / "caches" / "digits-train"],
            reader_config=ReaderConfig(seed=0, replacement=False),
        )
        test_set = runtime.cached_dataset(
            [work / "caches" / "digits-test"], reader_config=ReaderConfig(seed=0, shuffle=False)
        )
        print(f"caches: {len(train_set)} training samples, {len(test_set)} test samples")

        train_loader = DataLoader(
            train_set.to_torch_iterable_dataset(transform=decode, batch_size=BATCH_SIZE),
            batch_size=BATCH_SIZE,
            num_workers=args.workers,
            persistent_workers=args.workers > 0,
        )
        test_loader = DataLoader(
            test_set.to_torch_iterable_dataset(transform=decode, batch_size=256), batch_size=256
        )
        torch.manual_seed(0)
        network = model()
        optimizer = torch.optim.Adam(network.parameters(), lr=3e-3)
        last = 0.0
        for epoch in range(epochs):
            for images, labels in train_loader:
                optimizer.zero_grad()
                nn.functional.cross_entropy(network(images), labels).backward()
                optimizer.step()
            last = accuracy(network, test_loader)
            print(f"epoch {epoch + 1}/{epochs}: test accuracy {last:.3f}")
        print(f"done in {time.perf_counter() - started:.1f} s")
        if last < args.min_accuracy:
            print(f"error: accuracy {last:.3f} is below {args.min_accuracy}", file=sys.stderr)
            return 1
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
