"""Our models from a checkpoint of any format (`keras_bert.checkpoints.FORMATS`: a Google TF1
checkpoint, a Hugging Face BERT directory, the `model_dir` of our pre-training runner): an encoder
(`load_encoder`), a pre-trainer (`load_pretrainer`), and what a task starts from, the encoder with
the vocabulary and casing it was trained with (`load_init_checkpoint`; the rules:
`keras_bert.checkpoints.vocabulary`).

>>> encoder = load_encoder("uncased_L-12_H-768_A-12")              # doctest: +SKIP
>>> init = load_init_checkpoint("uncased_L-12_H-768_A-12")  # doctest: +SKIP
>>> tokenizer = BertTokenizer(init.vocabulary, lower_case=init.lower_case)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from keras_bert.checkpoints import formats
from keras_bert.checkpoints.vocabulary import read_vocabulary
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer

if TYPE_CHECKING:
    import keras

    from keras_bert.config import BertConfig


def load_encoder(
    path: str | os.PathLike[str],
    format: str | None = None,
    config: BertConfig | None = None,
    dtype: str | keras.DTypePolicy | None = None,
    allow_pickle: bool = False,
) -> BertEncoder:
    """A `BertEncoder` with weights from a Google checkpoint, a Hugging Face directory or a
    pre-training run.

    Args:
        path: checkpoint directory, Google checkpoint prefix, HF directory, or a `run_pretraining`
            model_dir (its newest checkpoint) or ckpt-<step> prefix.
        format: "google", "huggingface", "pretraining_run" or None (detect from the files).
        config: optional `BertConfig` used instead of the config file (not for runs).
        dtype: optional Keras dtype policy (e.g. "mixed_bfloat16").
        allow_pickle: bool. Hugging Face only: read pytorch_model.bin with torch.

    Returns:
        `BertEncoder`.
    """
    build = formats.builder(BertEncoder, dtype=dtype)
    return formats.load(path, build, format, config=config, allow_pickle=allow_pickle)


def load_pretrainer(
    path: str | os.PathLike[str],
    format: str | None = None,
    next_sentence: bool | None = None,
    config: BertConfig | None = None,
    dtype: str | keras.DTypePolicy | None = None,
    allow_pickle: bool = False,
) -> BertPretrainer:
    """A `BertPretrainer` with encoder and pre-training head weights.

    Args:
        path, format, config, dtype, allow_pickle: as in `load_encoder`.
        next_sentence: bool or None. Include the NSP head; None means "if the
            checkpoint has one" (e.g. Hugging Face BertForMaskedLM has none).

    Returns:
        `BertPretrainer`.
    """
    build = formats.builder(BertEncoder, BertPretrainer, dtype=dtype)
    return formats.load(
        path,
        build,
        format,
        heads=True,
        next_sentence=next_sentence,
        config=config,
        allow_pickle=allow_pickle,
    )


@dataclasses.dataclass
class InitCheckpoint:
    """What a task starts from.

    Attributes:
        encoder: `keras_bert.BertEncoder` with the checkpoint's weights.
        vocabulary: list[str], the WordPiece tokens (id = index).
        lower_case: bool, True for an uncased model.
        format: "google", "huggingface" or "pretraining_run".
        path: str, the checkpoint path given.
        casing_rule: str, which rule decided `lower_case` (see
            `keras_bert.checkpoints.vocabulary`).
    """

    encoder: BertEncoder
    vocabulary: list[str]
    lower_case: bool
    format: str
    path: str
    casing_rule: str = ""


def load_init_checkpoint(
    path: str | os.PathLike[str],
    vocab_file: str | os.PathLike[str] | None = None,
    lower_case: bool | None = None,
    dtype: str | keras.DTypePolicy | None = None,
) -> InitCheckpoint:
    """Loads an encoder with its vocabulary and casing.

    Args:
        path, vocab_file, lower_case: the checkpoint, and a vocab.txt and casing that replace
            its own (`keras_bert.checkpoints.vocabulary.read_vocabulary`).
        dtype: optional Keras dtype policy of the encoder (e.g. "mixed_bfloat16").

    Returns:
        `InitCheckpoint`.

    Raises:
        FileNotFoundError: no checkpoint at `path`, or no vocabulary found (naming where
            it looked).
        ValueError: the vocabulary's size differs from the encoder's word-embedding rows, or a
            cased vocabulary meets a checkpoint that is uncased
            (`keras_bert.checkpoints.vocabulary.check_vocabulary_casing`).
    """
    path = os.fspath(path)
    encoder = load_encoder(path, dtype=dtype)
    vocabulary = read_vocabulary(path, vocab_file, lower_case)
    return InitCheckpoint(
        encoder=encoder,
        vocabulary=vocabulary.tokens,
        lower_case=vocabulary.lower_case,
        format=vocabulary.format,
        path=path,
        casing_rule=vocabulary.casing_rule,
    )
