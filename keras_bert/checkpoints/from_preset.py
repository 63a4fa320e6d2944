"""The loaders behind every `from_preset`: a preset (`keras_bert.presets.resolve`) -> a tokenizer,
preprocessor, encoder, pre-trainer or task model with its preprocessor attached.

A task model comes from one of three kinds of preset:
- fine-tuned by us: a `model/` directory (task.json, model.keras, vocab.txt) or a `.keras` file
  saved with its preprocessor: the head, labels and casing are restored;
- fine-tuned by Hugging Face (`BertFor...` in config.json: `checkpoints.hf_tasks`): the head,
  `id2label` and the tokenizer's vocabulary and casing;
- pre-trained (Google, Hugging Face, pre-training run): a new head on the encoder.
A `num_classes` (or class) that disagrees with a fine-tuned head is an error before any weight is
read.
"""

import os
import warnings

import keras
from absl import logging

from keras_bert import presets
from keras_bert.checkpoints import formats, hf_tasks, huggingface, task_model
from keras_bert.checkpoints.init_checkpoint import load_init_checkpoint
from keras_bert.text.preprocessor import BertPreprocessor
from keras_bert.text.tokenizer import BertTokenizer

DEFAULT_SEQ_LENGTH = 128
_UNUSED = "variables not used by the model"  # `weights.warn_unused`'s words.
_CLASSIFIERS = ("classification", "regression")


def kind_of(path):
    """ "keras" (a .keras file), "task" (our model/ directory), "hf_task" (a fine-tuned Hugging
    Face directory) or "pretrained"."""
    path = os.fspath(path)
    if path.endswith(presets.KERAS_FILE) and os.path.isfile(path):
        return "keras"
    if task_model.find_task_model(path) is not None:
        return "task"
    if os.path.isdir(path) and hf_tasks.architecture_of(path) is not None:
        return "hf_task"
    return "pretrained"


def load_tokenizer(preset, **kwargs):
    """The `BertTokenizer` of a preset (vocabulary and casing); kwargs override (lower_case=...)."""
    vocabulary, lower_case = vocabulary_and_casing(presets.resolve(preset))
    kwargs.setdefault("lower_case", lower_case)
    return BertTokenizer(vocabulary, **kwargs)


def load_preprocessor(preset, seq_length=None, **kwargs):
    """The `BertPreprocessor` of a preset: its tokenizer, and seq_length (default: a fine-tuned
    model's training length, else 128)."""
    path = presets.resolve(preset)
    kind = kind_of(path)
    if kind == "keras":
        model = keras.saving.load_model(path)
        if getattr(model, "preprocessor", None) is not None and seq_length is None:
            return model.preprocessor
    if seq_length is None and kind == "task":
        seq_length = task_model.read_task_info(task_model.find_task_model(path))["seq_length"]
    return BertPreprocessor(
        load_tokenizer(path), seq_length=seq_length or DEFAULT_SEQ_LENGTH, **kwargs
    )


def vocabulary_and_casing(path):
    """(tokens, lower_case) of a resolved preset path of any kind."""
    kind = kind_of(path)
    if kind == "keras":
        tokenizer = keras.saving.load_model(path).preprocessor.tokenizer
        return tokenizer.vocabulary, tokenizer.lower_case
    if kind == "task":
        directory = task_model.find_task_model(path)
        info = task_model.read_task_info(directory)
        return os.path.join(directory, info.get("vocab_file", task_model.VOCAB_NAME)), info[
            "lower_case"
        ]
    if kind == "hf_task" or formats.detect_format(path) == "huggingface":
        return hf_tasks.vocabulary_and_casing(huggingface.directory_of(path))
    init = load_init_checkpoint(path)  # Google and pre-training runs: their own rules.
    return init.vocabulary, init.lower_case


def load_backbone(preset, heads=False, **kwargs):
    """A `BertEncoder` (or with `heads` a `BertPretrainer`) from a preset; kwargs go to
    `checkpoints.load_encoder` / `load_pretrainer` (dtype=...)."""
    from keras_bert import checkpoints

    path = presets.resolve(preset)
    kind = kind_of(path)
    if kind in ("keras", "task"):
        if heads:
            raise ValueError(f"{preset} is a fine-tuned task model: it has no pre-training heads.")
        model = (
            keras.saving.load_model(path)
            if kind == "keras"
            else task_model.load_task_model(task_model.find_task_model(path))[0]
        )
        return model.encoder
    loader = checkpoints.load_pretrainer if heads else checkpoints.load_encoder
    return loader(path, **kwargs)


def load_task(cls, preset, seq_length=None, **kwargs):
    """A task model of class `cls` from a preset, with its preprocessor (see the module).

    Args:
        cls: a `keras_bert.models.task_models` class.
        preset: see `keras_bert.presets`.
        seq_length: int or None, the preprocessor's (default: the fine-tuned model's, else 128
            or the encoder's max_position_embeddings if smaller).
        **kwargs: the class's arguments (num_classes=..., dropout=...), and `labels` (list, one
            per class) and `text_pair` (bool: inputs are text pairs) for the exported answers.

    Raises:
        ValueError: a fine-tuned model of another class, or a num_classes its head disagrees with.
    """
    path = presets.resolve(preset)
    kind = kind_of(path)
    facts = {k: kwargs.pop(k) for k in ("labels", "text_pair") if k in kwargs}
    if kind == "keras":
        model = keras.saving.load_model(path)
        _check_fine_tuned(cls, model, kwargs, path)
        _check_text_pair(model.task_facts, facts, path)
        return model
    if kind == "task":
        model, info, vocab_file = task_model.load_task_model(task_model.find_task_model(path))
        _check_fine_tuned(cls, model, kwargs, path)
        model.task_facts = _facts_of_info(info)
        _check_text_pair(model.task_facts, facts, path)
        model.preprocessor = BertPreprocessor(
            BertTokenizer(vocab_file, lower_case=info["lower_case"]),
            seq_length=seq_length or info["seq_length"],
        )
        return model
    if kind == "hf_task":
        model, vocabulary, lower_case = _load_hf_task(cls, path, kwargs, facts)
    else:
        init = load_init_checkpoint(path)
        model = cls(init.encoder, **kwargs)
        vocabulary, lower_case = init.vocabulary, init.lower_case
        model.task_facts = model.default_facts(**facts)
    # The default length never exceeds what the encoder's position table holds.
    longest = model.encoder.config.max_position_embeddings
    model.preprocessor = BertPreprocessor(
        BertTokenizer(vocabulary, lower_case=lower_case),
        seq_length=seq_length or min(DEFAULT_SEQ_LENGTH, longest),
    )
    return model


def load_task_class(path, **kwargs):
    """The task model of a fine-tuned Hugging Face directory, of the class its architecture
    names (`hf_tasks.ARCHITECTURES`), with its preprocessor."""
    from keras_bert.models import task_models

    arch = hf_tasks.ARCHITECTURES[hf_tasks.read_facts(path).architecture]
    return load_task(getattr(task_models, arch.model_class), path, **kwargs)


def _load_hf_task(cls, path, kwargs, facts):
    """(model, vocabulary, lower_case) of a fine-tuned Hugging Face directory."""
    hf = hf_tasks.read_facts(path)
    arch = hf_tasks.ARCHITECTURES[hf.architecture]
    if cls.__name__ != arch.model_class:
        raise ValueError(
            f"{path} is a {hf.architecture}: load it with {arch.model_class}.from_preset, not "
            f"{cls.__name__}."
        )
    units = hf_tasks.head_units(hf.architecture, hf)
    if arch.model_class in ("BertClassifier", "BertTokenClassifier"):
        _check_units(kwargs.setdefault("num_classes", units), units, path)
    kernel, bias = hf_tasks.read_head(path, hf.architecture)
    with warnings.catch_warnings():  # The head is read here; token and span models have no pooler.
        warnings.filterwarnings("ignore", f".*{_UNUSED}: {arch.head_key}", UserWarning)
        if not arch.pooler:
            warnings.filterwarnings("ignore", ".*no pooler.dense", UserWarning)
        model = cls(huggingface.load(path), **kwargs)
    hf_tasks.set_head(model, hf.architecture, kernel, bias)
    facts.setdefault("labels", hf.labels)
    if hf.architecture == "BertForSequenceClassification":
        facts["text_pair"] = _hf_text_pair(path, hf, facts.get("text_pair"))
    model.task_facts = model.default_facts(**facts)
    if hf.problem == "regression":
        model.task_facts = {**model.task_facts, "problem": "regression", "labels": None}
    return model, hf.vocabulary, hf.lower_case


def _hf_text_pair(path, hf, asked):
    """Whether a Hugging Face sequence classifier reads pairs: `asked` (text_pair=...), else what
    its config.json says (`hf_tasks.text_pair_of`), else None with a notice (one text).

    Raises:
        ValueError: `asked` disagrees with config.json.
    """
    if asked is not None and hf.text_pair is not None and bool(asked) != hf.text_pair:
        raise ValueError(
            f"text_pair={asked} disagrees with {path}/config.json, whose {hf.text_pair_why} says "
            f"it reads {'sentence pairs' if hf.text_pair else 'single texts'}."
        )
    if asked is None and hf.text_pair is None:
        logging.warning(
            "%s: nothing in this Hugging Face directory says whether it was fine-tuned on single "
            "texts or sentence pairs; taking single texts (exports: one input, text). For pairs "
            "pass text_pair=True (keras-bert-export --text_pair), or fit it on pairs.",
            path,
        )
    return hf.text_pair if asked is None else bool(asked)


def _check_text_pair(model_facts, facts, path):
    """text_pair=... for a model fine-tuned by us must agree with its recorded text inputs."""
    asked = facts.get("text_pair")
    inputs = (model_facts or {}).get("text_inputs")
    if asked is None or inputs is None or (model_facts or {}).get("problem") not in _CLASSIFIERS:
        return
    if bool(asked) != (len(inputs) == 2):
        raise ValueError(
            f"text_pair={asked} disagrees with {path}, fine-tuned on {inputs}: drop text_pair."
        )


def _check_fine_tuned(cls, model, kwargs, path):
    if not isinstance(model, cls):
        raise ValueError(
            f"{path} holds a fine-tuned {type(model).__name__}: load it with "
            f"{type(model).__name__}.from_preset, not {cls.__name__}."
        )
    if "num_classes" in kwargs and hasattr(model, "num_classes"):
        _check_units(kwargs["num_classes"], model.num_classes, path)
    unexpected = sorted(set(kwargs) - {"num_classes"})
    if unexpected:
        raise ValueError(f"{path} is fine-tuned: its head is fixed; drop {unexpected}.")


def _check_units(asked, found, path):
    if int(asked) != int(found):
        raise ValueError(
            f"num_classes={asked} disagrees with the fine-tuned head of {path}, which has "
            f"{found} classes; drop num_classes (or pass {found}) to keep its head, or start "
            "from the pre-trained encoder for a new one."
        )


def _facts_of_info(info):
    """The task facts (see `BertTask.task_facts`) of a task.json."""
    return {k: v for k, v in info.items() if k not in ("model_file", "vocab_file")}
