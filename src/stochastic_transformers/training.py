r"""Data and training loop for the attention-only ViT of Figure 2 (plain PyTorch).

Data, with nothing fetched unless asked
---------------------------------------
``"digits"``
    scikit-learn's 8 x 8 hand-written digits (1,797 grey images, 10 classes),
    shipped inside scikit-learn.  A fixed stratified split (``random_state=0``)
    keeps 360 images for validation and trains on the other 1,437.  Used by the
    smoke and quick scales.
``"digits-small"``
    a harder task made from the same images: the same 360 validation images,
    and only the first 20 training images of each class (200 in all, taken in
    the order of the fixed split), so that the network must generalise from
    few examples.
``"cifar10"``
    CIFAR-10 (50,000 training and 10,000 test images, 32 x 32 RGB) read from
    the standard *Python* version of the archive: a folder
    ``cifar-10-batches-py/`` holding ``data_batch_1`` ... ``data_batch_5`` and
    ``test_batch``.  ``data_dir`` may be that folder or its parent.  It is
    downloaded only when ``download=True``.  The test batch is the validation
    set, as in the paper.  With ``augment`` (on by default for CIFAR-10) the
    training images get a random crop (4-pixel padding), a horizontal flip and
    AutoAugment's CIFAR-10 policy from ``torchvision``; without ``torchvision``
    only the crop and the flip are applied (plain torch) and a warning says so.

Images are scaled to [0, 1] and standardised per channel with the mean and
standard deviation of the training images.

Optimisation (the hyper-parameters of :class:`TrainConfig`)
----------------------------------------------------------
Cross-entropy loss; AdamW with learning rate :math:`10^{-3}`,
:math:`(\beta_1, \beta_2) = (0.9, 0.999)`, weight decay :math:`5 \cdot 10^{-5}`
on the matrices (not on biases, positional embeddings or the class token);
batch 128; the learning rate rises linearly over ``warmup_epochs`` (8 in the
paper) and then follows a cosine down to :math:`10^{-5}`, updated every step.
The paper states the depth, width, epochs, batch size, warm-up and
augmentation; the learning rate, its floor and the weight decay are our
choices.

Reproducibility and resumption
------------------------------
Everything random is derived from ``seed``: the initialisation (a dedicated
generator), and for every epoch ``e`` the data order, the augmentations and
the data-loader workers (seeded from ``(seed, e)``).  Nothing random is carried
from one epoch to the next, so the end of every epoch is a complete state.
With ``checkpoint=path``, :func:`train` writes the model, the optimiser and the
history to ``path`` atomically after every epoch and, when ``path`` exists,
continues from it.  On the CPU a run that is killed and restarted ends
bit-for-bit where an uninterrupted run ends.  On a GPU, mixed precision
(bfloat16 autocast) and ``torch.compile`` are switched on (``amp``/``compile``
``None`` = automatic), and cuDNN/cuBLAS kernels need not be deterministic, so
there a resumed run is statistically, not bitwise, the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import pickle
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ._validation import check_choice, check_int, check_real
from .io import atomic_path
from .vit import AttentionOnlyViT, ViTConfig, default_patch_size

__all__ = ["DATASETS", "CIFAR10_FOLDER", "Data", "TrainConfig", "TrainResult", "load_data",
           "load_digits", "load_cifar10", "find_cifar10", "cifar10_help",
           "learning_rate", "train", "evaluate", "training_flops"]

DATASETS = ("digits", "digits-small", "cifar10")
#: Training images per class of the "digits-small" task.
SMALL_DIGITS_PER_CLASS = 20
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
_CIFAR10_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)

#: ``(channels, image size)`` of the images of each data set; each has ``NUM_CLASSES`` classes.
IMAGE_SHAPES = {"digits": (1, 8), "digits-small": (1, 8), "cifar10": (3, 32)}
NUM_CLASSES = 10
#: Default patch size per data set (:func:`~stochastic_transformers.vit.default_patch_size`):
#: 4 x 4 tokens of 2 x 2 pixels for the digits, 8 x 8 tokens of 4 x 4 pixels for CIFAR-10.
DEFAULT_PATCH = {name: default_patch_size(size) for name, (_, size) in IMAGE_SHAPES.items()}

_CHECKPOINT_VERSION = 1


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
@dataclass
class Data:
    """Training and validation images (``(n, C, H, W)`` tensors) and integer labels.

    ``train_x``/``val_x`` are float32 and standardised for the digits; for
    CIFAR-10 they stay uint8 so that augmentations see real pixels, and
    :meth:`prepare` standardises a batch.
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    num_classes: int
    mean: torch.Tensor = field(repr=False)
    std: torch.Tensor = field(repr=False)

    @property
    def image_size(self) -> int:
        return int(self.train_x.shape[-1])

    @property
    def channels(self) -> int:
        return int(self.train_x.shape[1])

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """Scale a batch to [0, 1] if it is uint8, then standardise it per channel."""
        if x.dtype == torch.uint8:
            x = x.float() / 255.0
        return (x - self.mean.to(x.device)) / self.std.to(x.device)


def _channel_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.float() / 255.0 if x.dtype == torch.uint8 else x
    mean = x.mean(dim=(0, 2, 3)).view(1, -1, 1, 1)
    std = x.std(dim=(0, 2, 3)).view(1, -1, 1, 1)
    return mean, std


def load_digits(train_per_class: int | None = None) -> Data:
    """scikit-learn's 8 x 8 digits with a fixed stratified train/validation split (360
    validation images).

    With ``train_per_class``, only the first that many training images of each class
    are kept (the ``"digits-small"`` task); the validation images are the same.
    """
    from sklearn.datasets import load_digits as _sk_digits
    from sklearn.model_selection import train_test_split

    bunch = _sk_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None]  # (1797, 1, 8, 8) in [0, 1]
    labels = bunch.target.astype(np.int64)
    tr_x, va_x, tr_y, va_y = train_test_split(images, labels, test_size=360,
                                              random_state=0, stratify=labels)
    name = "digits"
    if train_per_class is not None:
        check_int("train_per_class", train_per_class, 1, 100)
        keep = np.sort(np.concatenate([np.flatnonzero(tr_y == c)[:train_per_class]
                                       for c in range(10)]))
        tr_x, tr_y, name = tr_x[keep], tr_y[keep], "digits-small"
    train_x = torch.from_numpy(tr_x)
    mean, std = _channel_stats(train_x)
    data = Data(name, train_x, torch.from_numpy(tr_y), torch.from_numpy(va_x),
                torch.from_numpy(va_y), 10, mean, std)
    data.train_x = data.prepare(data.train_x)
    data.val_x = data.prepare(data.val_x)
    data.mean, data.std = torch.zeros_like(mean), torch.ones_like(std)  # already applied
    return data


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickle the CIFAR-10 batches, refusing anything but numpy arrays and builtins."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR-10 batch")


def cifar10_help(data_dir) -> str:
    """What to put where (or which argument to pass) for CIFAR-10 to be found in ``data_dir``:
    the sentence that every "CIFAR-10 not found" error ends with."""
    return (f"Put the Python version of CIFAR-10 ({CIFAR10_URL}, unpacked: a folder "
            f"'{CIFAR10_FOLDER}/' with data_batch_1 ... data_batch_5 and test_batch) in "
            f"{str(Path(data_dir).resolve())!r}, pass data_dir= the folder that holds it, or "
            f"pass download=True to fetch it (about 163 MB).")


def find_cifar10(data_dir) -> Path | None:
    """The folder holding the six CIFAR-10 batch files: ``data_dir`` itself or its
    ``cifar-10-batches-py/`` subfolder; None if neither has them all (nothing is read or
    downloaded: only the files' presence is checked)."""
    data_dir = Path(data_dir)
    for folder in (data_dir, data_dir / CIFAR10_FOLDER):
        if all((folder / name).is_file() for name in _CIFAR10_FILES):
            return folder
    return None


def download_cifar10(data_dir) -> Path:
    """Download the CIFAR-10 Python archive into ``data_dir``, check its MD5, unpack it."""
    import tarfile
    import urllib.request

    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    archive = data_dir / "cifar-10-python.tar.gz"
    if not archive.is_file():
        with atomic_path(archive) as tmp:
            urllib.request.urlretrieve(CIFAR10_URL, tmp)  # noqa: S310 - fixed https URL
    digest = hashlib.md5(archive.read_bytes()).hexdigest()  # noqa: S324 - integrity, not security
    if digest != CIFAR10_MD5:
        raise ValueError(f"{archive} has MD5 {digest}, expected {CIFAR10_MD5}; delete it and "
                         "download again")
    with tarfile.open(archive, "r:gz") as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12: refuses unsafe members
            tar.extractall(data_dir, filter="data")
        else:  # pragma: no cover - older Pythons: extract only the expected plain files
            members = [m for m in tar.getmembers() if m.isfile() and not m.name.startswith("/")
                       and ".." not in Path(m.name).parts]
            tar.extractall(data_dir, members=members)  # noqa: S202
    return data_dir / CIFAR10_FOLDER


def load_cifar10(data_dir, *, download: bool = False) -> Data:
    """CIFAR-10 from the standard Python archive in ``data_dir`` (uint8 images).

    Raises ``FileNotFoundError`` if the folder is missing and ``ValueError`` if a
    batch file is unreadable, both saying what to put where.
    """
    if data_dir is None:
        raise ValueError("data_dir must be a folder for dataset='cifar10'. "
                         + cifar10_help("data"))
    folder = find_cifar10(data_dir)
    if folder is None and download:
        download_cifar10(data_dir)
        folder = find_cifar10(data_dir)
    if folder is None:
        raise FileNotFoundError(f"CIFAR-10 not found in {str(data_dir)!r}. "
                                + cifar10_help(data_dir))

    def read(name):
        path = folder / name
        try:
            with open(path, "rb") as fh:
                batch = _NumpyOnlyUnpickler(fh, encoding="bytes").load()
            x = np.asarray(batch[b"data"], dtype=np.uint8)
            y = np.asarray(batch[b"labels"], dtype=np.int64)
            if x.ndim != 2 or x.shape[1] != 3 * 32 * 32 or y.shape != (x.shape[0],) \
                    or y.min() < 0 or y.max() > 9:
                raise ValueError("unexpected array shapes or labels")
        except Exception as err:  # noqa: BLE001 - any failure means a corrupt file
            raise ValueError(f"CIFAR-10 file {str(path)!r} is corrupt or not the Python version "
                             f"({err}). " + cifar10_help(folder.parent)) from err
        return torch.from_numpy(x.reshape(-1, 3, 32, 32).copy()), torch.from_numpy(y)

    parts = [read(name) for name in _CIFAR10_FILES[:-1]]
    train_x = torch.cat([p[0] for p in parts])
    train_y = torch.cat([p[1] for p in parts])
    val_x, val_y = read(_CIFAR10_FILES[-1])
    mean, std = _channel_stats(train_x)
    return Data("cifar10", train_x, train_y, val_x, val_y, 10, mean, std)


def load_data(dataset: str, data_dir=None, *, download: bool = False) -> Data:
    """Load ``"digits"``, ``"digits-small"`` or ``"cifar10"`` (see the module docstring)."""
    check_choice("dataset", dataset, DATASETS)
    if dataset == "digits":
        return load_digits()
    if dataset == "digits-small":
        return load_digits(train_per_class=SMALL_DIGITS_PER_CLASS)
    return load_cifar10(data_dir, download=download)


class _Augment:
    """Random crop (4-pixel padding), horizontal flip and, with torchvision, AutoAugment.

    Acts on one uint8 image ``(C, H, W)`` and draws from torch's global generator,
    which :func:`train` (or the data-loader worker) seeds per epoch.
    """

    def __init__(self):
        try:
            from torchvision import transforms as T
        except ImportError:
            warnings.warn("torchvision is not installed: CIFAR-10 augmentation falls back to "
                          "random crop and flip, without AutoAugment", stacklevel=3)
            self.autoaugment = None
        else:
            self.autoaugment = T.AutoAugment(T.AutoAugmentPolicy.CIFAR10)

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        pad = 4
        h, w = img.shape[-2:]
        padded = F.pad(img, (pad, pad, pad, pad))
        top, left = (int(v) for v in torch.randint(0, 2 * pad + 1, (2,)))
        img = padded[:, top:top + h, left:left + w]
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        if self.autoaugment is not None:
            img = self.autoaugment(img)
        return img


class _AugmentedImages(torch.utils.data.Dataset):
    def __init__(self, x, y, transform):
        self.x, self.y, self.transform = x, y, transform

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.transform(self.x[i]), self.y[i]


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------
_EXECUTION_FIELDS = ("data_dir", "download", "device", "amp", "compile", "num_workers")
#: The fields of :class:`ViTConfig` that the data set fixes: :meth:`TrainConfig.validate`
#: writes the data set's values into ``vit``.
DATA_FIELDS = ("image_size", "channels", "num_classes")
#: The other fields of :class:`ViTConfig`: the network chosen for a run, part of its key.
VIT_FIELDS = tuple(f.name for f in dataclasses.fields(ViTConfig) if f.name not in DATA_FIELDS)
#: The network's fields that came after the first cached runs, with their defaults.
_LATER_VIT_FIELDS = {"horizon": 1.0, "qk_init": "random", "beta": 1.0}


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines one training run (validated by :meth:`validate`).

    ``vit`` is the network (:class:`~stochastic_transformers.vit.ViTConfig`); its
    ``image_size``, ``channels`` and ``num_classes`` are those of ``dataset``, written in
    by :meth:`validate` (a value that is neither ViTConfig's default nor the data set's is
    refused), and its ``patch_size`` None is :data:`DEFAULT_PATCH` of the data set.
    ``device``, ``amp``, ``compile``, ``num_workers``, ``data_dir`` and ``download`` say
    *how* to run; the other fields say *what* is trained and form the run's :meth:`key`.

    Change a field with :func:`dataclasses.replace`, the network with
    ``replace(cfg, vit=replace(cfg.vit, depth=...))``, or build a config from flat names
    with :meth:`from_flat`.
    """

    vit: ViTConfig = ViTConfig()
    seed: int = 0
    dataset: str = "cifar10"
    epochs: int = 300
    warmup_epochs: int = 8
    batch_size: int = 128
    lr: float = 1e-3
    min_lr: float = 1e-5
    weight_decay: float = 5e-5
    betas: tuple[float, float] = (0.9, 0.999)
    augment: bool | None = None          # None: on for cifar10, off for digits
    data_dir: str | None = None
    download: bool = False
    device: str | None = None            # None: "cuda" if available, else "cpu"
    amp: bool | None = None              # None: bfloat16 autocast on CUDA only
    compile: bool | None = None          # None: torch.compile on CUDA only
    num_workers: int | None = None       # None: 8 on CUDA with augmentation, else 0

    @classmethod
    def from_flat(cls, **fields) -> TrainConfig:
        """A config from flat names: those of :data:`VIT_FIELDS` (``depth``, ``width``,
        ``value_init``, ``sigma``, ``patch_size``, ``pool``) go into ``vit``, the others are
        fields of the config; unset ones keep their defaults.  The inverse of :meth:`flat`."""
        own = [f.name for f in dataclasses.fields(cls) if f.name != "vit"]
        unknown = sorted(set(fields) - set(VIT_FIELDS) - set(own))
        if unknown:
            raise ValueError(f"fields must be among {', '.join(VIT_FIELDS + tuple(own))}; "
                             f"got {', '.join(unknown)}")
        vit = ViTConfig(**{k: v for k, v in fields.items() if k in VIT_FIELDS})
        return cls(vit=vit, **{k: v for k, v in fields.items() if k in own})

    def flat(self) -> dict:
        """Every field under one flat name: the network's :data:`VIT_FIELDS`, then the
        config's own fields (the data fields of ``vit`` follow from ``dataset``)."""
        out = {name: getattr(self.vit, name) for name in VIT_FIELDS}
        out.update((f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                   if f.name != "vit")
        return out

    def validate(self) -> TrainConfig:
        """Check every field; return a copy with the automatic choices resolved.

        The network's fields are checked by :meth:`ViTConfig.validate`, after the data
        set's image size, channels and classes are written into it.
        """
        check_choice("dataset", self.dataset, DATASETS)
        if not isinstance(self.vit, ViTConfig):
            raise ValueError(f"vit must be a ViTConfig, got {self.vit!r}")
        channels, size = IMAGE_SHAPES[self.dataset]
        data = {"image_size": size, "channels": channels, "num_classes": NUM_CLASSES}
        for name, value in data.items():
            given = getattr(self.vit, name)
            if given not in (value, getattr(ViTConfig, name)):
                raise ValueError(f"vit.{name} must be {value}, that of dataset="
                                 f"{self.dataset!r} (or left at its default), got {given!r}")
        vit = dataclasses.replace(self.vit, **data).validate()  # patch None: DEFAULT_PATCH
        check_int("seed", self.seed, 0, 2**31 - 1)
        check_int("epochs", self.epochs, 1, 100_000)
        check_int("warmup_epochs", self.warmup_epochs, 0, self.epochs)
        check_int("batch_size", self.batch_size, 1, 1_000_000)
        # AdamW steps of more than the weights' own size, or a decay of more than all of them
        # per unit of lr, only diverge: a NaN loss, not a result
        check_real("lr", self.lr, 0.0, 1.0, strict_min=True)
        check_real("min_lr", self.min_lr, 0.0, self.lr)
        check_real("weight_decay", self.weight_decay, 0.0, 1.0)
        if len(self.betas) != 2:
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        for b in self.betas:
            check_real("betas", b, 0.0, 1.0)
        augment = self.dataset == "cifar10" if self.augment is None else self.augment
        if augment and self.dataset != "cifar10":
            raise ValueError("augment must be False or None for dataset='digits' "
                             "(augmentation is only defined for cifar10)")
        if self.dataset == "cifar10" and self.data_dir is None:
            raise ValueError("data_dir must be given for dataset='cifar10'. "
                             + cifar10_help("data"))
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            dev = torch.device(device)
        except RuntimeError as err:
            raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', "
                             f"got {self.device!r}") from err
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device must be 'cpu' on this machine (no CUDA), got {device!r}")
        on_cuda = dev.type == "cuda"
        amp = on_cuda if self.amp is None else bool(self.amp)
        compile_ = on_cuda if self.compile is None else bool(self.compile)
        if amp and not on_cuda:
            raise ValueError("amp must be False on the CPU (mixed precision is CUDA only)")
        workers = (min(8, os.cpu_count() or 1) if on_cuda and augment else 0) \
            if self.num_workers is None else check_int("num_workers", self.num_workers, 0, 256)
        return dataclasses.replace(self, vit=vit, augment=augment, device=device,
                                   amp=amp, compile=compile_, num_workers=workers,
                                   betas=tuple(float(b) for b in self.betas))

    def key(self) -> dict:
        """The fields that define the trained model (not how it is run), as one flat dict.

        The dict is built by hand from :meth:`flat`, not by ``dataclasses.asdict``: its
        names and values are exactly those of the flat configuration that preceded
        :class:`ViTConfig` (the network's ``value_init``, ``depth``, ``width``, ``sigma``,
        ``patch_size``, ``pool`` beside the training fields; ``vit``'s data fields follow
        from ``dataset`` and are left out), so the key, its :meth:`key_hash` and with them
        every cached checkpoint of an existing configuration stay valid.
        """
        d = self.flat()
        for name in _EXECUTION_FIELDS:
            d.pop(name)
        # Fields of the network added later enter the key only away from their defaults,
        # so that the runs before them keep their keys (and their checkpoints).
        for name, default in _LATER_VIT_FIELDS.items():
            if d[name] == default:
                d.pop(name)
        d["betas"] = list(d["betas"])
        return d

    def key_hash(self) -> str:
        """A short hash of :meth:`key` (of the validated config), for file names."""
        text = json.dumps(self.validate().key(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class TrainResult:
    """What :func:`train` returns: the per-epoch history and the trained model."""

    config: TrainConfig
    val_accuracy: np.ndarray       # (epochs_done,) fraction of correct validation images
    train_loss: np.ndarray         # (epochs_done,) mean training cross-entropy of the epoch
    model: nn.Module               # on the CPU
    epochs_done: int
    resumed_from: int              # epochs already done when this call started
    wall_time: float               # seconds spent training in this call

    @property
    def finished(self) -> bool:
        return self.epochs_done == self.config.epochs


# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------
def learning_rate(step: int, total_steps: int, warmup_steps: int, lr: float,
                  min_lr: float) -> float:
    """Linear warm-up from ``lr / warmup_steps`` to ``lr``, then cosine decay to ``min_lr``."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def _epoch_seed(seed: int, epoch: int) -> int:
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1, np.uint32)[0])


def _optimizer(model: AttentionOnlyViT, cfg: TrainConfig) -> torch.optim.AdamW:
    decay = [model.patch_embed.weight, model.query, model.key, model.values, model.head.weight]
    ids = {id(p) for p in decay}
    no_decay = [p for p in model.parameters() if id(p) not in ids]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=cfg.lr, betas=cfg.betas)


def build_model(cfg: TrainConfig) -> AttentionOnlyViT:
    """The network ``cfg.vit`` of a validated config, initialised from ``cfg.seed``."""
    return AttentionOnlyViT(cfg.vit, generator=torch.Generator().manual_seed(cfg.seed))


@torch.no_grad()
def evaluate(model: nn.Module, data: Data, device, *, amp: bool = False) -> float:
    """Fraction of validation images classified correctly (in batches of 1,000)."""
    batch_size = 1000
    model.eval()
    correct = 0
    for start in range(0, len(data.val_y), batch_size):
        x = data.prepare(data.val_x[start:start + batch_size].to(device))
        y = data.val_y[start:start + batch_size].to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            logits = model(x)
        correct += int((logits.argmax(dim=-1) == y).sum())
    model.train()
    return correct / len(data.val_y)


def _batches(data: Data, cfg: TrainConfig, epoch: int, augment):
    """The epoch's training batches, in an order (and with augmentations) fixed by (seed, epoch)."""
    seed = _epoch_seed(cfg.seed, epoch)
    gen = torch.Generator().manual_seed(seed)
    if augment is None:
        order = torch.randperm(len(data.train_y), generator=gen)
        for idx in order.split(cfg.batch_size):
            yield data.train_x[idx], data.train_y[idx]
        return
    torch.manual_seed(seed)  # the augmentations of the main process (num_workers=0)
    loader = torch.utils.data.DataLoader(
        _AugmentedImages(data.train_x, data.train_y, augment), batch_size=cfg.batch_size,
        shuffle=True, generator=gen, num_workers=cfg.num_workers,
        pin_memory=cfg.device.startswith("cuda"))
    yield from loader


def _save_checkpoint(path: Path, cfg: TrainConfig, model, optimizer, history) -> None:
    state = {"version": _CHECKPOINT_VERSION, "key": cfg.key(), "epoch": len(history["val"]),
             "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "val_accuracy": list(history["val"]), "train_loss": list(history["loss"])}
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def _load_checkpoint(path: Path, cfg: TrainConfig) -> dict:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001
        raise ValueError(f"checkpoint {str(path)!r} is unreadable ({err}); delete it to "
                         "start this run again") from err
    if state.get("version") != _CHECKPOINT_VERSION or state.get("key") != cfg.key():
        raise ValueError(f"checkpoint {str(path)!r} belongs to another configuration; delete it "
                         f"or use another checkpoint path (its key: {state.get('key')!r})")
    return state


def train(config: TrainConfig, *, checkpoint=None, progress: bool = True, data: Data | None = None,
          on_epoch_end: Callable[[int, float], None] | None = None) -> TrainResult:
    """Train one attention-only ViT; return its validation accuracy after every epoch.

    Parameters
    ----------
    config : TrainConfig
        What to train and how (validated before anything is loaded).
    checkpoint : path, optional
        File written atomically after every epoch; if it exists the run resumes
        from it, and a finished run returns at once.
    progress : bool
        Show tqdm bars over epochs and over the batches of an epoch.
    data : Data, optional
        Pre-loaded data set (must match ``config.dataset``); loaded otherwise.
    on_epoch_end : callable, optional
        Called as ``on_epoch_end(epoch, val_accuracy)`` (1-based epoch) after the
        checkpoint of that epoch is written.
    """
    cfg = config.validate()
    with _deterministic(cfg.device):
        return _train(cfg, checkpoint=checkpoint, progress=progress, data=data,
                      on_epoch_end=on_epoch_end)


@contextlib.contextmanager
def _deterministic(device: str):
    """torch's deterministic algorithms on the CPU for the duration of one run.

    With the same thread count, a CPU run is then bit-for-bit repeatable on one
    machine (tested); other machines and thread counts may round differently
    (another BLAS kernel or reduction order), which changes the last bits and,
    through training, the final accuracy by a few tenths of a point.  On CUDA
    the fast non-deterministic kernels are kept (see the module docstring).
    The previous setting is restored afterwards.
    """
    if not str(device).startswith("cpu"):
        yield
        return
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def _train_epoch(forward, optimizer, data: Data, cfg: TrainConfig, epoch: int, augment,
                 steps: tuple[int, int, int], progress: bool) -> float:
    """One epoch of optimisation; returns its mean training cross-entropy.  ``steps`` is
    ``(steps per epoch, total steps, warm-up steps)`` of the learning-rate schedule."""
    from tqdm import tqdm

    steps_per_epoch, total_steps, warmup_steps = steps
    device = torch.device(cfg.device)
    step = epoch * steps_per_epoch
    loss_sum = torch.zeros((), device=device)
    seen = 0
    batches = tqdm(_batches(data, cfg, epoch, augment), total=steps_per_epoch, leave=False,
                   desc=f"epoch {epoch + 1}", unit="batch", disable=not progress,
                   dynamic_ncols=True)
    for x, y in batches:
        x = data.prepare(x.to(device, non_blocking=True))
        y = y.to(device, non_blocking=True)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, total_steps, warmup_steps, cfg.lr, cfg.min_lr)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cfg.amp):
            loss = F.cross_entropy(forward(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach() * len(y)
        seen += len(y)
        step += 1
    return float(loss_sum) / seen


def _train(cfg: TrainConfig, *, checkpoint, progress, data, on_epoch_end) -> TrainResult:
    if data is not None and data.name != cfg.dataset:
        raise ValueError(f"data must be the {cfg.dataset!r} data set, got {data.name!r}")
    checkpoint = Path(checkpoint) if checkpoint is not None else None
    state = _load_checkpoint(checkpoint, cfg) if checkpoint is not None and checkpoint.exists() \
        else None
    history = {"val": list(state["val_accuracy"]) if state else [],
               "loss": list(state["train_loss"]) if state else []}
    start_epoch = len(history["val"])

    model = build_model(cfg)
    if state is not None:
        model.load_state_dict(state["model"])
    if start_epoch >= cfg.epochs:  # nothing left to do: no data needed
        return TrainResult(cfg, np.array(history["val"]), np.array(history["loss"]), model,
                           start_epoch, start_epoch, 0.0)

    if data is None:
        data = load_data(cfg.dataset, cfg.data_dir, download=cfg.download)
    device = torch.device(cfg.device)
    model.to(device)
    optimizer = _optimizer(model, cfg)
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
    forward = torch.compile(model) if cfg.compile else model
    augment = _Augment() if cfg.augment else None

    steps_per_epoch = math.ceil(len(data.train_y) / cfg.batch_size)
    total_steps = cfg.epochs * steps_per_epoch
    warmup_steps = cfg.warmup_epochs * steps_per_epoch

    from tqdm import tqdm

    label = f"{cfg.vit.value_init} V, seed {cfg.seed}"
    epochs_bar = tqdm(range(start_epoch, cfg.epochs), desc=label, unit="epoch", disable=not progress,
                      initial=start_epoch, total=cfg.epochs, leave=True, dynamic_ncols=True)
    t0 = time.perf_counter()
    model.train()
    for epoch in epochs_bar:
        history["loss"].append(_train_epoch(forward, optimizer, data, cfg, epoch, augment,
                                            (steps_per_epoch, total_steps, warmup_steps),
                                            progress))
        history["val"].append(evaluate(forward, data, device, amp=cfg.amp))
        if not math.isfinite(history["loss"][-1]):
            warnings.warn(f"{label}: the training loss is not finite at epoch {epoch + 1}",
                          stacklevel=2)
        if checkpoint is not None:
            _save_checkpoint(checkpoint, cfg, model, optimizer, history)
        epochs_bar.set_postfix(loss=f"{history['loss'][-1]:.3f}", val=f"{history['val'][-1]:.3f}")
        if on_epoch_end is not None:
            on_epoch_end(epoch + 1, history["val"][-1])
    epochs_bar.close()
    model.to("cpu")
    return TrainResult(cfg, np.array(history["val"]), np.array(history["loss"]), model,
                       len(history["val"]), start_epoch, time.perf_counter() - t0)


def training_flops(depth: int, width: int, patch_size: int, epochs: int) -> dict:
    """Floating-point operations of one training run, counted from the network's shape.

    Per layer and image, with ``n = (32 / patch_size)^2 + 1`` tokens of width ``d``:
    the query-key product and the value product cost ``2 n d^2`` multiply-adds each, the
    scores and the weighted average ``n^2 d`` each; a multiply-add is 2 FLOP, and a training
    step (forward and backward) about 3 forward passes, over CIFAR-10's 32 x 32 images,
    50,000 an epoch.  An estimate of the work, not a measurement of time.
    """
    tokens, d = (32 // int(patch_size)) ** 2 + 1, int(width)
    per_layer = 2 * (2 * tokens * d * d + 2 * tokens * tokens * d)
    forward = int(depth) * per_layer
    return {"tokens": tokens, "forward_flops_per_image": float(forward),
            "train_flops_per_run": float(3 * forward * 50_000 * int(epochs))}
