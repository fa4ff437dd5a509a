"""FashionMNIST, identical for both frameworks.

Where the files come from, in order:

1. ``$FASHION_MNIST_DIR`` (a folder with the four ``*-ubyte.gz`` files, or
   torchvision's ``FashionMNIST/raw`` layout below it). When set, it is the
   only place looked at: a wrong setting is an error, not a silent fallback.
2. Debian's ``dataset-fashion-mnist`` package: ``/usr/share/datasets/fashion-mnist``.
3. torchvision downloads them into ``root`` (``data/`` by default) when
   ``download=True``, or by default when running on Colab
   (:func:`on_colab`), where neither of the above exists.

Every file is checked: its IDX header (magic, counts, shape) and the MD5 of
its decompressed bytes (Debian recompresses the archives, so the ``.gz``
digests differ from upstream while the content is the same). A missing or
corrupt copy raises :class:`DataError`, whose message says how to get one.

Arrays: images ``(N, 28, 28) uint8``, labels ``(N,) int64``. The same split,
normalisation and per-epoch shuffling (from one seed) serve PyTorch and JAX.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from sidebyside.run import runkey

__all__ = [
    "CLASSES",
    "DEBIAN_DIR",
    "DataError",
    "FashionMNIST",
    "find_dir",
    "load",
    "on_colab",
    "normalise",
    "epoch_permutation",
    "iterate_batches",
    "num_batches",
]

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")

CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)

# name -> (IDX magic, number of items, MD5 of the decompressed file)
FILES = {
    "train-images-idx3-ubyte.gz": (2051, 60000, "f4a8712d7a061bf5bd6d2ca38dc4d50a"),
    "train-labels-idx1-ubyte.gz": (2049, 60000, "9018921c3c673c538a1fc5bad174d6f9"),
    "t10k-images-idx3-ubyte.gz": (2051, 10000, "8181f5470baa50b63fa0f6fddb340f0a"),
    "t10k-labels-idx1-ubyte.gz": (2049, 10000, "15d484375f8d13e6eb1aabb0c3f46965"),
}

# Statistics of the training images scaled to [0, 1]; fixed so that both
# frameworks, and every notebook, normalise with the very same numbers.
MEAN = 0.2860405969887955
STD = 0.35302424451492237

HOW_TO_GET = (
    "Get FashionMNIST in one of these ways:\n"
    "  - on Debian/Ubuntu: sudo apt-get install dataset-fashion-mnist\n"
    "    (installs the four .gz files into /usr/share/datasets/fashion-mnist)\n"
    "  - set FASHION_MNIST_DIR to a folder that holds train-images-idx3-ubyte.gz,\n"
    "    train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz\n"
    "  - with network access: sidebyside.lab.data.load(download=True) (uses torchvision; the default on Colab)"
)


class DataError(RuntimeError):
    """FashionMNIST is missing or corrupt; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class FashionMNIST:
    """The dataset as NumPy arrays, plus where it was read from."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    source: Path
    classes: tuple[str, ...] = CLASSES

    def __repr__(self) -> str:
        return (
            f"FashionMNIST(train={self.X_train.shape[0]}, test={self.X_test.shape[0]}, "
            f"image={self.X_train.shape[1:]}, classes={len(self.classes)}, source={self.source.name!r})"
        )


def _has_files(directory: Path) -> bool:
    return all((directory / name).is_file() for name in FILES)


def _candidates(directory: Path) -> list[Path]:
    return [directory, directory / "FashionMNIST" / "raw", directory / "raw"]


def find_dir(root: str | os.PathLike | None = None) -> Path | None:
    """The first folder holding all four files, or None.

    ``root`` (if given) is searched first, then ``$FASHION_MNIST_DIR``'s
    absence is checked by :func:`load`, then Debian's folder.
    """
    places: list[Path] = []
    if root is not None:
        places += _candidates(Path(root))
    places += _candidates(DEBIAN_DIR)
    for place in places:
        if _has_files(place):
            return place
    return None


def _read_idx(path: Path, magic: int, count: int, md5: str) -> np.ndarray:
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DataError(f"{path} is not a readable gzip file ({exc}).\n{HOW_TO_GET}") from exc
    digest = hashlib.md5(raw).hexdigest()
    if digest != md5:
        raise DataError(
            f"{path} is corrupt: the MD5 of its content is {digest}, expected {md5}.\n"
            f"Delete it and fetch it again.\n{HOW_TO_GET}"
        )
    header = np.frombuffer(raw[:4], dtype=">i4")[0]
    if header != magic:
        raise DataError(f"{path}: IDX magic {header}, expected {magic}.\n{HOW_TO_GET}")
    n = int(np.frombuffer(raw[4:8], dtype=">i4")[0])
    if n != count:
        raise DataError(f"{path}: holds {n} items, expected {count}.\n{HOW_TO_GET}")
    if magic == 2051:
        rows, cols = np.frombuffer(raw[8:16], dtype=">i4")
        return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, int(rows), int(cols))
    return np.frombuffer(raw, dtype=np.uint8, offset=8).astype(np.int64)


def _download(root: Path) -> Path:
    try:
        from torchvision.datasets import FashionMNIST as TorchvisionFashionMNIST
    except ImportError as exc:
        raise DataError(f"download=True needs torchvision, which is not installed.\n{HOW_TO_GET}") from exc
    try:
        TorchvisionFashionMNIST(str(root), train=True, download=True)
        TorchvisionFashionMNIST(str(root), train=False, download=True)
    except Exception as exc:  # network errors come in many types
        raise DataError(f"Downloading FashionMNIST into {root} failed: {exc}\n{HOW_TO_GET}") from exc
    return root / "FashionMNIST" / "raw"


def on_colab() -> bool:
    """True inside a Google Colab kernel (it imports ``google.colab`` at start)."""
    return "google.colab" in sys.modules


def load(root: str | os.PathLike | None = None, *, download: bool | None = None) -> FashionMNIST:
    """Load and verify FashionMNIST (see the module docstring for where from).

    ``root``: an extra folder to look in first (and to download into).
    ``download``: let torchvision fetch the files when no local copy is found;
    None (the default) means "only on Colab", so notebooks call ``load()``
    everywhere and a Colab run needs no edit.
    Returns a :class:`FashionMNIST`; raises :class:`DataError` if missing or corrupt.
    """
    if download is None:
        download = on_colab()
    configured = os.environ.get("FASHION_MNIST_DIR")
    if configured:
        directory = next((p for p in _candidates(Path(configured)) if _has_files(p)), None)
        if directory is None:
            missing = [name for name in FILES if not (Path(configured) / name).is_file()]
            raise DataError(
                f"FASHION_MNIST_DIR={configured} does not hold the FashionMNIST files "
                f"(missing: {', '.join(missing)}).\nFix or unset FASHION_MNIST_DIR.\n{HOW_TO_GET}"
            )
    else:
        directory = find_dir(root)
        if directory is None:
            if not download:
                looked = ", ".join(str(p) for p in ([Path(root)] if root else []) + [DEBIAN_DIR])
                raise DataError(f"FashionMNIST not found (looked in {looked}).\n{HOW_TO_GET}")
            directory = _download(Path(root or "data"))
    arrays = [_read_idx(directory / name, *spec) for name, spec in FILES.items()]
    for name in FILES:
        runkey.note_input(directory / name)  # a published run is stale when its data change
    return FashionMNIST(*arrays, source=directory)


def normalise(images: np.ndarray, *, mean: float = MEAN, std: float = STD) -> np.ndarray:
    """uint8 images -> float32, scaled to [0, 1] then standardised with the
    training set's mean and standard deviation (the same for both frameworks).
    Pass ``mean=0, std=1`` for plain [0, 1] scaling."""
    return ((images.astype(np.float32) / 255.0) - np.float32(mean)) / np.float32(std)


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order of the ``n`` training examples in ``epoch``: a function of
    (seed, epoch) alone, so both frameworks see the same batches."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def num_batches(n: int, batch_size: int, *, drop_last: bool = False) -> int:
    """How many batches of ``batch_size`` cover ``n`` examples (the last one short unless ``drop_last``)."""
    return n // batch_size if drop_last else -(-n // batch_size)


def iterate_batches(
    X: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    *,
    seed: int | None = None,
    epoch: int = 0,
    drop_last: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(X_batch, y_batch)`` NumPy batches; shuffled by
    :func:`epoch_permutation` when ``seed`` is given, in order otherwise."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if len(X) != len(y):
        raise ValueError(f"X and y differ in length: {len(X)} vs {len(y)}")
    order = epoch_permutation(len(X), seed, epoch) if seed is not None else np.arange(len(X))
    stop = num_batches(len(X), batch_size, drop_last=drop_last) * batch_size
    for start in range(0, stop, batch_size):
        index = order[start:start + batch_size]
        yield X[index], y[index]
