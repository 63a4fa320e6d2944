"""The loader behind every `from_preset`: a preset (`keras_bert.presets.resolve`) -> a tokenizer,
preprocessor, encoder, pre-trainer or task model with its preprocessor attached, of the class it
is handed (keras-hub's preset loader: `Class.from_preset` passes `cls`).

Nothing here imports a model or a text class. A tokenizer class is built from a vocabulary and
casing; a preprocessor class from its `tokenizer_cls`; an encoder class from a `BertConfig`; a
pre-trainer class on its `backbone_cls`; a task class on its `backbone_cls`, with its
`preprocessor_cls`. A saved `.keras` preset and a fine-tuned `model/` directory find their class
through Keras' registry, as `keras.saving.load_model` does; so does a fine-tuned Hugging Face
directory, which names its class (`hf_tasks.ARCHITECTURES`).

A task model comes from one of three kinds of preset:
- fine-tuned by us: a `model/` directory (task.json, model.keras, vocab.txt) or a `.keras` file
  saved with its preprocessor: the head, labels and casing are restored;
- fine-tuned by Hugging Face (`BertFor...` in config.json: `checkpoints.hf_tasks`): the head,
  `id2label` and the tokenizer's vocabulary and casing;
- pre-trained (Google, Hugging Face, pre-training run): a new head on the encoder.
A `num_classes` (or class) that disagrees with a fine-tuned head is an error before any weight is
read. `BertTask.from_preset` reads fine-tuned presets of any task class.
"""

import os
import warnings

import keras
from absl import logging

from keras_bert import _saving, presets
from keras_bert.checkpoints import formats, hf_tasks, huggingface, task_model
from keras_bert.checkpoints.vocabulary import read_vocabulary

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


def load_tokenizer(cls, preset, **kwargs):
    """A tokenizer of class `cls` (`BertTokenizer`) with a preset's vocabulary and casing; kwargs
    override (lower_case=...)."""
    vocabulary, lower_case = vocabulary_and_casing(presets.resolve(preset))
    kwargs.setdefault("lower_case", lower_case)
    return cls(vocabulary, **kwargs)


def load_preprocessor(cls, preset, seq_length=None, **kwargs):
    """A preprocessor of class `cls` (`BertPreprocessor`) of a preset: its tokenizer (of
    `cls.tokenizer_cls`), and seq_length (default: a fine-tuned model's training length, else
    128)."""
    path = presets.resolve(preset)
    kind = kind_of(path)
    if kind == "keras":
        model = keras.saving.load_model(path)
        if getattr(model, "preprocessor", None) is not None and seq_length is None:
            return model.preprocessor
    if seq_length is None and kind == "task":
        seq_length = task_model.read_task_info(task_model.find_task_model(path))["seq_length"]
    return cls(
        load_tokenizer(cls.tokenizer_cls, path),
        seq_length=seq_length or DEFAULT_SEQ_LENGTH,
        **kwargs,
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
    vocabulary = read_vocabulary(path)  # Google and pre-training runs: their own rules.
    return vocabulary.tokens, vocabulary.lower_case


def load_backbone(cls, preset, dtype=None, **kwargs):
    """An encoder of class `cls` (`BertEncoder`) from a preset: a fine-tuned one's encoder, else
    a checkpoint's; kwargs as `keras_bert.checkpoints.load_encoder`'s (format=, config=,
    allow_pickle=)."""
    path = presets.resolve(preset)
    if kind_of(path) in ("keras", "task"):
        return _fine_tuned(path).encoder
    return formats.load(path, formats.builder(cls, dtype=dtype), **kwargs)


def load_pretrainer(cls, preset, dtype=None, **kwargs):
    """A pre-trainer of class `cls` (`BertPretrainer`, on its `backbone_cls`) from a pre-trained
    preset; kwargs as `keras_bert.checkpoints.load_pretrainer`'s (next_sentence=, ...).

    Raises:
        ValueError: a fine-tuned preset (it has no pre-training heads).
    """
    path = presets.resolve(preset)
    if kind_of(path) in ("keras", "task"):
        raise ValueError(f"{preset} is a fine-tuned task model: it has no pre-training heads.")
    build = formats.builder(cls.backbone_cls, cls, dtype=dtype)
    return formats.load(path, build, heads=True, **kwargs)


def _fine_tuned(path):
    """The task model of a `.keras` file or a fine-tuned `model/` directory."""
    if kind_of(path) == "keras":
        return keras.saving.load_model(path)
    return task_model.load_task_model(task_model.find_task_model(path))[0]


def load_task(cls, preset, seq_length=None, **kwargs):
    """A task model of class `cls` from a preset, with its preprocessor (see the module).

    Args:
        cls: a `keras_bert.models.task.BertTask` class (`BertTask` itself: a fine-tuned preset of
            any task class).
        preset: see `keras_bert.presets`.
        seq_length: int or None, the preprocessor's (default: the fine-tuned model's, else 128
            or the encoder's max_position_embeddings if smaller).
        **kwargs: the class's arguments (num_classes=..., dropout=...), and `labels` (list, one
            per class) and `text_pair` (bool: inputs are text pairs) for the exported answers.

    Raises:
        ValueError: a fine-tuned model of another class, or a num_classes its head disagrees with;
            a pre-trained preset for `BertTask` itself.
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
        model.preprocessor = _preprocessor(
            cls, vocab_file, info["lower_case"], seq_length or info["seq_length"]
        )
        return model
    if kind == "hf_task":
        model, vocabulary, lower_case = _load_hf_task(cls, path, kwargs, facts)
    else:
        if cls.problem is None:
            raise ValueError(
                f"{preset} is a pre-trained checkpoint: {cls.__name__}.from_preset reads "
                "fine-tuned models; call a task model class (BertClassifier, ...) for a new head."
            )
        model = cls(load_backbone(cls.backbone_cls, path), **kwargs)
        init = read_vocabulary(path)
        vocabulary, lower_case = init.tokens, init.lower_case
        model.task_facts = model.default_facts(**facts)
    # The default length never exceeds what the encoder's position table holds.
    longest = model.encoder.config.max_position_embeddings
    model.preprocessor = _preprocessor(
        cls, vocabulary, lower_case, seq_length or min(DEFAULT_SEQ_LENGTH, longest)
    )
    return model


def _preprocessor(cls, vocabulary, lower_case, seq_length):
    """The preprocessor a task class `cls` takes (`cls.preprocessor_cls`)."""
    tokenizer = cls.preprocessor_cls.tokenizer_cls(vocabulary, lower_case=lower_case)
    return cls.preprocessor_cls(tokenizer, seq_length=seq_length)


def _load_hf_task(cls, path, kwargs, facts):
    """(model, vocabulary, lower_case) of a fine-tuned Hugging Face directory, of the class its
    architecture names (found in Keras' registry: `cls` or a subclass of it)."""
    hf = hf_tasks.read_facts(path)
    arch = hf_tasks.ARCHITECTURES[hf.architecture]
    if kwargs.get("pooling", "cls") != "cls":
        raise ValueError(
            f"{path} is a fine-tuned {hf.architecture}, whose head reads [CLS] through the "
            f"pooler: drop pooling={kwargs['pooling']!r}."
        )
    named = _saving.registered_class(arch.model_class)
    if not issubclass(named, cls):
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
        model = named(huggingface.load(path, formats.builder(named.backbone_cls)), **kwargs)
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
