"""Long texts in the sentence tasks (GLUE, STS-B, text_classification): truncate, or windows.

Light (no TensorFlow): the command line defines its flags from `LongTextOptions` before
TensorFlow loads. The windows themselves are `keras_bert.text.windows.pack_windows`' (training
features: `keras_bert.tasks.features.encode_windows`; exports: `keras_bert.export.signatures`);
the document's answer pools its windows' logits (`keras_bert.tasks.features.pool_windows`).

- `long_text="truncate"` (the default, the original BERT's): a text longer than `seq_length` is
  cut (pairs: longest first); the log says how many examples were.
- `long_text="windows"`: a single text is read in windows of `seq_length - 2` tokens whose
  starts are `doc_stride` tokens apart (`keras_bert.text.window_sizes`); a pair keeps its first
  text whole up to `max_first_length(seq_length)` tokens (half of a row) and cuts its second into
  windows beside it. Evaluation and prediction pool the windows' logits per text
  (`window_pooling`) and score texts, never windows. Texts with more windows than `max_windows`
  are read up to the cap (exports report `num_windows` and `text_cut`). The classifier reads
  a window through the mean of its tokens' vectors (`token_pooling="mean"`, the default with
  windows; `keras_bert.models.task_models.pooled_features`): where one sentence of a window
  decides, [CLS] (`token_pooling="cls"`) learned nothing on bench/long_document_training.py's
  review sentences among news (chance), the mean learns them. Training (`window_training`):
  - "window" (the default): each window is a training example with its text's label (pooled
    only at evaluation); cheaper per step, and with mean token pooling it learns where one
    sentence decides (see `LongTextOptions`).
  - "document": a text's windows go through the encoder together, their logits
    are pooled inside the training step as in serving (`keras_bert.models.documents`), and the
    loss is the text's. A batch holds whole texts, at most `batch_size` windows
    (`keras_bert.tasks.documents`). Pooling "max" (per class), "mean" (the default), "first",
    or "attention": a learned softmax over the windows' vectors weighs their logits.
    Why max for document-level training: at the start, mean pooling (and attention, which
    starts as the mean) sends every window the same gradient toward the document's label,
    which is what per-window training does; max sends it to the window that leans most, and
    learns where one sentence decides (tests/tasks/test_long_text.py's one-phrase documents:
    max 1.00, mean and per-window 0.50; see bench/long_document_training.py for real text).
"""

import dataclasses

from keras_bert.text.window_sizes import MAX_WINDOWS

LONG_TEXT = ("truncate", "windows")
POOLINGS = ("mean", "max", "logsumexp", "first", "attention")
WINDOW_TRAINING = ("document", "window")
TOKEN_POOLINGS = ("cls", "mean")  # `keras_bert.models.task_models.POOLINGS` (light: no Keras).
IN_MODEL = ("logsumexp", "attention")  # Poolings only document-level models have.


@dataclasses.dataclass
class LongTextOptions:
    """The sentence tasks' settings for texts longer than seq_length.

    Args:
        long_text: str. "truncate" texts to seq_length, or read them in "windows".
        doc_stride: int or None. Tokens between window starts (default half a window; SQuAD 128).
        max_windows: int. Windows read per text at most, with long_text=windows.
        window_pooling: str. Text logits from windows': "mean", "max", "logsumexp", "first",
            "attention". "logsumexp" and "attention" pool inside the model: they need
            window_training="document".
        window_training: str. Train on whole "document"s (pooled as served) or each "window"
            with its text's label. The default stays "window" with "mean" pooling: measured
            (with the [CLS] head) with all-MiniLM-L6-v2 (`bench/long_document_training.py`), on
            documents whose label is one topic sentence past the first window it reached 0.925
            against document-level training's 0.904 (max), 0.899 (attention), 0.888 (mean) and
            0.887 (logsumexp), and on the paragraph benchmark 0.94 against 0.927 (document-level
            max).
        token_pooling: str or None. The classifier's vector of a text or window: "cls"
            (`pooled_output`) or "mean" (of its tokens; `BertClassifier`'s `pooling`). Default
            (None): "mean" with long_text=windows, "cls" with truncate.
    """

    long_text: str = "truncate"
    doc_stride: int | None = None
    max_windows: int = MAX_WINDOWS
    window_pooling: str = "mean"
    window_training: str = "window"
    token_pooling: str | None = None

    def __post_init__(self) -> None:
        if self.long_text not in LONG_TEXT:
            raise ValueError(f"long_text must be one of {LONG_TEXT}, got {self.long_text!r}.")
        if self.window_pooling not in POOLINGS:
            raise ValueError(
                f"window_pooling must be one of {POOLINGS}, got {self.window_pooling!r}."
            )
        if self.window_training not in WINDOW_TRAINING:
            raise ValueError(
                f"window_training must be one of {WINDOW_TRAINING}, got {self.window_training!r}."
            )
        if self.window_pooling in IN_MODEL and self.window_training != "document":
            raise ValueError(
                f"window_pooling={self.window_pooling} pools inside the model, as trained: it "
                "needs window_training=document."
            )
        if self.token_pooling is None:
            self.token_pooling = "mean" if self.long_text == "windows" else "cls"
        if self.token_pooling not in TOKEN_POOLINGS:
            raise ValueError(
                f"token_pooling must be one of {TOKEN_POOLINGS}, got {self.token_pooling!r}."
            )
        if self.max_windows is None or int(self.max_windows) < 1:
            raise ValueError(
                f"max_windows must be >= 1 (windows read per text), got {self.max_windows}."
            )
        if self.doc_stride is not None and int(self.doc_stride) < 1:
            raise ValueError(f"doc_stride must be >= 1, got {self.doc_stride}.")


def document_level(task) -> bool:
    """Whether `task` trains on whole documents of windows (long_text=windows,
    window_training=document); False for tasks without long-text options."""
    options = getattr(task, "options", None)
    return isinstance(options, LongTextOptions) and (
        options.long_text == "windows" and options.window_training == "document"
    )
