"""Presets: a name, an `hf://` id, a directory or a `.keras` file -> weights, vocabulary, casing.

`Class.from_preset(preset, **kwargs)` on `BertEncoder`, `BertPretrainer`, `BertTokenizer`,
`BertPreprocessor` and the task models reads through `resolve` and the loaders here. A preset is:
- a name of `PRESETS`, the Google releases: its archive is downloaded once into the Keras cache
  (`$KERAS_HOME/keras_bert/presets/<name>/`, default ~/.keras) and unpacked; an archive whose
  sha256 differs from the table's is refused and nothing is kept. Google published no sha256 for
  these archives: the entries hold None (the archive's sha256 is then logged, not checked) until
  one is pinned (`sha256=` of `resolve`, or an entry's value). For seven of them (`FILE_SHA256`)
  the sha256 of the unpacked files is on record: files that differ are refused the same way;
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
        files_sha256: dict or None, file name -> sha256 of files in the unpacked archive, where
            on record (`FILE_SHA256`).
    """

    url: str
    sha256: str | None
    layers: int
    hidden: int
    heads: int
    lower_case: bool
    vocab_size: int
    description: str
    files_sha256: dict[str, str] | None = dataclasses.field(default=None, hash=False)

    @property
    def parameters(self) -> int:
        """The encoder's parameter count (embeddings, layers, pooler), computed."""
        h, v = self.hidden, self.vocab_size
        embeddings = (v + 512 + 2) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h + (h * 4 * h + 4 * h) + (4 * h * h + h) + 2 * h
        return embeddings + self.layers * layer + h * h + h


# The sha256 of the unpacked files of seven Google archives (none of the archives themselves was
# published), as NVIDIA/DeepLearningExamples checks them after download:
# PyTorch/LanguageModeling/BERT/data/GooglePretrainedWeightDownloader.py (its
# "bert_large_multilingual_uncased" is multilingual_L-12_H-768_A-12, our bert_base_multi_uncased).
# The uncased vocab.txt's equals shared/data's bert_uncased/vocab.txt (07eced37...).
_FILES = (
    "bert_config.json",
    "bert_model.ckpt.data-00000-of-00001",
    "bert_model.ckpt.index",
    "bert_model.ckpt.meta",
    "vocab.txt",
)
FILE_SHA256 = {
    name: dict(zip(_FILES, sums))
    for name, sums in {
        "bert_base_uncased": (
            "7b4e5f53efbd058c67cda0aacfafb340113ea1b5797d9ce6ee411704ba21fcbc",
            "58580dc5e0bf0ae0d2efd51d0e8272b2f808857f0a43a88aaf7549da6d7a8a84",
            "04c1323086e2f1c5b7c0759d8d3e484afbb0ab45f51793daab9f647113a0117b",
            "dd5682170a10c3ea0280c2e9b9a45fee894eb62da649bbdea37b38b0ded5f60e",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        ),
        "bert_large_uncased": (
            "bfa42236d269e2aeb3a6d30412a33d15dbe8ea597e2b01dc9518c63cc6efafcb",
            "bc6b3363e3be458c99ecf64b7f472d2b7c67534fd8f564c0556a678f90f4eea1",
            "68b52f2205ffc64dc627d1120cf399c1ef1cbc35ea5021d1afc889ffe2ce2093",
            "6fcce8ff7628f229a885a593625e3d5ff9687542d5ef128d9beb1b0c05edc4a1",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        ),
        "bert_base_cased": (
            "f11dfb757bea16339a33e1bf327b0aade6e57fd9c29dc6b84f7ddb20682f48bc",
            "734d5a1b68bf98d4e9cb6b6692725d00842a1937af73902e51776905d8f760ea",
            "517d6ef5c41fc2ca1f595276d6fccf5521810d57f5a74e32616151557790f7b1",
            "5f8a9771ff25dadd61582abb4e3a748215a10a6b55947cbb66d0f0ba1694be98",
            "eeaa9875b23b04b4c54ef759d03db9d1ba1554838f8fb26c5d96fa551df93d02",
        ),
        "bert_large_cased": (
            "7adb2125c8225da495656c982fd1c5f64ba8f20ad020838571a3f8a954c2df57",
            "6ff33640f40d472f7a16af0c17b1179ca9dcc0373155fb05335b6a4dd1657ef0",
            "ef42a53f577fbe07381f4161b13c7cab4f4fc3b167cec6a9ae382c53d18049cf",
            "d2ddff3ed33b80091eac95171e94149736ea74eb645e575d942ec4a5e01a40a1",
            "eeaa9875b23b04b4c54ef759d03db9d1ba1554838f8fb26c5d96fa551df93d02",
        ),
        "bert_base_multi_cased": (
            "e76c3964bc14a8bb37a5530cdc802699d2f4a6fddfab0611e153aa2528f234f0",
            "55b8a2df41f69c60c5180e50a7c31b7cdf6238909390c4ddf05fbc0d37aa1ac5",
            "7d8509c2a62b4e300feb55f8e5f1eef41638f4998dd4d887736f42d4f6a34b37",
            "95e5f1997e8831f1c31e5cf530f1a2e99f121e9cd20887f2dce6fe9e3343e3fa",
            "fe0fda7c425b48c516fc8f160d594c8022a0808447475c1a7c6d6479763f310c",
        ),
        "bert_base_multi_uncased": (
            "49063bb061390211d2fdd108cada1ed86faa5f90b80c8f6fdddf406afa4c4624",
            "3cd83912ebeb0efe2abf35c9f1d5a515d8e80295e61c49b75c8853f756658429",
            "87c372c1a3b1dc7effaaa9103c80a81b3cbab04c7933ced224eec3b8ad2cc8e7",
            "27f504f34f02acaa6b0f60d65195ec3e3f9505ac14601c6a32b421d0c8413a29",
            "87b44292b452f6c05afa49b2e488e7eedf79ea4f4c39db6f2f4b37764228ef3f",
        ),
        "bert_base_chinese": (
            "7aaad0335058e2640bcb2c2e9a932b1cd9da200c46ea7b8957d54431f201c015",
            "756699356b78ad0ef1ca9ba6528297bcb3dd1aef5feadd31f4775d7c7fc989ba",
            "46315546e05ce62327b3e2cd1bed22836adcb2ff29735ec87721396edb21b82e",
            "c0f8d51e1ab986604bc2b25d6ec0af7fd21ff94cf67081996ec3f3bf5d823047",
            "45bbac6b341c319adc98a532532882e91a9cefc0329aa57bac9ae761c27b291c",
        ),
    }.items()
}


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
    for key, sums in FILE_SHA256.items():
        presets[key] = dataclasses.replace(presets[key], files_sha256=sums)
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
            if expected is None and not entry.files_sha256:
                logging.warning("%s: no published sha256 to check; this one is %s.", name, digest)
            elif expected is not None and digest != expected.lower():
                raise ValueError(
                    f"The archive of preset {name!r} ({entry.url}) has sha256 {digest}, expected "
                    f"{expected}: refused (a changed or damaged download); nothing was kept."
                )
            with zipfile.ZipFile(archive) as z:
                z.extractall(os.path.join(tmp, "unpacked"))
            _check_files(name, entry, os.path.join(tmp, "unpacked"))
            os.replace(os.path.join(tmp, "unpacked"), target)
    return _config_directory(target, entry.url)


def _check_files(name, entry, unpacked):
    """Checks the unpacked files against `entry.files_sha256` (where on record).

    Raises:
        ValueError: a file that is missing or differs (the caller keeps nothing).
    """
    if not entry.files_sha256:
        return
    directory = _config_directory(unpacked, entry.url)
    for file, expected in entry.files_sha256.items():
        path = os.path.join(directory, file)
        digest = _sha256(path) if os.path.isfile(path) else "missing"
        if digest != expected:
            raise ValueError(
                f"{file} in the archive of preset {name!r} ({entry.url}) has sha256 {digest}, "
                f"expected {expected}: refused (a changed or damaged download); nothing was kept."
            )
    logging.info("%s: its %d files match their recorded sha256.", name, len(entry.files_sha256))


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
