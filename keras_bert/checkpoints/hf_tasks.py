"""Fine-tuned Hugging Face task models in and out: `BertForSequenceClassification` (single texts,
pairs, regression by `problem_type`), `BertForTokenClassification`, `BertForQuestionAnswering` and
`BertForMultipleChoice`, with their labels (`id2label`) and the tokenizer's vocabulary and casing
(vocab.txt and tokenizer_config.json, or the tokenizer.json that transformers v5 writes alone).

The one table of this module, `ARCHITECTURES`, maps each architecture to our task model class,
the task's `problem` and its head's key in model.safetensors; the encoder's keys are
`huggingface.HF_NAMES` with the "bert." prefix.

>>> read_facts("hf-sst2-dir").labels                               # doctest: +SKIP
['negative', 'positive']
>>> save_task(model, "out", vocab, lower_case=True, labels=["neg", "pos"])  # doctest: +SKIP
"""

import dataclasses
import json
import os

import numpy as np
import safetensors.numpy

from keras_bert.checkpoints import files, huggingface, weights
from keras_bert.errors import CheckpointError
from keras_bert.io_utils import atomic_files
from keras_bert.text.vocab import load_vocabulary, write_vocabulary

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Whether a sequence classifier reads sentence pairs: nothing standard in a Hugging Face directory
# says so. Ours write TEXT_PAIR_KEY in config.json (transformers keeps unknown keys); transformers'
# run_glue writes `finetuning_task`, whose GLUE names say it.
TEXT_PAIR_KEY = "keras_bert_text_pair"
GLUE_TEXT_PAIR = {
    **dict.fromkeys(("cola", "sst2", "sst-2"), False),
    **dict.fromkeys(("mnli", "mnli-mm", "mrpc", "qnli", "qqp", "rte", "stsb", "sts-b"), True),
    "wnli": True,
}


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One Hugging Face task architecture.

    Attributes:
        model_class: str, our class in `keras_bert.models.task_models`.
        head_key: str, the head's dense layer in the file ("classifier", "qa_outputs").
        head_layer: str, our model's layer of that dense.
        pooler: bool, whether the Hugging Face model has (and writes) a pooler.
    """

    model_class: str
    head_key: str
    head_layer: str
    pooler: bool


ARCHITECTURES = {
    "BertForSequenceClassification": Architecture(
        "BertClassifier", "classifier", "classifier", True
    ),
    "BertForTokenClassification": Architecture(
        "BertTokenClassifier", "classifier", "classifier", False
    ),
    "BertForQuestionAnswering": Architecture("BertSpanLabeler", "qa_outputs", "span_logits", False),
    "BertForMultipleChoice": Architecture("BertMultipleChoice", "classifier", "classifier", True),
}


@dataclasses.dataclass
class TaskFacts:
    """What a fine-tuned directory says beyond its weights.

    Attributes:
        architecture: str, e.g. "BertForSequenceClassification".
        problem: str, as task.json's: "classification", "regression", "token_classification",
            "span" or "multiple_choice".
        labels: list[str] or None, id -> label (`id2label`).
        vocabulary: list[str].
        lower_case: bool.
        text_pair: bool or None, whether a sequence classifier reads sentence pairs, where
            config.json says so (`text_pair_of`); None: it does not say.
        text_pair_why: str, the config.json entry that says so ("" where none does).
    """

    architecture: str
    problem: str
    labels: list | None
    vocabulary: list
    lower_case: bool
    text_pair: bool | None = None
    text_pair_why: str = ""


def architecture_of(directory):
    """The task architecture named by `directory`/config.json, or None for a bare encoder or
    pre-trainer (BertModel, BertForPreTraining, BertForMaskedLM, or no `architectures`).

    Raises:
        ValueError: an architecture we do not have (e.g. RobertaForSequenceClassification),
            naming the ones we read.
    """
    config_path = os.path.join(os.fspath(directory), huggingface.CONFIG_NAME)
    if not os.path.isfile(config_path):
        return None
    names = files.read_json_object(config_path).get("architectures") or []
    for name in names:
        if name in ARCHITECTURES:
            return name
        if name not in ("BertModel", "BertForPreTraining", "BertForMaskedLM"):
            raise ValueError(
                f"{config_path}: architecture {name!r} is not supported; keras_bert reads "
                f"BertModel, BertForPreTraining, BertForMaskedLM and {sorted(ARCHITECTURES)}."
            )
    return None


def read_facts(directory):
    """The `TaskFacts` of a fine-tuned Hugging Face directory (nothing is loaded but JSON and the
    vocabulary).

    Raises:
        ValueError: not a task architecture we read (see `architecture_of`).
        FileNotFoundError: no vocabulary (vocab.txt or tokenizer.json).
    """
    directory = os.fspath(directory)
    name = architecture_of(directory)
    if name is None:
        raise ValueError(
            f"{directory} is not a fine-tuned task model: its config.json names no architecture "
            f"of {sorted(ARCHITECTURES)}."
        )
    config = files.read_json_object(os.path.join(directory, huggingface.CONFIG_NAME))
    problem, labels = _problem_and_labels(name, config)
    vocabulary, lower_case = vocabulary_and_casing(directory)
    pair = text_pair_of(config) if name == "BertForSequenceClassification" else (None, "")
    return TaskFacts(name, problem, labels, vocabulary, lower_case, *pair)


def text_pair_of(config):
    """(bool or None, why) whether a sequence classifier's config.json says it reads sentence
    pairs: our TEXT_PAIR_KEY, else a GLUE `finetuning_task` (transformers' run_glue writes it);
    (None, "") where it says nothing."""
    if isinstance(config.get(TEXT_PAIR_KEY), bool):
        return config[TEXT_PAIR_KEY], f"{TEXT_PAIR_KEY}={config[TEXT_PAIR_KEY]}"
    task = str(config.get("finetuning_task") or "").lower()
    if task in GLUE_TEXT_PAIR:
        return GLUE_TEXT_PAIR[task], f"finetuning_task={config['finetuning_task']!r}"
    return None, ""


def vocabulary_and_casing(directory):
    """(tokens, lower_case) of a Hugging Face directory: vocab.txt or tokenizer.json's WordPiece
    vocabulary; casing by `huggingface.casing`, else from the vocabulary.

    Raises:
        FileNotFoundError: neither vocab.txt nor a WordPiece tokenizer.json.
    """
    from keras_bert.text.vocab import vocabulary_is_uncased

    directory = os.fspath(directory)
    vocab_file = files.vocab_in(directory)
    if vocab_file is not None:
        tokens = load_vocabulary(vocab_file)
    else:
        tokens = huggingface.tokenizer_json_vocabulary(directory)
        if tokens is None:
            raise FileNotFoundError(
                f"No vocabulary in {directory}: looked for {files.VOCAB_NAME} and a WordPiece "
                f"{huggingface.TOKENIZER_JSON}."
            )
    lower_case, _ = huggingface.casing(directory)
    return tokens, vocabulary_is_uncased(tokens) if lower_case is None else lower_case


def _problem_and_labels(name, config):
    labels = _labels(config)
    if name == "BertForSequenceClassification":
        # problem_type is set by training; a one-unit head without it is a regression too.
        regression = config.get("problem_type") == "regression" or (
            config.get("problem_type") is None and len(labels) == 1
        )
        return ("regression", None) if regression else ("classification", labels)
    if name == "BertForTokenClassification":
        return "token_classification", labels
    if name == "BertForQuestionAnswering":
        return "span", None
    return "multiple_choice", None


def _labels(config):
    """id2label as a list (id order); a default "LABEL_<i>" list of num_labels without one."""
    id2label = config.get("id2label")
    if isinstance(id2label, dict) and id2label:
        return [str(id2label[k]) for k in sorted(id2label, key=int)]
    return [f"LABEL_{i}" for i in range(int(config.get("num_labels", 2)))]


def head_units(name, facts):
    """The head's output units for architecture `name`."""
    if name == "BertForQuestionAnswering":
        return 2
    if name == "BertForMultipleChoice" or facts.problem == "regression":
        return 1
    return len(facts.labels)


def read_head(directory, name):
    """(kernel [H, units], bias [units]) of the task head in `directory`'s weights.

    Raises:
        CheckpointError: the head's weights are missing.
    """
    tensors, source = huggingface.read_tensors(os.fspath(directory))
    key = ARCHITECTURES[name].head_key
    if f"{key}.weight" not in tensors or f"{key}.bias" not in tensors:
        raise CheckpointError(
            f"{source}: no {key}.weight / {key}.bias: the {name} head is missing."
        )
    return tensors[f"{key}.weight"].T, tensors[f"{key}.bias"]


def set_head(model, name, kernel, bias):
    """Assigns the head's (kernel, bias) to the task model's head layer, shapes checked."""
    layer = model.get_layer(ARCHITECTURES[name].head_layer)
    expected = tuple(layer.kernel.shape)
    if tuple(kernel.shape) != expected:
        raise CheckpointError(
            f"The {name} head has kernel shape {list(kernel.shape)}, the model expects "
            f"{list(expected)}."
        )
    layer.kernel.assign(np.asarray(kernel, np.float32))
    layer.bias.assign(np.asarray(bias, np.float32))


def save_task(model, path, vocabulary, lower_case, labels=None, overwrite=False, text_pair=None):
    """Writes a task model as a Hugging Face directory that transformers' `AutoModelFor...` and
    `AutoTokenizer` load: config.json (architectures, id2label, problem_type, and for a sequence
    classifier TEXT_PAIR_KEY), model.safetensors, vocab.txt and tokenizer_config.json.

    Args:
        model: `BertClassifier`, `BertTokenClassifier`, `BertSpanLabeler` or `BertMultipleChoice`.
        path: output directory (see `keras_bert.io_utils.atomic_files`).
        vocabulary: list[str] or a vocab.txt path.
        lower_case: bool, the tokenizer's casing.
        labels: list of labels (id order) or None: "LABEL_<i>"; ignored for regression, spans
            and multiple choice.
        overwrite: bool. Replace these files where they exist.
        text_pair: bool or None. A sequence classifier reads sentence pairs (None: as its
            `task_facts`' text_inputs say, where it has them).
    """
    name = _architecture_for(model)
    if getattr(model, "pooling", "cls") != "cls":
        raise ValueError(
            f"{name} reads [CLS] through the pooler: a {type(model).__name__} with "
            f"pooling={model.pooling!r} has no Hugging Face form (save it as .keras, or export it)."
        )
    arch = ARCHITECTURES[name]
    encoder = model.encoder
    arrays = {
        huggingface.PREFIX + k: v
        for k, v in weights.export_arrays(huggingface.HF_NAMES, encoder).items()
        if arch.pooler or not k.startswith("pooler.")
    }
    head = model.get_layer(arch.head_layer)
    arrays[f"{arch.head_key}.weight"] = np.ascontiguousarray(head.kernel.numpy().T, np.float32)
    arrays[f"{arch.head_key}.bias"] = np.asarray(head.bias.numpy(), np.float32)
    config = {**encoder.config.to_hf_dict(), "architectures": [name]}
    config.update(_label_config(name, model, labels))
    text_pair = _text_pair_of_model(model) if text_pair is None else text_pair
    if name == "BertForSequenceClassification" and text_pair is not None:
        config[TEXT_PAIR_KEY] = bool(text_pair)
    tokens, what = files.vocab_tokens(vocabulary)
    names = [huggingface.CONFIG_NAME, huggingface.WEIGHTS_NAME, files.VOCAB_NAME]
    names.append(huggingface.TOKENIZER_CONFIG_NAME)
    with atomic_files(path, names, overwrite) as tmp:
        write_vocabulary(
            tokens, os.path.join(tmp, files.VOCAB_NAME), encoder.config.vocab_size, origin=what
        )
        safetensors.numpy.save_file(
            arrays, os.path.join(tmp, huggingface.WEIGHTS_NAME), metadata={"format": "pt"}
        )
        _write_json(os.path.join(tmp, huggingface.CONFIG_NAME), config)
        _write_json(
            os.path.join(tmp, huggingface.TOKENIZER_CONFIG_NAME),
            {
                "do_lower_case": bool(lower_case),
                "tokenize_chinese_chars": True,
                "strip_accents": None,
                "tokenizer_class": "BertTokenizer",
                "model_max_length": encoder.config.max_position_embeddings,
                **dict(
                    zip(
                        ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"),
                        SPECIAL_TOKENS,
                    )
                ),
            },
        )


def _architecture_for(model):
    kind = type(model).__name__
    for name, arch in ARCHITECTURES.items():
        if arch.model_class == kind:
            return name
    raise TypeError(
        f"No Hugging Face architecture for a {kind}; expected one of "
        f"{sorted(a.model_class for a in ARCHITECTURES.values())}."
    )


def _text_pair_of_model(model):
    """True/False where the model's facts record it (`BertTask.default_facts`, `fit`), True for
    two text inputs, else None (one text by default says nothing)."""
    facts = getattr(model, "task_facts", None) or {}
    if isinstance(facts.get("text_pair"), bool):
        return facts["text_pair"]
    return True if len(facts.get("text_inputs") or ()) == 2 else None


def _label_config(name, model, labels):
    if name in ("BertForQuestionAnswering", "BertForMultipleChoice"):
        return {}
    units = int(model.num_classes)
    if name == "BertForSequenceClassification" and units == 1:
        return {
            "problem_type": "regression",
            "id2label": {"0": "LABEL_0"},
            "label2id": {"LABEL_0": 0},
        }
    labels = [str(x) for x in (labels or [f"LABEL_{i}" for i in range(units)])]
    if len(labels) != units:
        raise ValueError(f"{len(labels)} labels for a head of {units} classes: {labels}.")
    extra = (
        {"problem_type": "single_label_classification"}
        if units > 1 and name.endswith("SequenceClassification")
        else {}
    )
    return {
        "id2label": {str(i): label for i, label in enumerate(labels)},
        "label2id": {label: i for i, label in enumerate(labels)},
        **extra,
    }


def _write_json(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
