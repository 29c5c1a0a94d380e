"""CIFAR-10 on disk: convert an image-folder copy into the layout ``torchvision.datasets.CIFAR10``
reads, download it where a network exists, and load it back.

The standard layout (Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", 2009, the
"python version" of the release) is ``<data_dir>/cifar-10-batches-py/`` with pickles
``data_batch_1 .. data_batch_5`` (training set), ``test_batch`` and ``batches.meta``. Each batch is a
dict ``{"data": uint8 (N, 3072) channel-major R, G, B planes of 32x32, "labels": list[int],
"filenames": list[str], "batch_label": str}``; ``batches.meta`` holds ``label_names``.

**Checksums.** ``torchvision.datasets.CIFAR10`` refuses any file whose md5 differs from the original
release. A converted copy (e.g. from JPEGs) necessarily differs, so :func:`prepare_from_image_folder`
also writes ``gcsim_manifest.json`` (md5 of every file it wrote, class counts, source) and
:class:`GcsimCIFAR10` verifies the files against that manifest instead; without a manifest (a genuine
torchvision download) it verifies the original md5 sums, exactly as torchvision does.

Everything is written into a temporary sibling directory and renamed into place, so a failed or
interrupted conversion never leaves a half-written ``cifar-10-batches-py``.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import socket
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from gcsim.errors import DataError
from gcsim.rundir import install_dir, staging_dir

#: The CIFAR-10 class names in label order 0..9 (also their alphabetical order).
CIFAR10_CLASSES: tuple[str, ...] = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)
#: Images per class in the full release (train, test).
FULL_TRAIN_PER_CLASS = 5000
FULL_TEST_PER_CLASS = 1000

BATCHES_DIR = "cifar-10-batches-py"
MANIFEST_NAME = "gcsim_manifest.json"
MANIFEST_FORMAT = "gcsim-cifar10-v1"
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
META_FILE = "batches.meta"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
SPLITS = ("train", "test")
#: Default data directory (relative to the working directory; gitignored).
DEFAULT_DATA_DIR = Path("data/cifar10")
PREPARE_HINT = "run `gcsim data prepare --source /path/to/cifar10-jpeg.zip`"


@dataclass
class PrepareReport:
    """What :func:`prepare_from_image_folder` / :func:`download_cifar10` produced.

    Attributes:
        data_dir: the ``--data-dir`` (``cifar-10-batches-py`` lies inside).
        train_per_class / test_per_class: class name -> images written.
        source: the zip, directory or URL converted.
        already_prepared: True when nothing was done because a verified copy was already there.
    """

    data_dir: Path
    train_per_class: dict[str, int] = field(default_factory=dict)
    test_per_class: dict[str, int] = field(default_factory=dict)
    source: str = ""
    already_prepared: bool = False

    @property
    def n_train(self) -> int:
        return sum(self.train_per_class.values())

    @property
    def n_test(self) -> int:
        return sum(self.test_per_class.values())

    @property
    def is_full(self) -> bool:
        """True when the counts are those of the full CIFAR-10 release (50,000 / 10,000)."""
        return (all(c == FULL_TRAIN_PER_CLASS for c in self.train_per_class.values())
                and all(c == FULL_TEST_PER_CLASS for c in self.test_per_class.values())
                and len(self.train_per_class) == len(CIFAR10_CLASSES))


# --------------------------------------------------------------------------- reading image folders
@dataclass(frozen=True)
class _ImageEntry:
    split: str
    label: str
    name: str  # path inside the source, for messages and the 'filenames' field
    read: Callable[[], bytes]


def _locate(parts: tuple[str, ...]) -> tuple[str, str, str] | None:
    """``(prefix, split, class)`` when ``parts`` ends with ``<split>/<class>/<file>``, else None."""
    if len(parts) < 3 or parts[-3] not in SPLITS:
        return None
    return "/".join(parts[:-3]), parts[-3], parts[-2]


def _is_image(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return name.lower().endswith(IMAGE_SUFFIXES) and not base.startswith(".")


def _iter_source(source: Path, zf: zipfile.ZipFile | None) -> Iterator[tuple[tuple[str, ...], Callable[[], bytes]]]:
    if zf is not None:
        for info in zf.infolist():
            if info.is_dir() or not _is_image(info.filename) or info.filename.startswith("__MACOSX/"):
                continue
            yield tuple(p for p in info.filename.split("/") if p), (lambda i=info: zf.read(i))
    else:
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source).as_posix()
            if path.is_file() and _is_image(rel):
                yield tuple(rel.split("/")), (lambda p=path: p.read_bytes())


def _scan(source: Path, zf: zipfile.ZipFile | None) -> list[_ImageEntry]:
    """List the images of an image folder and check the layout (one root, known splits)."""
    entries: list[_ImageEntry] = []
    prefixes: set[str] = set()
    misplaced: list[str] = []
    for parts, read in _iter_source(source, zf):
        loc = _locate(parts)
        if loc is None:
            misplaced.append("/".join(parts))
            continue
        prefix, split, label = loc
        prefixes.add(prefix)
        entries.append(_ImageEntry(split, label, "/".join(parts), read))
    layout = "train/<class>/*.jpg|png and test/<class>/*.jpg|png (optionally under one top folder, e.g. cifar10/)"
    if misplaced:
        raise DataError(f"source {source}: expected every image under {layout}; "
                        f"{len(misplaced)} are not, e.g. {misplaced[0]!r}")
    if not entries:
        raise DataError(f"source {source}: expected images laid out as {layout}, got no images")
    if len(prefixes) > 1:
        raise DataError(f"source {source}: expected one top folder holding train/ and test/, "
                        f"got several: {sorted(prefixes)}")
    return entries


def _check_classes(source: Path, entries: list[_ImageEntry]) -> None:
    expected = set(CIFAR10_CLASSES)
    for split in SPLITS:
        found = {e.label for e in entries if e.split == split}
        if found != expected:
            missing, extra = sorted(expected - found), sorted(found - expected)
            raise DataError(
                f"source {source}: {split}/ classes: expected the 10 CIFAR-10 classes "
                f"({', '.join(CIFAR10_CLASSES)}), got {sorted(found)} (missing: {missing or 'none'}; "
                f"unexpected: {extra or 'none'})")


def _check_counts(source: Path, counts: dict[str, dict[str, int]],
                  expected: dict[str, int | None]) -> None:
    for split in SPLITS:
        per_class = counts[split]
        want = expected[split]
        if want is not None:
            bad = {c: n for c, n in per_class.items() if n != want}
            if bad:
                raise DataError(f"source {source}: {split}/ images per class: expected {want}, got {bad}")
        elif len(set(per_class.values())) > 1:
            raise DataError(f"source {source}: {split}/ images per class: expected the same count for "
                            f"every class (CIFAR-10 is balanced), got {per_class}")


def _decode_image(entry: _ImageEntry) -> np.ndarray:
    """The image as uint8 (32, 32, 3) HWC. Its size is read from the header and checked before any
    pixel is decoded (a file declaring 20000x20000 pixels is refused without decoding it).

    Raises:
        DataError: unreadable file or a size other than 32x32."""
    import warnings

    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the size is checked just below
            with Image.open(io.BytesIO(entry.read())) as im:
                if im.size != (32, 32):
                    raise DataError(f"image {entry.name}: size: expected 32x32, got {im.size[0]}x{im.size[1]}")
                rgb = im.convert("RGB")
    except Image.DecompressionBombError as e:
        raise DataError(f"image {entry.name}: size: expected 32x32, got a far larger image ({e})") from None
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise DataError(f"image {entry.name}: expected a readable JPEG/PNG, got an unreadable file ({e})") from None
    return np.asarray(rgb, dtype=np.uint8)  # (32, 32, 3) HWC


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_pickle(path: Path, obj: dict) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)


def _batch(images_hwc: np.ndarray, labels: np.ndarray, names: list[str], batch_label: str) -> dict:
    """A CIFAR-10 batch dict: ``data`` uint8 (N, 3072) as R, G, B planes (the release's layout)."""
    data = np.ascontiguousarray(images_hwc.transpose(0, 3, 1, 2).reshape(len(images_hwc), 3072))
    return {"batch_label": batch_label, "labels": [int(v) for v in labels], "data": data,
            "filenames": list(names)}


def prepare_from_image_folder(
    source: Path | str,
    data_dir: Path | str = DEFAULT_DATA_DIR,
    *,
    expect_train_per_class: int | None = None,
    expect_test_per_class: int | None = None,
    force: bool = False,
    shuffle_seed: int = 0,
    progress: bool = False,
) -> PrepareReport:
    """Convert an image-folder copy of CIFAR-10 into ``<data_dir>/cifar-10-batches-py``.

    Args:
        source: a directory or a zip holding ``[top/]train/<class>/*.jpg|png`` and
            ``[top/]test/<class>/*.jpg|png`` (class names = the CIFAR-10 names).
        data_dir: where ``cifar-10-batches-py`` is created.
        expect_train_per_class / expect_test_per_class: required images per class; None accepts any
            count as long as every class has the same (CIFAR-10 is balanced).
        force: redo the conversion even when a verified copy is already there.
        shuffle_seed: images are written in a seeded random order (the original batches are in
            random order too), so every ``data_batch_i`` mixes all classes.
        progress: show a tqdm bar while decoding images.
    Returns:
        :class:`PrepareReport` with the per-class counts written (verified by reading the result back
        through :class:`GcsimCIFAR10`).
    Raises:
        DataError: missing source, bad layout, wrong classes or counts, unreadable or non-32x32 image,
            ``data_dir`` not a directory, or a verified copy already there without the expected counts
            (it is only replaced with ``force``).
    """
    source, data_dir = Path(source), Path(data_dir)
    target = data_dir / BATCHES_DIR
    require_loader()  # before converting 60,000 images, not after
    if data_dir.exists() and not data_dir.is_dir():
        raise DataError(f"--data-dir: expected a directory (new or existing), got {str(data_dir)!r} (not a directory)")
    if not force and (target / MANIFEST_NAME).is_file():
        try:
            report = verify_prepared(data_dir)
        except DataError:
            report = None  # broken copy: convert again
        if report is not None:
            for split, want in (("train", expect_train_per_class), ("test", expect_test_per_class)):
                have = report.train_per_class if split == "train" else report.test_per_class
                bad = {c: k for c, k in have.items() if want is not None and k != want}
                if bad:  # the copy there does not have what was asked for: never replace it silently
                    raise DataError(f"{target}: {split} images per class: expected {want}, got {bad} (already "
                                    f"prepared; use --force to convert {source} again)")
            report.already_prepared = True
            return report
    if not source.exists():
        raise DataError(f"--source: expected an existing zip file or directory, got {str(source)!r}")
    if source.is_file() and not zipfile.is_zipfile(source):
        raise DataError(f"--source: expected a zip file or a directory, got {str(source)!r} (not a zip)")

    zf = zipfile.ZipFile(source) if source.is_file() else None
    try:
        entries = _scan(source, zf)
        _check_classes(source, entries)
        counts = {sp: {c: sum(1 for e in entries if e.split == sp and e.label == c) for c in CIFAR10_CLASSES}
                  for sp in SPLITS}
        _check_counts(source, counts, {"train": expect_train_per_class, "test": expect_test_per_class})

        label_of = {c: i for i, c in enumerate(CIFAR10_CLASSES)}
        from tqdm import tqdm

        arrays: dict[str, tuple[np.ndarray, np.ndarray, list[str]]] = {}
        # closed (its line ended) before an error propagates, so the error is a line of its own
        with tqdm(total=len(entries), desc="decoding images", unit="img", disable=not progress) as bar:
            for split in SPLITS:
                split_entries = sorted((e for e in entries if e.split == split), key=lambda e: e.name)
                images = np.empty((len(split_entries), 32, 32, 3), dtype=np.uint8)
                for i, e in enumerate(split_entries):
                    images[i] = _decode_image(e)
                    bar.update()
                labels = np.array([label_of[e.label] for e in split_entries], dtype=np.int64)
                names = [e.name.rsplit("/", 1)[-1] for e in split_entries]
                order = np.random.default_rng([shuffle_seed, SPLITS.index(split)]).permutation(len(split_entries))
                arrays[split] = (images[order], labels[order], [names[i] for i in order])
    finally:
        if zf is not None:
            zf.close()

    data_dir.mkdir(parents=True, exist_ok=True)
    with staging_dir(data_dir, BATCHES_DIR) as tmp:
        images, labels, names = arrays["train"]
        for b, idx in enumerate(np.array_split(np.arange(len(labels)), len(TRAIN_FILES))):
            _write_pickle(tmp / TRAIN_FILES[b], _batch(images[idx], labels[idx], [names[i] for i in idx],
                                                       f"training batch {b + 1} of {len(TRAIN_FILES)}"))
        images, labels, names = arrays["test"]
        _write_pickle(tmp / TEST_FILE, _batch(images, labels, names, "testing batch 1 of 1"))
        _write_pickle(tmp / META_FILE, {"label_names": list(CIFAR10_CLASSES),
                                        "num_cases_per_batch": int(np.ceil(len(arrays["train"][1]) / 5)),
                                        "num_vis": 3072})
        manifest = {
            "format": MANIFEST_FORMAT, "source": str(source.resolve()),
            "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "classes": list(CIFAR10_CLASSES),
            "train_per_class": counts["train"], "test_per_class": counts["test"],
            "md5": {name: _md5(tmp / name) for name in (*TRAIN_FILES, TEST_FILE, META_FILE)},
        }
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
        install_dir(tmp, target)

    report = verify_prepared(data_dir)
    if report.train_per_class != counts["train"] or report.test_per_class != counts["test"]:
        raise DataError(f"{target}: read-back counts: expected {counts}, got "
                        f"{{'train': {report.train_per_class}, 'test': {report.test_per_class}}}")
    report.source = str(source)
    return report


def network_available(host: str = "www.cs.toronto.edu", port: int = 443, timeout_s: float = 3.0) -> bool:
    """True when a TCP connection to the CIFAR-10 host can be opened within ``timeout_s`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def download_cifar10(data_dir: Path | str = DEFAULT_DATA_DIR) -> PrepareReport:
    """Download the original release with torchvision (md5-checked by torchvision itself).

    Raises:
        DataError: no network, or the download / extraction failed.
    """
    from torchvision.datasets import CIFAR10

    data_dir = Path(data_dir)
    if not network_available():
        raise DataError("download: expected network access to www.cs.toronto.edu, got none; convert a "
                        "local copy instead with `gcsim data prepare --source /path/to/cifar10-jpeg.zip`")
    try:
        CIFAR10(root=str(data_dir), train=True, download=True)
    except Exception as e:  # urllib / tarfile / torchvision raise many kinds
        raise DataError(f"download: torchvision failed ({type(e).__name__}: {e}); "
                        "use `gcsim data prepare --source ZIP_OR_DIR` instead") from None
    (data_dir / BATCHES_DIR / MANIFEST_NAME).unlink(missing_ok=True)  # a stale manifest would mislead
    report = verify_prepared(data_dir)
    report.source = CIFAR10.url
    return report


# --------------------------------------------------------------------------- loading
def _dataset_class():
    from torchvision.datasets import CIFAR10

    class GcsimCIFAR10(CIFAR10):
        """``torchvision.datasets.CIFAR10`` that checks gcsim's manifest md5 sums when the copy was
        converted by :func:`prepare_from_image_folder` (the original sums cannot match a converted
        copy), and the original release's sums otherwise. Never downloads."""

        def __init__(self, root, train: bool = True, transform=None, target_transform=None):
            manifest = read_manifest(root)
            if manifest is not None:
                md5 = manifest["md5"]
                self.train_list = [[name, md5[name]] for name in TRAIN_FILES]
                self.test_list = [[TEST_FILE, md5[TEST_FILE]]]
                self.meta = {**CIFAR10.meta, "md5": md5[META_FILE]}
            super().__init__(str(root), train=train, transform=transform,
                             target_transform=target_transform, download=False)

    return GcsimCIFAR10


def read_manifest(data_dir: Path | str) -> dict | None:
    """gcsim's manifest of a converted copy, or None when absent (e.g. a torchvision download).

    Raises:
        DataError: the manifest exists but is unreadable or of another format.
    """
    p = Path(data_dir) / BATCHES_DIR / MANIFEST_NAME
    if not p.is_file():
        return None
    try:
        manifest = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{p}: unreadable manifest ({e}); {PREPARE_HINT} --force") from None
    if manifest.get("format") != MANIFEST_FORMAT or not isinstance(manifest.get("md5"), dict):
        raise DataError(f"{p}: format: expected {MANIFEST_FORMAT!r}, got {manifest.get('format')!r}")
    return manifest


def require_loader() -> None:
    """Check that torchvision (which reads the converted copy back) is installed, importing nothing.

    Raises:
        ModuleNotFoundError: ``name='torchvision'`` (the CLI prints how to install the ``real`` extra).
    """
    import importlib.util

    for module in ("torchvision", "PIL"):
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def require_prepared(data_dir: Path | str) -> None:
    """Cheap check (no checksums) that ``data_dir`` holds every CIFAR-10 file.

    Raises:
        DataError: a file is missing; the message says how to prepare the data.
    """
    bdir = Path(data_dir) / BATCHES_DIR
    missing = [name for name in (*TRAIN_FILES, TEST_FILE, META_FILE) if not (bdir / name).is_file()]
    if missing:
        raise DataError(f"--data-dir: expected a directory holding CIFAR-10 ({BATCHES_DIR}/), got {str(data_dir)!r} "
                        f"({f'no {BATCHES_DIR} in it' if not bdir.is_dir() else f'missing files {missing}'}); "
                        f"{PREPARE_HINT}")


def load_split(data_dir: Path | str, train: bool) -> tuple[np.ndarray, np.ndarray]:
    """Load one split through :class:`GcsimCIFAR10` (checksums verified).

    Returns:
        ``(images, labels)``: uint8 ``(N, 32, 32, 3)`` HWC and int64 ``(N,)`` in 0..9.
    Raises:
        DataError: the data directory is missing, incomplete or fails its checksums (the message
            says how to prepare it).
    """
    data_dir = Path(data_dir)
    require_prepared(data_dir)
    try:
        ds = _dataset_class()(data_dir, train=train)
    except RuntimeError as e:
        raise DataError(f"--data-dir: expected CIFAR-10 files that pass their md5 check, got {str(data_dir)!r} "
                        f"({e}); {PREPARE_HINT} --force") from None
    return np.ascontiguousarray(ds.data, dtype=np.uint8), np.asarray(ds.targets, dtype=np.int64)


def load_run_data(options) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The images a real run trains and evaluates on: both splits of ``options.data_dir``, cut to
    ``options.max_train_samples`` training and ``options.eval_samples`` test images when set.

    Args:
        options: a :class:`gcsim.real.config.RealConfig` (``data_dir``, ``max_train_samples``,
            ``eval_samples``).
    Returns:
        ``(train_x, train_y, test_x, test_y)`` as :func:`load_split` returns them.
    Raises:
        DataError: as :func:`load_split`.
    """
    train_x, train_y = load_split(options.data_dir, train=True)
    test_x, test_y = load_split(options.data_dir, train=False)
    if options.max_train_samples is not None:
        train_x, train_y = train_x[: options.max_train_samples], train_y[: options.max_train_samples]
    if options.eval_samples is not None:
        test_x, test_y = test_x[: options.eval_samples], test_y[: options.eval_samples]
    return train_x, train_y, test_x, test_y


def verify_prepared(data_dir: Path | str) -> PrepareReport:
    """Load both splits (checksums verified) and count images per class.

    Raises:
        DataError: as :func:`load_split`.
    """
    report = PrepareReport(data_dir=Path(data_dir))
    for split, attr in (("train", "train_per_class"), ("test", "test_per_class")):
        _, labels = load_split(data_dir, train=split == "train")
        hist = np.bincount(labels, minlength=len(CIFAR10_CLASSES))
        setattr(report, attr, {c: int(hist[i]) for i, c in enumerate(CIFAR10_CLASSES)})
    return report


def make_random_image_folder(root: Path, *, train_per_class: int, test_per_class: int, seed: int = 0) -> Path:
    """Write a synthetic CIFAR-10-layout image folder (``root/{train,test}/<class>/<i>.png``, random
    32x32 RGB pixels from ``seed``) for tests and benchmarks that must not need the real data.

    Returns ``root``. Feed it to :func:`prepare_from_image_folder`."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    root = Path(root)
    for split, per_class in (("train", train_per_class), ("test", test_per_class)):
        for name in CIFAR10_CLASSES:
            d = root / split / name
            d.mkdir(parents=True)
            for i in range(per_class):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(d / f"{i}.png")
    return root
