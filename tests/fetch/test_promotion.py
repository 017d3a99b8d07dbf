"""Promotion: the destination changes in one rename, and the marker comes last."""

from __future__ import annotations

from pathlib import Path

from noctaya.fetch.promotion import is_complete, partial_of, promote

from .conftest import leftovers


def test_promotion_replaces_an_unmarked_destination_and_marks_it_complete(tmp_path: Path) -> None:
    destination = tmp_path / "oci" / "sha256-abc"
    (destination / "old").mkdir(parents=True)
    (destination / "old" / "weights.bin").write_bytes(b"from an unfinished attempt")
    tree = partial_of(destination) / "tree"
    tree.mkdir(parents=True)
    (tree / "weights.bin").write_bytes(b"verified")

    promote(tree, destination)

    assert sorted(p.name for p in destination.iterdir()) == [".noctaya-ready", "weights.bin"]
    assert (destination / "weights.bin").read_bytes() == b"verified"
    assert is_complete(destination)
    assert leftovers(tmp_path) == [str(partial_of(destination))]


def test_a_marker_that_is_not_a_regular_file_does_not_count(tmp_path: Path) -> None:
    destination = tmp_path / "model"
    (destination / ".noctaya-ready").mkdir(parents=True)

    assert not is_complete(destination)
