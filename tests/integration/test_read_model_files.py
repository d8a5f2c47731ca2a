"""Which read-model file is in use, and how a rebuilt one takes over: a promotion never removes a file
a rebuild is still writing, a newer rebuild wins over an older offer, and one process serves a data dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import read_model_files as files


def touch(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def test_the_file_in_use_is_the_default_until_one_is_promoted(tmp_path: Path) -> None:
    assert files.current(tmp_path) == tmp_path / files.DEFAULT
    rebuilt = touch(files.new_file(tmp_path))
    touch(tmp_path / files.DEFAULT)
    files.promote(tmp_path, rebuilt)
    assert files.current(tmp_path) == rebuilt and not (tmp_path / files.DEFAULT).exists()
    with pytest.raises(FileNotFoundError):
        files.promote(tmp_path, tmp_path / "read_models-missing.sqlite")
    assert files.current(tmp_path) == rebuilt


def test_a_promotion_leaves_a_rebuild_under_way_alone(tmp_path: Path) -> None:
    first = touch(tmp_path / "read_models-a.sqlite")
    second = tmp_path / "read_models-b.sqlite"
    with files.building(second):
        touch(second)
        files.promote(tmp_path, first)  # another rebuild finishes meanwhile
        assert second.exists()
    assert not Path(f"{second}.building").exists()
    files.remove_unused(tmp_path)  # once it is done (and not promoted), it is unused
    assert not second.exists() and first.exists()


def test_a_marker_left_by_a_rebuild_that_died_does_not_keep_its_file(tmp_path: Path) -> None:
    current = touch(tmp_path / "read_models-a.sqlite")
    files.promote(tmp_path, current)
    dead = touch(tmp_path / "read_models-b.sqlite")
    touch(Path(f"{dead}.building"))  # nobody holds its lock
    assert files.remove_unused(tmp_path) == [dead]
    assert not Path(f"{dead}.building").exists()


def test_a_newer_rebuild_promoted_withdraws_an_older_offer(tmp_path: Path) -> None:
    older, newer = touch(tmp_path / "read_models-a.sqlite"), touch(tmp_path / "read_models-b.sqlite")
    files.offer(tmp_path, older)  # offered to a service that stopped before it adopted it
    assert files.waiting(tmp_path) == older
    files.promote(tmp_path, newer)
    assert files.waiting(tmp_path) is None and files.current(tmp_path) == newer and not older.exists()


def test_one_process_serves_a_data_dir_and_a_rebuild_then_offers(tmp_path: Path) -> None:
    with files.serving(tmp_path):
        with pytest.raises(files.AlreadyServed), files.serving(tmp_path):
            pass
        with files.unless_served(tmp_path) as free:
            assert not free
    with files.unless_served(tmp_path) as free:
        assert free


def test_promoting_an_older_file_keeps_a_newer_offer(tmp_path: Path) -> None:
    older = touch(files.new_file(tmp_path))
    newer = touch(files.new_file(tmp_path))
    assert older.name < newer.name and Path(f"{newer}.building").exists()  # names sort by time, reserved
    files.offer(tmp_path, newer)  # a rebuild offered while the server was adopting the older one
    files.promote(tmp_path, older)
    assert files.waiting(tmp_path) == newer and newer.exists()
