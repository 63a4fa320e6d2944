"""The fine-tuned Hugging Face task directories of tests/checkpoints/hf_tasks (written by
transformers: make_hf_task_fixtures.py) and what transformers answered on them (expected.json)."""

import json
import os

import numpy as np

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoints", "hf_tasks")
SEQ_LENGTH = 24


def expected(name):
    """expected.json of the fixture `name`: transformers' ids and logits, the texts."""
    with open(os.path.join(FIXTURES, name, "expected.json"), encoding="utf-8") as f:
        return json.load(f)


def ids(answers):
    """The encoder's inputs (int32 NumPy) of transformers' ids in `answers` (expected.json)."""
    word_ids = np.asarray(answers["input_ids"], np.int32)
    return {
        "input_word_ids": word_ids,
        "input_mask": (word_ids != 0).astype(np.int32),
        "input_type_ids": np.asarray(answers["token_type_ids"], np.int32),
    }
