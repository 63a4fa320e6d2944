"""A checkpoint's vocabulary and casing, in every format of `keras_bert.checkpoints.FORMATS`
(nothing but its config and vocabulary is read).

Vocabulary: `vocab_file` if given, else the vocab.txt in the checkpoint's directory (a Hugging
Face directory's tokenizer.json too). Its size must equal the config's `vocab_size`.

Casing, the first rule that decides (the rule is kept in `casing_rule`):
1. `lower_case` if given (a conflict with what the checkpoint says is logged as a warning);
2. the format's own rule (its module's `casing`): Hugging Face, "do_lower_case" in
   tokenizer_config.json; Google, the released directory names (uncased_*, multilingual_*,
   chinese_* are uncased; cased_*, multi_cased_* are cased, also with a wwm_ prefix);
   a pre-training run, the `lower_case` it recorded (text_config.json);
3. the vocabulary: uncased when no word piece (special tokens like [CLS] aside) has an
   upper-case letter.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from absl import logging

from keras_bert.checkpoints import files
from keras_bert.checkpoints.formats import FORMATS, detect_format
from keras_bert.text.vocab import cased_pieces, load_vocabulary, vocabulary_is_uncased


@dataclasses.dataclass
class CheckpointVocabulary:
    """The vocabulary and casing a checkpoint was trained with.

    Attributes:
        tokens: list[str], the WordPiece tokens (id = index).
        lower_case: bool, True for an uncased model.
        format: "google", "huggingface" or "pretraining_run".
        source: str, the file the tokens came from.
        casing_rule: str, which rule decided `lower_case` (see the module docstring).
    """

    tokens: list[str]
    lower_case: bool
    format: str
    source: str
    casing_rule: str


def read_vocabulary(
    path: str | os.PathLike[str],
    vocab_file: str | os.PathLike[str] | None = None,
    lower_case: bool | None = None,
) -> CheckpointVocabulary:
    """The vocabulary and casing of checkpoint `path` (see the module docstring).

    Args:
        path: Google checkpoint (directory or prefix), Hugging Face directory, or the
            model_dir of a pre-training run (or a `ckpt-<step>` prefix in it).
        vocab_file: str or None. A vocab.txt (or directory holding one) used instead of
            the one beside the checkpoint.
        lower_case: bool or None. Uncased tokenization; None: from the checkpoint.

    Raises:
        FileNotFoundError: no checkpoint at `path`, or no vocabulary found (naming where it
            looked).
        ValueError: the vocabulary's size differs from the config's vocab_size, or a cased
            vocabulary meets a checkpoint that is uncased (`check_vocabulary_casing`).
    """
    path = os.fspath(path)
    format = detect_format(path)
    module = FORMATS[format]
    vocab_dir = module.directory_of(path)
    vocab_source = vocab_file or files.vocab_in(vocab_dir)
    if vocab_source is None and format == "huggingface":  # transformers v5: tokenizer.json only.
        vocab_source = module.tokenizer_json_vocabulary(vocab_dir)
    if vocab_source is None:
        raise FileNotFoundError(
            f"No vocabulary for {path}: looked for {os.path.join(vocab_dir, files.VOCAB_NAME)}. "
            f"Pass vocab_file (--vocab_file) to give one (a Hugging Face directory's "
            f"tokenizer.json is read too)."
        )
    tokens = load_vocabulary(vocab_source)
    if not isinstance(vocab_source, (str, os.PathLike)):
        vocab_source = os.path.join(vocab_dir, "tokenizer.json")
    rows = module.read_config(path).vocab_size
    if len(tokens) != rows:
        raise ValueError(
            f"The vocabulary {vocab_source} has {len(tokens)} tokens but the encoder of {path} "
            f"has {rows} word-embedding rows (vocab_size); they must be equal: use the vocab.txt "
            f"the checkpoint was trained with."
        )
    recorded = module.casing(path)
    if vocab_file:  # Another vocabulary than the checkpoint's own: its casing must fit too.
        check_vocabulary_casing(tokens, vocab_source, path, *recorded)
    lower_case, rule = _casing(recorded, tokens, lower_case)
    logging.info(
        "%s: %s checkpoint, %d tokens from %s, lower_case=%s (%s).",
        path,
        format,
        len(tokens),
        vocab_source,
        lower_case,
        rule,
    )
    return CheckpointVocabulary(tokens, lower_case, format, os.fspath(vocab_source), rule)


def _casing(
    recorded_casing: tuple[bool | None, str], vocabulary: Sequence[str], lower_case: bool | None
) -> tuple[bool, str]:
    """(lower_case, the rule that decided it), from the format's (lower_case or None, rule)."""
    recorded, rule = recorded_casing
    if lower_case is not None:
        if recorded is not None and recorded != bool(lower_case):
            logging.warning(
                "lower_case=%s was passed but %s says lower_case=%s; using lower_case=%s.",
                bool(lower_case),
                rule,
                recorded,
                bool(lower_case),
            )
        return bool(lower_case), "lower_case argument"
    if recorded is not None:
        return recorded, rule
    if vocabulary_is_uncased(vocabulary):
        return True, "vocabulary: no upper-case letter in its word pieces"
    return False, "vocabulary: upper-case letters in its word pieces"


def check_vocabulary_casing(
    vocabulary: Sequence[str],
    vocab_source: str | os.PathLike[str] | Sequence[str],
    path: str | os.PathLike[str],
    recorded: bool | None,
    rule: str,
) -> None:
    """Raises when the checkpoint is uncased by its own files or name (`recorded`, decided by
    `rule`) but the vocabulary given for it is cased: many word pieces with upper-case letters (at
    least 1 in 200: an uncased vocabulary has none; a few in a multilingual one are tolerated).

    Raises:
        ValueError: naming the vocabulary, the checkpoint, and a few cased pieces.
    """
    cased = cased_pieces(vocabulary)
    if recorded is True and len(cased) >= max(1, len(vocabulary) // 200):
        raise ValueError(
            f"The vocabulary {vocab_source} is cased ({len(cased)} of its {len(vocabulary)} tokens "
            f"have upper-case letters, e.g. {cased[:3]}) but the checkpoint {path} is uncased "
            f"({rule}); use the vocab.txt it was trained with."
        )
