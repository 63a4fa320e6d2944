"""Writes the fine-tuned Hugging Face task directories of tests/checkpoints/hf_tasks/ with
transformers (tiny seeded models), and what transformers answers on a few texts (expected.json:
the tokenizer's ids and the model's logits), so the default test suite needs no torch.

    .venv/bin/python tests/checkpoints/make_hf_task_fixtures.py [NAME ...]  # torch, transformers

With names, only those directories are written again (the others keep their files).

transformers v5's `save_pretrained` writes tokenizer.json (no vocab.txt); the "pairs" directory is
cased (its tokenizer.json's normalizer says so), the others uncased. Nothing in "pairs" says it
reads sentence pairs (as most fine-tuned directories); "stsb" says so as transformers' run_glue
writes it (config.json's `finetuning_task`). The "*_scaled" directories have the magnitudes of a
fine-tuned model (hidden size 32, the encoder's weights drawn with a standard deviation of 0.1,
the task head's with 0.2, the pooler's with 0.5):
logits of several units, where float noise between an eager run and an optimized graph exceeds a
fixed tolerance of 1e-5.
"""

import json
import os
import shutil
import sys

import torch
import transformers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_tasks")
SEQ_LENGTH = 24
WORDS = (
    "the a is was of and to in film movie good bad great awful fine plot actor "
    "who where paris london john mary lives loved hated it what city play ##s ##ed ##ing , . ?"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "The", "Paris", "John"]
TEXTS = ["The film was great.", "John lives in Paris", "an awful , awful plot", "fine"]
PAIRS = ["Mary loved it", "where is London ?", "the movie", "plots"]
CASES = {
    # name: (architecture, labels or None, problem_type, lower_case)
    "pairs": (
        "BertForSequenceClassification",
        ["contradiction", "entailment", "neutral"],
        None,
        False,
    ),
    "regression": ("BertForSequenceClassification", None, "regression", True),
    "tokens": ("BertForTokenClassification", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], None, True),
    "qa": ("BertForQuestionAnswering", None, None, True),
    "choice": ("BertForMultipleChoice", None, None, True),
    "stsb": ("BertForSequenceClassification", None, "regression", True),
    "tokens_scaled": (
        "BertForTokenClassification",
        ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"],
        None,
        True,
    ),
    "qa_scaled": ("BertForQuestionAnswering", None, None, True),
    "pairs_scaled": ("BertForSequenceClassification", ["no", "yes"], None, True),
}
SCALED = {
    "hidden_size": 32,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "initializer_range": 0.1,  # The encoder's weights, drawn larger than a fresh model's 0.02.
}
HEAD_STDDEV = 0.2  # A fine-tuned head's weights (all-MiniLM-L6-v2 on CoNLL-2003: logits up to 5).
PAIR_CASES = ("pairs", "qa", "stsb", "qa_scaled", "pairs_scaled")
FINETUNING_TASKS = {"stsb": "stsb"}  # As run_glue.py writes it: AutoConfig(finetuning_task=...).


def _config(labels, problem_type, finetuning_task=None, scaled=False):
    sizes = SCALED if scaled else {"hidden_size": 16, "num_attention_heads": 2}
    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        num_hidden_layers=2,
        max_position_embeddings=64,
        **{"intermediate_size": 32, **sizes},
    )
    if finetuning_task:
        config.finetuning_task = finetuning_task
    if labels:
        config.id2label = dict(enumerate(labels))
        config.label2id = {label: i for i, label in enumerate(labels)}
    elif problem_type == "regression":
        config.num_labels = 1
        config.problem_type = "regression"
    return config


def _tokenizer(lower_case):
    vocab = {token: i for i, token in enumerate(VOCAB)}
    return transformers.BertTokenizer(vocab=vocab, do_lower_case=lower_case)


def _encode(tokenizer, name):
    kwargs = dict(padding="max_length", max_length=SEQ_LENGTH, truncation=True, return_tensors="pt")
    if name in PAIR_CASES:
        return tokenizer(TEXTS, PAIRS, **kwargs)
    if name == "choice":  # Each text against each of the PAIRS: [B, K, S].
        flat = tokenizer([t for t in TEXTS for _ in PAIRS], PAIRS * len(TEXTS), **kwargs)
        return {k: v.view(len(TEXTS), len(PAIRS), SEQ_LENGTH) for k, v in flat.items()}
    return tokenizer(TEXTS, **kwargs)


def _scale_head(model):
    """The task head's weights drawn again with `HEAD_STDDEV` (a fine-tuned head's magnitude),
    the pooler's with 0.5 (its tanh near +-1, as after fine-tuning)."""
    head = model.classifier if hasattr(model, "classifier") else model.qa_outputs
    pooler = getattr(getattr(model, "bert", None), "pooler", None)
    layers = [(head, HEAD_STDDEV)] + ([(pooler.dense, 0.5)] if pooler is not None else [])
    with torch.no_grad():
        for layer, stddev in layers:
            layer.weight.normal_(0.0, stddev)
            layer.bias.normal_(0.0, stddev)


def main(names=()):
    if not names:
        shutil.rmtree(OUT, ignore_errors=True)
    for seed, (name, (architecture, labels, problem_type, lower_case)) in enumerate(CASES.items()):
        if names and name not in names:
            continue
        torch.manual_seed(seed)
        scaled = name.endswith("_scaled")
        config = _config(labels, problem_type, FINETUNING_TASKS.get(name), scaled)
        model = getattr(transformers, architecture)(config).eval()
        if scaled:
            _scale_head(model)
        tokenizer = _tokenizer(lower_case)
        inputs = _encode(tokenizer, name)
        with torch.no_grad():
            outputs = model(**inputs)
        expected = {"input_ids": inputs["input_ids"].tolist()}
        expected["token_type_ids"] = inputs["token_type_ids"].tolist()
        if name.startswith("qa"):
            expected["start_logits"] = outputs.start_logits.tolist()
            expected["end_logits"] = outputs.end_logits.tolist()
        else:
            expected["logits"] = outputs.logits.tolist()
        directory = os.path.join(OUT, name)
        shutil.rmtree(directory, ignore_errors=True)
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        expected.update(texts=TEXTS, pairs=PAIRS, transformers=transformers.__version__)
        with open(os.path.join(directory, "expected.json"), "w", encoding="utf-8") as f:
            json.dump(expected, f)
        print(name, sorted(os.listdir(directory)))


if __name__ == "__main__":
    main(sys.argv[1:])
