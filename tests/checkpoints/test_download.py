"""keras_bert.checkpoints.download: a released checkpoint .zip (as Google distributes them) to a
directory."""

import os
import zipfile

import numpy as np
import pytest
from finetune_cases import write_checkpoint

from keras_bert import checkpoints


def _zip(directory, path, prefix=""):
    with zipfile.ZipFile(path, "w") as z:
        for name in sorted(os.listdir(directory)):
            z.write(os.path.join(directory, name), prefix + name)
    return str(path)


@pytest.mark.parametrize(
    "prefix", ["", "uncased_L-2_H-128_A-2/"]
)  # Files at the top (2020 zips) or in a folder.
def test_zip_url_is_downloaded_once_unpacked_and_loads(tmp_path, prefix):
    source = write_checkpoint(str(tmp_path / "ckpt"))
    archive = _zip(source, tmp_path / "uncased_L-2_H-128_A-2.zip", prefix)
    cache = tmp_path / "downloads"
    directory = checkpoints.download("file://" + archive, cache_dir=str(cache))
    assert directory.startswith(str(cache)) and os.path.exists(
        os.path.join(directory, "bert_config.json")
    )
    assert os.path.basename(directory.rstrip("/")).startswith(
        "uncased_L-2_H-128_A-2"
    )  # Casing from the name.
    want = checkpoints.load_encoder(source).get_weights()
    got = checkpoints.load_encoder(directory).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(want, got))
    os.remove(archive)  # A second call uses the cache, not the URL.
    assert checkpoints.download("file://" + archive, cache_dir=str(cache)) == directory
    assert checkpoints.download(source) == source  # Not a .zip: unchanged.


def test_zip_without_a_bert_config_is_an_error(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "readme.txt").write_text("not a checkpoint")
    archive = _zip(tmp_path / "x", tmp_path / "x.zip")
    with pytest.raises(FileNotFoundError, match="not a BERT checkpoint archive"):
        checkpoints.download(archive, cache_dir=str(tmp_path / "downloads"))
