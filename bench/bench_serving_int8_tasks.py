"""SQuAD and NER int8 SavedModels against float32, on real dev data: answers kept (the TFLite
int8 bar's metrics, `bench_tflite_tasks.py`), and metrics against gold.

The models are fine-tuned `model/` directories: `--squad_model` (SQuAD v1.1, with `--squad_data`
a dev JSON it was not trained on) and `--conll_model` (CoNLL-2003, with `--conll_data`); either
may be left out (`--help` gives the commands that make them; the data default to the real data
folder's dev sets). Each is exported by `export_saved_model` in float32 and int8 (one int8 export
per `--float_layers` regex: the Dense layers, by path, kept in float; "default": the module's
`int8_saved_model.FLOAT_LAYERS`), reloaded, and `serving_default` answers every input (raw text
in, batches of 16).

- SQuAD: answers kept, the share of questions whose answer text (and, a second figure, its
  character offsets) equals float32's; the mean F1 of the answers against float32's; exact
  match and F1 against the gold answers (the official v1.1 evaluation).
- NER: entities kept, the share of sentences whose entity list (text, type, start and end
  character) equals float32's; the micro F1 of the entities against float32's; entity F1
  against the gold tags (seqeval).

    .venv/bin/python bench/bench_serving_int8_tasks.py --squad_model runs/squad/model
        [--squad_data held_out-v1.1.json] --conll_model runs/conll/model [--conll_data held_out.txt]
        [--questions 0] [--sentences 0] [--float_layers default --float_layers 'REGEX']

Measured 2026-11-27 (TensorFlow 2.20, 2 shared cores; the recipe rows on the final code):
all-MiniLM-L6-v2 fine-tuned on the first half of each official dev set (SQuAD v1.1: articles
1-24, 5,696 questions, 2 epochs, lr 1e-4, EM 51.8 / F1 65.0 on the rest; CoNLL-2003: documents
1-108, 3 epochs, lr 5e-5, entity F1 74.6), measured on the other half (4,874 questions, 1,549
sentences):

| int8 SavedModel against float32 | answers / entity lists kept | F1 vs float32 | gold F1 |
|---|---|---|---|
| SQuAD, per row, feed-forward outputs float (the recipe) | 97.58% | 98.5 | 65.1 (float 65.0) |
| SQuAD, every input per row, every Dense int8 | 96.64% | 97.8 | 64.9 |
| SQuAD, per tensor but the feed-forward output (earlier code) | 92.59% | 95.0 | 65.1 |
| CoNLL-2003, every input per row (the export's recipe) | 98.13% | 99.1 | 74.8 (float 74.6) |
| CoNLL-2003, per tensor but the feed-forward output (earlier) | 96.13% | 98.0 | 74.6 |

With every Dense in int8, SQuAD's answers kept moved between 96.57% and 97.05% across equivalent
rewrites of the graph (int8 rounding makes small changes grow through the layers): one run is one
draw, so the export keeps SQuAD's feed-forward outputs float for a margin.
The same models' TFLite int8 (`bench_tflite_tasks.py`): SQuAD 97.50% (first 800 questions;
per-row inputs give 96.6-97.3% there), CoNLL-2003 98.39%.
"""

import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402
from bench_tflite_tasks import conll_inputs, entity_overlap, squad_answers, squad_inputs  # noqa: E402

BATCH = 16  # Inputs per serving_default call.


def export_all(model_dir, directory, float_layers):
    """name -> SavedModel version path: "float32", and "int8" (+ " float: REGEX") per regex."""
    from keras_bert.export import int8_saved_model, saved_model
    from keras_bert.export.source import load_source

    paths = {
        "float32": saved_model.export_saved_model(
            model_dir, os.path.join(directory, "f"), warmup_requests=False
        )
    }
    for i, regex in enumerate(float_layers):
        name = "int8" if regex == "default" else f"int8 float: {regex}"
        regex = None if regex == "default" else regex  # The kind's own.
        start = time.time()
        source = int8_saved_model.int8_source(load_source(model_dir, mlm=False), float_layers=regex)
        paths[name] = saved_model.write_saved_model(
            source, os.path.join(directory, str(i)), warmup_requests=False
        )
        print(f"exported {name} in {time.time() - start:.0f} s", flush=True)
    return paths


def answer_all(path, rows, read):
    """`read`(serving_default's outputs) for every row, in batches of BATCH."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the tokenizer's ops)

    function = tf.saved_model.load(path).signatures["serving_default"]
    answers = []
    for i in range(0, len(rows), BATCH):
        batch = rows[i : i + BATCH]
        out = function(**{k: tf.constant([r[k] for r in batch]) for k in batch[0]})
        answers += read({k: v.numpy() for k, v in out.items()})
    return answers


def quality(task, examples, got, want):
    """The table cells of one export's answers `got` against float32's `want`."""
    from keras_bert.tasks.ner.task import entity_metrics
    from keras_bert.tasks.squad.metrics import evaluate_v1, f1_score, gold_answers

    kept = np.mean([a == b for a, b in zip(got, want)])
    if task == "squad":
        text_kept = np.mean([a[0] == b[0] for a, b in zip(got, want)])
        overlap = np.mean([f1_score(a[0], b[0]) for a, b in zip(got, want)])
        score = evaluate_v1(gold_answers(examples), {e.qas_id: a[0] for e, a in zip(examples, got)})
        return [f"{text_kept:.2%}", f"{kept:.2%}", f"{100 * overlap:.1f}"] + [
            f"{score['exact_match']:.1f}",
            f"{score['f1']:.1f}",
        ]
    predicted = [common.word_tags(e.words, a) for e, a in zip(examples, got)]
    f1 = entity_metrics([e.tags for e in examples], predicted, ())["f1"]
    return [f"{kept:.2%}", f"{100 * entity_overlap(got, want):.1f}", f"{100 * f1:.1f}"]


def measure(task, args, directory):
    """The table of one task: each export's answers against float32's and gold."""
    if task == "squad":
        examples, rows = squad_inputs(args.squad_data, args.questions)
        model_dir, read = args.squad_model, squad_answers
        header = ["answer text kept", "answer + offsets kept", "F1 vs float32", "EM", "F1"]
    else:
        examples, rows = conll_inputs(args.conll_data, args.sentences)
        model_dir, read = args.conll_model, common.ner_answers
        header = ["entities kept", "entity F1 vs float32", "entity F1"]
    paths = export_all(model_dir, directory, args.float_layers or ["default"])
    answers = {}
    for name, path in paths.items():
        start = time.time()
        answers[name] = answer_all(path, rows, read)
        print(f"{task} {name}: {len(rows)} inputs in {time.time() - start:.0f} s", flush=True)
    table = [[name, *quality(task, examples, a, answers["float32"])] for name, a in answers.items()]
    return len(rows), common.format_table(["SavedModel", *header], table)


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n\n")[0])
    common.add_task_args(parser, "A file it was not trained on")
    parser.add_argument("--questions", type=int, default=0, help="SQuAD questions (0: all).")
    parser.add_argument("--sentences", type=int, default=0, help="CoNLL sentences (0: all).")
    parser.add_argument(
        "--float_layers",
        action="append",
        help="A regex of Dense layer paths kept float (repeat: one int8 export each; "
        "default: the module's).",
    )
    args = parser.parse_args(argv)
    args.tasks = common.task_args(parser, args)
    return args


def main(argv=None):
    args = parse_args(argv)
    tasks = args.tasks
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            inputs, text = measure(task, args, os.path.join(tmp, task))
            print(
                f"\n{getattr(args, f'{task}_model')}: {inputs} inputs of "
                f"{getattr(args, f'{task}_data')}\n"
            )
            print(text, flush=True)


if __name__ == "__main__":
    common.run_and_record(main, __file__)
