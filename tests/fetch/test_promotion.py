"""Promotion and the marker: the destination changes in one rename, the marker comes last and
records what was verified, and only a marker that answers the request is trusted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from noctaya.fetch.marker import marker_of, trusted
from noctaya.fetch.promotion import partial_of, promote

from .conftest import leftovers

IDENTITY = {"kind": "oci", "manifest": "sha256:" + "a" * 64}
VERIFIED = {"layers": [{"digest": "sha256:" + "b" * 64, "title": "weights.bin"}]}


def promoted(tmp_path: Path) -> Path:
    destination = tmp_path / "oci" / "sha256-abc"
    tree = partial_of(destination) / "tree"
    (tree / "model").mkdir(parents=True)
    (tree / "weights.bin").write_bytes(b"verified")
    (tree / "model" / "config.json").write_bytes(b"{}")
    promote(tree, destination, source="oci://r/x", identity=IDENTITY, verified=VERIFIED)
    return destination


def test_promotion_replaces_an_unmarked_destination_and_marks_what_it_verified(
    tmp_path: Path,
) -> None:
    destination = tmp_path / "oci" / "sha256-abc"
    (destination / "old").mkdir(parents=True)
    (destination / "old" / "weights.bin").write_bytes(b"from an unfinished attempt")

    promoted(tmp_path)

    assert sorted(p.name for p in destination.iterdir()) == [
        ".noctaya-ready",
        "model",
        "weights.bin",
    ]
    assert (destination / "weights.bin").read_bytes() == b"verified"
    assert json.loads(marker_of(destination).read_text()) == {
        "schema": 1,
        "source": "oci://r/x",
        "identity": IDENTITY,
        "verified": VERIFIED,
        "files": {"model/config.json": 2, "weights.bin": 8},
    }
    assert trusted(destination, IDENTITY)
    assert leftovers(tmp_path) == [str(partial_of(destination))]


@pytest.mark.parametrize(
    "damage",
    [
        "other-request",
        "empty-marker",
        "marker-is-a-directory",
        "file-truncated",
        "file-grown",
        "file-gone",
    ],
)
def test_a_marker_is_trusted_only_if_it_answers_the_request_and_the_tree_is_whole(
    tmp_path: Path, damage: str
) -> None:
    destination = promoted(tmp_path)
    identity = dict(IDENTITY)
    if damage == "other-request":
        identity["manifest"] = "sha256:" + "c" * 64
    elif damage == "empty-marker":  # an earlier version's, or the reference implementation's
        marker_of(destination).write_bytes(b"")
    elif damage == "marker-is-a-directory":
        marker_of(destination).unlink()
        marker_of(destination).mkdir()
    elif damage == "file-truncated":
        (destination / "weights.bin").write_bytes(b"veri")
    elif damage == "file-grown":
        (destination / "model" / "config.json").write_bytes(b'{"more": 1}')
    else:
        (destination / "weights.bin").unlink()

    assert not trusted(destination, identity)


def test_files_added_after_the_marker_do_not_matter(tmp_path: Path) -> None:
    """An engine with a writable cache may add files (the hub client's `.no_exist` entries)."""
    destination = promoted(tmp_path)
    (destination / "added-later.json").write_bytes(b"{}")

    assert trusted(destination, IDENTITY)
