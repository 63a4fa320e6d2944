"""SQuAD v1.1 and v2.0 on the fine-tuning runner (paper §4.2, §4.3).

    python -m keras_bert.tasks.finetune --task=squad1 --data_dir=squad \\
        --init_checkpoint=uncased_L-12_H-768_A-12/ --model_dir=runs/squad1 --do_train --do_eval \\
        --do_predict

`--data_dir` holds the official train-v1.1.json and dev-v1.1.json (or -v2.0); `--train_file` and
`--eval_file` replace them. There is no test set: the prediction files are made for the dev file.

The pieces: `squad.data` (the JSON files), `squad.features` (windows, labels), a `BertSpanLabeler`
with the mean of the start and end cross-entropies as its loss, `squad.postprocess` (n-best spans,
the null answer) and `squad.metrics` (the official evaluation scripts' numbers). Prediction files:
`predictions.json` (qid -> answer), `nbest_predictions.json` and, for v2.0, `null_odds.json`
(qid -> null score minus best span score; the official v2.0 script's `--na-prob-file`).

Metrics (percent): `exact_match` and `f1`; v2.0 adds the official HasAns_/NoAns_ figures and the
best no-answer threshold on these predictions (`best_exact`, `best_exact_thresh`, `best_f1`,
`best_f1_thresh`; rerun with `null_score_diff_threshold` = `best_f1_thresh` to use it).
"""

import json
import os

from keras_bert.io_utils import write_atomic
from keras_bert.models.task_models import BertSpanLabeler
from keras_bert.tasks.definition import TaskDefinition
from keras_bert.tasks.squad import data as squad_data
from keras_bert.tasks.squad import metrics as squad_eval
from keras_bert.tasks.squad.data import SquadDataError, SquadExample  # noqa: F401 (the public names)
from keras_bert.tasks.squad.features import encode_examples
from keras_bert.tasks.squad.postprocess import postprocess

# The paper's recipes (§4.2, §4.3): 384 tokens, lr 5e-5; v1.1 3 epochs at batch 32, v2.0 2 at 48.
RECIPES = {
    "1.1": {"seq_length": 384, "learning_rate": 5e-5, "num_train_epochs": 3, "batch_size": 32},
    "2.0": {"seq_length": 384, "learning_rate": 5e-5, "num_train_epochs": 2, "batch_size": 48},
}


class SquadTask(TaskDefinition):
    """SQuAD v1.1 ("squad1") or v2.0 ("squad2") for the fine-tuning runner.

    Args:
        version: "1.1" or "2.0".
        doc_stride: int, tokens between the starts of a context's windows (128).
        max_query_length: int, question tokens kept (64).
        n_best_size: int, candidates per example and per start / end (20).
        max_answer_length: int, the longest answer in tokens (30).
        null_score_diff_threshold: float, v2.0 predicts "" when the null score minus the best
            span score is above it (0.0).

    Example:
    >>> task = SquadTask("1.1")
    >>> task.name, task.recipe["seq_length"]
    ('squad1', 384)
    """

    label_outputs = {"start_positions": "start_logits", "end_positions": "end_logits"}
    token_outputs = ("start_logits", "end_logits")
    main_metric = "f1"
    eval_splits = {"dev": ""}
    predict_splits = {"dev": "predictions.json"}

    def __init__(
        self,
        version="1.1",
        doc_stride=128,
        max_query_length=64,
        n_best_size=20,
        max_answer_length=30,
        null_score_diff_threshold=0.0,
    ):
        if version not in squad_data.VERSIONS:
            raise ValueError(
                f"SQuAD version must be one of {squad_data.VERSIONS}, got {version!r}."
            )
        for name, value in (
            ("doc_stride", doc_stride),
            ("max_query_length", max_query_length),
            ("n_best_size", n_best_size),
            ("max_answer_length", max_answer_length),
        ):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}.")
        self.version = version
        self.name = "squad1" if version == "1.1" else "squad2"
        self.recipe = dict(RECIPES[version])
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)
        self.n_best_size = int(n_best_size)
        self.max_answer_length = int(max_answer_length)
        self.null_score_diff_threshold = float(null_score_diff_threshold)

    @property
    def version_2(self):
        return self.version == "2.0"

    def read(self, data_dir, split, use_tfds=False, file=None):
        if use_tfds:
            return squad_data.read_tfds(self.version, split, data_dir=data_dir)
        return squad_data.read_squad(
            file or squad_data.data_file(data_dir, split, self.version), self.version
        )

    def encode(self, examples, tokenizer, seq_length, training=False):
        return encode_examples(
            examples,
            tokenizer,
            seq_length,
            doc_stride=self.doc_stride,
            max_query_length=self.max_query_length,
            training=training,
        )

    def build_model(self, encoder, dropout):
        del dropout  # The span head has no dropout of its own (as the original's).
        return BertSpanLabeler(encoder)

    def predict(self, examples, features, outputs):
        """`squad.postprocess.Prediction` (predictions, nbest, null_odds) with this task's
        settings."""
        return postprocess(
            examples,
            features,
            outputs,
            n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length,
            version_2=self.version_2,
            null_score_diff_threshold=self.null_score_diff_threshold,
        )

    def evaluate(self, examples, features, outputs):
        prediction = self.predict(examples, features, outputs)
        gold = squad_eval.gold_answers(examples)
        if not self.version_2:
            return squad_eval.evaluate_v1(gold, prediction.predictions)
        result = squad_eval.evaluate_v2(gold, prediction.predictions, na_probs=prediction.null_odds)
        return {"exact_match": result.pop("exact"), "f1": result.pop("f1"), **result}

    def write_predictions(self, split, examples, features, outputs, output_dir):
        prediction = self.predict(examples, features, outputs)
        files = {
            self.predict_splits.get(split, f"predictions_{split}.json"): prediction.predictions,
            "nbest_predictions.json": prediction.nbest,
        }
        if self.version_2:
            files["null_odds.json"] = prediction.null_odds
        paths = []
        for name, value in files.items():
            paths.append(os.path.join(output_dir, name))
            write_atomic(paths[-1], json.dumps(value, indent=2, ensure_ascii=False) + "\n")
        return paths

    def serving_row(self, example):
        return (example.question, example.context)

    def info(self):
        return {
            "problem": "span",
            "squad_version": self.version,
            "text_inputs": ["question", "context"],
            "outputs": list(self.token_outputs),
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "n_best_size": self.n_best_size,
            "max_answer_length": self.max_answer_length,
            "null_score_diff_threshold": self.null_score_diff_threshold,
        }
