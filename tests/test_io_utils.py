"""Atomic files and directories (keras_bert.io_utils): readers see old or new, never half."""

import os

import pytest

from keras_bert import io_utils


def _write(directory, name, text):
    with open(os.path.join(directory, name), "w") as f:
        f.write(text)


def _read(directory):
    return {n: open(os.path.join(directory, n)).read() for n in sorted(os.listdir(directory))}


def test_new_directory_appears_whole_and_leaves_no_temporary(tmp_path):
    path = str(tmp_path / "out" / "model")  # The parent is created.
    with io_utils.atomic_directory(path) as tmp:
        _write(tmp, "a.txt", "A")
        assert not os.path.exists(path)  # Nothing visible before the block ends.
    assert _read(path) == {"a.txt": "A"}
    assert os.listdir(tmp_path / "out") == ["model"]


def test_existing_directory_is_an_error_unless_replaced(tmp_path):
    path = str(tmp_path / "model")
    os.makedirs(path)
    _write(path, "old.txt", "old")
    with pytest.raises(FileExistsError, match="model exists"):
        with io_utils.atomic_directory(path):
            pass
    with io_utils.atomic_directory(path, replace=True) as tmp:
        _write(tmp, "new.txt", "new")
        assert _read(path) == {"old.txt": "old"}
    assert _read(path) == {"new.txt": "new"}  # Replaced whole: no file of the old one is left.
    assert os.listdir(tmp_path) == ["model"]


def test_an_error_in_the_block_keeps_the_old_directory_and_removes_the_temporary(tmp_path):
    path = str(tmp_path / "model")
    os.makedirs(path)
    _write(path, "old.txt", "old")
    with pytest.raises(RuntimeError, match="killed"):
        with io_utils.atomic_directory(path, replace=True) as tmp:
            _write(tmp, "half.txt", "ha")
            raise RuntimeError("killed")
    assert _read(path) == {"old.txt": "old"} and os.listdir(tmp_path) == ["model"]


def test_a_directory_that_appears_while_writing_is_not_overwritten(tmp_path):
    path = str(tmp_path / "1")
    with pytest.raises(FileExistsError, match="appeared"):
        with io_utils.atomic_directory(path, tmp_name=".tmp-1") as tmp:
            assert os.path.basename(tmp) == ".tmp-1"
            _write(tmp, "mine.txt", "mine")
            os.makedirs(path)  # Another writer got there first.
            _write(path, "theirs.txt", "theirs")
    assert _read(path) == {"theirs.txt": "theirs"} and os.listdir(tmp_path) == ["1"]
