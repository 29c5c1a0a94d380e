"""``gcsim data prepare``: put CIFAR-10 where ``gcsim real`` reads it (see :mod:`gcsim.real.data`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gcsim.errors import ConfigError


@click.group(name="data")
def command():
    """Prepare the CIFAR-10 data set for `gcsim real`."""


@command.command(name="prepare")
@click.option("--source", type=click.Path(path_type=Path), default=None,
              help="Image-folder copy to convert: a zip or directory with [cifar10/]train/<class>/*.jpg|png "
                   "and test/<class>/... (e.g. ~/datasets/cifar10-jpeg.zip).")
@click.option("--data-dir", type=click.Path(path_type=Path), default=Path("data/cifar10"), show_default=True,
              help="Where cifar-10-batches-py is written.")
@click.option("--download", is_flag=True, help="Download the original release with torchvision (needs network).")
@click.option("--force", is_flag=True, help="Convert again even if a verified copy is already there.")
@click.option("--expect-train-per-class", type=click.IntRange(min=1), default=None,
              help="Required training images per class (5000 for the full set); default: any balanced count.")
@click.option("--expect-test-per-class", type=click.IntRange(min=1), default=None,
              help="Required test images per class (1000 for the full set); default: any balanced count.")
def prepare(source, data_dir, download, force, expect_train_per_class, expect_test_per_class):
    """Convert an image-folder copy of CIFAR-10 (or download it) into the layout torchvision reads.

    \b
    gcsim data prepare --source ~/datasets/cifar10-jpeg.zip
    gcsim data prepare --download --data-dir data/cifar10
    """
    from gcsim.real import data

    if (source is None) == (not download):
        raise ConfigError("--source / --download", "exactly one of them",
                          "both" if source is not None else "neither")
    if download:
        report = data.download_cifar10(data_dir)
    else:
        report = data.prepare_from_image_folder(
            source, data_dir, expect_train_per_class=expect_train_per_class,
            expect_test_per_class=expect_test_per_class, force=force, progress=sys.stderr.isatty())
    where = Path(data_dir) / data.BATCHES_DIR
    state = "already prepared (use --force to convert again)" if report.already_prepared else "written"
    click.echo(f"CIFAR-10 {state}: {where}")
    click.echo(f"  train: {report.n_train} images, test: {report.n_test} images, "
               f"{len(report.train_per_class)} classes, checksums verified")
    if not report.is_full:
        click.echo(f"  note: not the full CIFAR-10 release (50000 / 10000 images); per class: "
                   f"train {sorted(set(report.train_per_class.values()))}, "
                   f"test {sorted(set(report.test_per_class.values()))}")
