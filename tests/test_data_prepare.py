"""`gcsim data prepare`: image folder (directory or zip) -> cifar-10-batches-py, verified.

Tiny data sets are generated with PIL (PNG, lossless, so pixels can be checked exactly); the real
CIFAR-10 zip is never used here.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from factories import TEST_PER_CLASS, TRAIN_PER_CLASS, image_pixels, make_image_folder, zip_folder

pytest.importorskip("torchvision")  # prepare verifies the converted copy by reading it back with it
from PIL import Image  # noqa: E402

from gcsim.cli import main  # noqa: E402
from gcsim.errors import DataError  # noqa: E402
from gcsim.real import data  # noqa: E402
from gcsim.real.data import CIFAR10_CLASSES, load_split, prepare_from_image_folder  # noqa: E402


def _check_content(data_dir: Path) -> None:
    """Every image comes back with its label and exact pixels (identified by content)."""
    for split, per_class in (("train", TRAIN_PER_CLASS), ("test", TEST_PER_CLASS)):
        images, labels = load_split(data_dir, train=split == "train")
        assert images.shape == (10 * per_class, 32, 32, 3) and images.dtype == np.uint8
        assert np.bincount(labels, minlength=10).tolist() == [per_class] * 10
        expected = {image_pixels(split, lab, i).tobytes(): lab for lab in range(10) for i in range(per_class)}
        got = {img.tobytes(): int(lab) for img, lab in zip(images, labels)}
        assert got == expected


def test_prepare_from_directory_roundtrip(tmp_path):
    src = make_image_folder(tmp_path / "src")
    report = prepare_from_image_folder(src, tmp_path / "data")
    assert report.n_train == 30 and report.n_test == 20 and not report.is_full
    assert report.train_per_class == {c: 3 for c in CIFAR10_CLASSES}
    _check_content(tmp_path / "data")
    # standard layout: 5 training batches of the mixed, shuffled training set + test + meta
    bdir = tmp_path / "data" / "cifar-10-batches-py"
    sizes = []
    for name in data.TRAIN_FILES:
        with open(bdir / name, "rb") as f:
            batch = pickle.load(f, encoding="latin1")
        assert batch["data"].shape[1] == 3072 and batch["data"].dtype == np.uint8
        sizes.append(len(batch["labels"]))
    assert sizes == [6, 6, 6, 6, 6]
    with open(bdir / "batches.meta", "rb") as f:
        assert pickle.load(f)["label_names"] == list(CIFAR10_CLASSES)


def test_prepare_from_zip_with_top_folder(tmp_path):
    src = make_image_folder(tmp_path / "src")
    z = zip_folder(src, tmp_path / "tiny.zip")
    report = prepare_from_image_folder(z, tmp_path / "data", expect_train_per_class=3, expect_test_per_class=2)
    assert (report.n_train, report.n_test) == (30, 20)
    _check_content(tmp_path / "data")


def test_torchvision_md5_is_replaced_by_manifest(tmp_path):
    from torchvision.datasets import CIFAR10

    prepare_from_image_folder(make_image_folder(tmp_path / "src"), tmp_path / "data")
    with pytest.raises(RuntimeError):  # the original release's md5 sums cannot match a conversion
        CIFAR10(str(tmp_path / "data"), train=True, download=False)
    ds = data._dataset_class()(tmp_path / "data", train=True)
    assert len(ds) == 30 and ds.classes == list(CIFAR10_CLASSES)
    # a corrupted batch fails the manifest's md5 check with a clear message
    p = tmp_path / "data" / "cifar-10-batches-py" / "data_batch_2"
    raw = bytearray(p.read_bytes())
    raw[-10] ^= 0xFF
    p.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="md5"):
        load_split(tmp_path / "data", train=True)


def test_already_prepared_and_force(tmp_path):
    src = make_image_folder(tmp_path / "src")
    prepare_from_image_folder(src, tmp_path / "data")
    again = prepare_from_image_folder(src, tmp_path / "data")
    assert again.already_prepared and again.n_train == 30
    forced = prepare_from_image_folder(src, tmp_path / "data", force=True)
    assert not forced.already_prepared
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["cifar-10-batches-py"]


@pytest.mark.parametrize("case, match", [
    ("missing_class", r"train/ classes: expected the 10 CIFAR-10 classes .*missing: \['truck'\]"),
    ("extra_class", r"unexpected: \['zebra'\]"),
    ("flat_train", r"not, e\.g\. 'train/0000\.png'"),
    ("unbalanced", r"train/ images per class: expected the same count"),
    ("wrong_size", r"size: expected 32x32, got 16x16"),
    ("empty", r"got no images"),
])
def test_bad_layout_is_a_clear_error_and_leaves_nothing(tmp_path, case, match):
    src = tmp_path / "src"
    if case == "missing_class":
        make_image_folder(src, classes=CIFAR10_CLASSES[:-1])
    elif case == "extra_class":
        make_image_folder(src, classes=CIFAR10_CLASSES + ("zebra",))
    elif case == "flat_train":
        make_image_folder(src)
        Image.fromarray(image_pixels("train", 0, 99)).save(src / "train" / "0000.png")
    elif case == "unbalanced":
        make_image_folder(src)
        Image.fromarray(image_pixels("train", 0, 99)).save(src / "train" / "cat" / "extra.png")
    elif case == "wrong_size":
        make_image_folder(src)
        Image.fromarray(image_pixels("test", 0, 0)).resize((16, 16)).save(src / "test" / "dog" / "0001.png")
    elif case == "empty":
        src.mkdir()
        (src / "README.txt").write_text("no images here")
    with pytest.raises(DataError, match=match):
        prepare_from_image_folder(src, tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_failure_while_writing_keeps_the_old_copy(tmp_path, monkeypatch):
    src = make_image_folder(tmp_path / "src")
    prepare_from_image_folder(src, tmp_path / "data")
    before = {p.name: p.read_bytes() for p in (tmp_path / "data" / "cifar-10-batches-py").iterdir()}
    calls = []

    def failing_write(path, obj):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk full")
        with open(path, "wb") as f:
            pickle.dump(obj, f)

    monkeypatch.setattr(data, "_write_pickle", failing_write)
    with pytest.raises(OSError, match="disk full"):
        prepare_from_image_folder(src, tmp_path / "data", force=True)
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["cifar-10-batches-py"]  # no temp dir left
    after = {p.name: p.read_bytes() for p in (tmp_path / "data" / "cifar-10-batches-py").iterdir()}
    assert after == before


def test_expected_counts_mismatch(tmp_path):
    src = make_image_folder(tmp_path / "src")
    with pytest.raises(DataError, match=r"train/ images per class: expected 5000, got"):
        prepare_from_image_folder(src, tmp_path / "data", expect_train_per_class=5000)


def test_missing_data_dir_tells_how_to_prepare(tmp_path):
    with pytest.raises(DataError, match=r"gcsim data prepare --source"):
        load_split(tmp_path / "nowhere", train=True)


def test_cli_prepare(tmp_path, capsys):
    z = zip_folder(make_image_folder(tmp_path / "src"), tmp_path / "tiny.zip")
    assert main(["data", "prepare", "--source", str(z), "--data-dir", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "train: 30 images, test: 20 images, 10 classes, checksums verified" in out
    assert "not the full CIFAR-10" in out
    assert main(["data", "prepare", "--source", str(z), "--data-dir", str(tmp_path / "d")]) == 0
    assert "already prepared" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["data", "prepare", "--data-dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gcsim: error: --source / --download: expected exactly one of them, got 'neither'"
    bad = tmp_path / "notazip.zip"
    bad.write_text("hello")
    assert main(["data", "prepare", "--source", str(bad), "--data-dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gcsim: error: --source: expected a zip file or a directory")
    # the option is --source (the error said 'source')
    assert main(["data", "prepare", "--source", str(tmp_path / "none.zip"), "--data-dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gcsim: error: --source: expected an existing zip file or directory, got '{tmp_path / 'none.zip'}'"]


def test_existing_copy_without_the_expected_counts_is_refused_and_kept(tmp_path, capsys):
    """It was reported 'already prepared' (exit 0) although --expect-train-per-class did not hold."""
    src = make_image_folder(tmp_path / "src")
    prepare_from_image_folder(src, tmp_path / "data")
    manifest = tmp_path / "data" / "cifar-10-batches-py" / "gcsim_manifest.json"
    before = manifest.read_bytes()
    rc = main(["data", "prepare", "--source", str(src), "--data-dir", str(tmp_path / "data"),
               "--expect-train-per-class", "5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "train images per class: expected 5, got {'airplane': 3" in err[0] and "use --force" in err[0]
    assert manifest.read_bytes() == before
    ok = prepare_from_image_folder(src, tmp_path / "data", expect_train_per_class=3, expect_test_per_class=2)
    assert ok.already_prepared


def test_data_dir_that_is_a_file_is_one_line(tmp_path, capsys):
    src = make_image_folder(tmp_path / "src")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert main(["data", "prepare", "--source", str(src), "--data-dir", str(afile)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gcsim: error: --data-dir: expected a directory (new or existing), got '{afile}' (not a directory)"]
    assert afile.read_text() == "mine"


def test_cli_error_while_decoding_is_a_line_of_its_own(tmp_path, capsys):
    """The progress bar is closed before the error is printed (it was glued to the bar's line)."""
    src = make_image_folder(tmp_path / "src")
    Image.fromarray(image_pixels("test", 0, 0)).resize((16, 16)).save(src / "test" / "dog" / "0001.png")
    assert main(["data", "prepare", "--source", str(src), "--data-dir", str(tmp_path / "d")]) == 2
    lines = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()
    assert lines[-1].startswith("gcsim: error: image test/dog/0001.png: size: expected 32x32, got 16x16")


def test_missing_data_names_the_option(tmp_path):
    """A run without prepared CIFAR-10 names ``--data-dir``, what it expected and the directory given."""
    with pytest.raises(DataError) as e:
        data.require_prepared(tmp_path / "nowhere")
    assert str(e.value).startswith(f"--data-dir: expected a directory holding CIFAR-10 (cifar-10-batches-py/), "
                                   f"got {str(tmp_path / 'nowhere')!r} (no cifar-10-batches-py in it); ")
    (tmp_path / "half" / data.BATCHES_DIR).mkdir(parents=True)
    (tmp_path / "half" / data.BATCHES_DIR / data.META_FILE).write_bytes(b"")
    with pytest.raises(DataError, match=r"^--data-dir: .*\(missing files \['data_batch_1'"):
        data.require_prepared(tmp_path / "half")
