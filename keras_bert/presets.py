"""Presets: a name, an `hf://` id, a directory or a `.keras` file -> weights, vocabulary, casing.

`Class.from_preset(preset, **kwargs)` on `BertEncoder`, `BertPretrainer`, `BertTokenizer`,
`BertPreprocessor` and the task models reads through `resolve` and the loaders here. A preset is:
- a name of `PRESETS`, the Google releases: its archive is downloaded once into the Keras cache
  (`$KERAS_HOME/keras_bert/presets/<name>/`, default ~/.keras) and unpacked; an archive whose
  sha256 differs from the table's is refused and nothing is kept. Google published no sha256 for
  these archives: the entries hold None (the archive's sha256 is then logged, not checked) until
  one is pinned (`sha256=` of `resolve`, or an entry's value);
- `hf://<org>/<name>`: the snapshot in the Hugging Face cache (`$HF_HUB_CACHE`, else
  `$HF_HOME/hub`, else ~/.cache/huggingface/hub), downloaded with huggingface_hub when it is
  missing and `HF_HUB_OFFLINE` is not set;
- a local directory: a Google checkpoint, a Hugging Face directory (pre-trained, or a fine-tuned
  `BertFor...` task model: `keras_bert.checkpoints.hf_tasks`), a pre-training run, or a fine-tuned
  `model/` directory (task.json) or its run directory; or a `.keras` file.

>>> sorted(PRESETS)[:2]
['bert_base_cased', 'bert_base_chinese']
>>> encoder = BertEncoder.from_preset("bert_tiny_uncased")            # doctest: +SKIP
>>> model = BertClassifier.from_preset("hf://sentence-transformers/all-MiniLM-L6-v2",
...                                    num_classes=2)                  # doctest: +SKIP
"""

import dataclasses
import hashlib
import os
import shutil
import tempfile
import urllib.request
import zipfile

from absl import logging

from keras_bert.config import COMPACT_HIDDEN, COMPACT_LAYERS

GOOGLE = "https://storage.googleapis.com/bert_models/"
HF_SCHEME = "hf://"
KERAS_FILE = ".keras"
# The compact sizes with names (Turc et al. 2019): name -> (layers, hidden).
_COMPACT_NAMES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512)}


@dataclasses.dataclass(frozen=True)
class Preset:
    """One released checkpoint.

    Attributes:
        url: str, its zip archive.
        sha256: str or None, the archive's sha256 (None: none published, see the module).
        layers, hidden, heads: int, the architecture.
        lower_case: bool, uncased tokenization.
        vocab_size: int.
        description: str, what it is (languages, masking).
    """

    url: str
    sha256: str | None
    layers: int
    hidden: int
    heads: int
    lower_case: bool
    vocab_size: int
    description: str

    @property
    def parameters(self) -> int:
        """The encoder's parameter count (embeddings, layers, pooler), computed."""
        h, v = self.hidden, self.vocab_size
        embeddings = (v + 512 + 2) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h + (h * 4 * h + 4 * h) + (4 * h * h + h) + 2 * h
        return embeddings + self.layers * layer + h * h + h


def _google(date, name, lower_case, vocab_size, description):
    layers, hidden, heads = (int(part.split("-")[1]) for part in name.split("_")[-3:])
    url = f"{GOOGLE}{date}/{name}.zip"
    return Preset(url, None, layers, hidden, heads, lower_case, vocab_size, description)


def _table():
    """The one table of the Google releases (google-research/bert's README)."""
    english = "English, Wikipedia + BooksCorpus"
    presets = {
        "bert_base_uncased": _google("2018_10_18", "uncased_L-12_H-768_A-12", True, 30522, english),
        "bert_large_uncased": _google(
            "2018_10_18", "uncased_L-24_H-1024_A-16", True, 30522, english
        ),
        "bert_base_cased": _google("2018_10_18", "cased_L-12_H-768_A-12", False, 28996, english),
        "bert_large_cased": _google("2018_10_18", "cased_L-24_H-1024_A-16", False, 28996, english),
        "bert_large_wwm_uncased": _google(
            "2019_05_30", "wwm_uncased_L-24_H-1024_A-16", True, 30522, english + ", whole words"
        ),
        "bert_large_wwm_cased": _google(
            "2019_05_30", "wwm_cased_L-24_H-1024_A-16", False, 28996, english + ", whole words"
        ),
        "bert_base_multi_cased": _google(
            "2018_11_23", "multi_cased_L-12_H-768_A-12", False, 119547, "104 languages"
        ),
        "bert_base_multi_uncased": _google(
            "2018_11_03", "multilingual_L-12_H-768_A-12", True, 105879, "102 languages (older)"
        ),
        "bert_base_chinese": _google(
            "2018_11_03", "chinese_L-12_H-768_A-12", True, 21128, "Chinese, simplified+traditional"
        ),
    }
    for layers in COMPACT_LAYERS:
        for hidden in COMPACT_HIDDEN:
            name = f"uncased_L-{layers}_H-{hidden}_A-{hidden // 64}"
            key = f"bert_L-{layers}_H-{hidden}_uncased"
            presets[key] = _google("2020_02_20", name, True, 30522, english + ", compact")
    for size, (layers, hidden) in _COMPACT_NAMES.items():
        presets[f"bert_{size}_uncased"] = presets[f"bert_L-{layers}_H-{hidden}_uncased"]
    return presets


PRESETS: dict[str, Preset] = _table()


def describe() -> str:
    """The table of `PRESETS` as text: name, layers, hidden, casing, parameters, source."""
    lines = [f"{'name':28} {'L':>3} {'H':>5} {'casing':8} {'params':>7}  source"]
    for name, p in sorted(PRESETS.items()):
        casing = "uncased" if p.lower_case else "cased"
        lines.append(
            f"{name:28} {p.layers:>3} {p.hidden:>5} {casing:8} {p.parameters / 1e6:6.1f}M  {p.url}"
        )
    return "\n".join(lines)


def resolve(preset, sha256=None):
    """The local path of a preset (see the module docstring).

    Args:
        preset: str or os.PathLike. A name of `PRESETS`, `hf://<org>/<name>`, a directory or a
            `.keras` file.
        sha256: str or None. For a name: the archive's sha256 to require (default: the table's).

    Returns:
        str, a directory or a `.keras` file.

    Raises:
        FileNotFoundError: neither a known name nor an existing path; an hf:// id that is not
            cached while offline.
        ValueError: a downloaded archive whose sha256 differs (nothing is kept).
    """
    preset = os.fspath(preset)
    if preset.startswith(HF_SCHEME):
        return hf_snapshot(preset[len(HF_SCHEME) :])
    if os.path.exists(preset) or "://" in preset:
        return preset
    if preset in PRESETS:
        return download_preset(preset, sha256=sha256)
    raise FileNotFoundError(
        f"Unknown preset {preset!r}: not a file or directory, not hf://<org>/<name>, and not a "
        f"name of keras_bert.presets.PRESETS ({', '.join(sorted(PRESETS)[:6])}, ...; "
        "keras_bert.presets.describe() lists them)."
    )


def cache_root():
    """The Keras cache's directory of presets: $KERAS_HOME/keras_bert/presets (~/.keras)."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(home, "keras_bert", "presets")


def download_preset(name, sha256=None):
    """The unpacked directory of preset `name`, downloading and checking it the first time.

    Returns:
        str, the directory holding bert_config.json.

    Raises:
        ValueError: the archive's sha256 differs from `sha256` or the table's (nothing is kept).
    """
    entry = PRESETS[name]
    expected = sha256 or entry.sha256
    target = os.path.join(cache_root(), name)
    if not os.path.isdir(target):
        os.makedirs(cache_root(), exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
            archive = os.path.join(tmp, "archive.zip")
            with urllib.request.urlopen(entry.url) as response, open(archive, "wb") as f:
                shutil.copyfileobj(response, f)
            digest = _sha256(archive)
            if expected is None:
                logging.warning("%s: no published sha256 to check; this one is %s.", name, digest)
            elif digest != expected.lower():
                raise ValueError(
                    f"The archive of preset {name!r} ({entry.url}) has sha256 {digest}, expected "
                    f"{expected}: refused (a changed or damaged download); nothing was kept."
                )
            with zipfile.ZipFile(archive) as z:
                z.extractall(os.path.join(tmp, "unpacked"))
            os.replace(os.path.join(tmp, "unpacked"), target)
    return _config_directory(target, entry.url)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _config_directory(root, origin):
    for directory, _, names in sorted(os.walk(root), key=lambda item: len(item[0])):
        if "bert_config.json" in names or "config.json" in names:
            return directory
    raise FileNotFoundError(
        f"{origin} unpacked to {root} holds no bert_config.json or config.json."
    )


def hf_cache():
    """The Hugging Face hub cache directory (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache", "huggingface"
    )
    return os.path.join(home, "hub")


def hf_snapshot(repo_id, revision="main"):
    """The cached snapshot directory of Hugging Face model `repo_id`, downloaded if missing.

    Raises:
        FileNotFoundError: not cached while HF_HUB_OFFLINE is set (or huggingface_hub is absent).
    """
    if repo_id.count("/") > 1 or not repo_id.strip("/"):
        raise ValueError(f"Expected hf://<org>/<name>, got hf://{repo_id}.")
    folder = os.path.join(hf_cache(), "models--" + repo_id.replace("/", "--"))
    ref = os.path.join(folder, "refs", revision)
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as f:
            snapshot = os.path.join(folder, "snapshots", f.read().strip())
        if os.path.isfile(os.path.join(snapshot, "config.json")):
            return snapshot
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    try:
        import huggingface_hub
    except ImportError:
        huggingface_hub = None
    if offline or huggingface_hub is None:
        why = "HF_HUB_OFFLINE is set" if offline else "huggingface_hub is not installed"
        raise FileNotFoundError(
            f"hf://{repo_id} is not in the Hugging Face cache ({folder}) and {why}: download it "
            "once online (or pass its local directory)."
        )
    return huggingface_hub.snapshot_download(
        repo_id,
        revision=revision,
        cache_dir=hf_cache(),
        allow_patterns=["*.json", "*.txt", "model.safetensors*"],
    )
