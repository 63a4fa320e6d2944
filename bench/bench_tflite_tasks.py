"""SQuAD and NER TFLite in the integer quantizations against float32, on real dev data: answers
kept, metrics against gold, latency.

The models are fine-tuned `model/` directories: `--squad_model` (SQuAD v1.1, with `--squad_data`
its dev JSON) and `--conll_model` (CoNLL-2003, with `--conll_data` its dev file); either may be
left out (`--help` gives the commands that make them; the dev files default to the real data
folder's). Each is exported (`keras_bert.export.tflite.export_tflite`) in each of `--quantize`
(default float32, dynamic range, int8 and int8_integer_only, skipped where the kind refuses it;
the integer ones calibrate on the training texts the fine-tuning run recorded in `model/`, or
`--calibration_squad` / `--calibration_conll`, files of rows with texts tab-separated) and run by
the LiteRT interpreter with tensorflow-text's kernels (`--threads` threads), raw text in, the
answer out, on the first `--questions` questions and `--sentences` sentences (0: all).

- SQuAD: answers kept, the share of questions whose answer text (and, a second figure, its
  character offsets) equals the float32 TFLite model's, and the mean F1 of the answers against
  float32's (how far the changed ones moved); exact match and F1 of each against the gold
  answers (the official v1.1 evaluation, `keras_bert.tasks.squad.metrics`).
- NER: entities kept, the share of sentences (words joined by spaces) whose entity list (text,
  type, start and end character) equals the float32 model's, and the micro F1 of the entities
  against float32's; entity F1 against the gold tags (seqeval,
  `keras_bert.tasks.ner.task.entity_metrics`), the entities turned back into word tags.
- Latency: batch 1 over the first `--texts` inputs, one call each, every model called on an input
  before the next (interleaved), over `--repeat` rounds; the table gives the median per input over
  all rounds and the spread of the round totals; the ratios are medians of per-round ratios to
  dynamic range.

    .venv/bin/python bench/bench_tflite_tasks.py --squad_model runs/squad/model
        [--squad_data dev-v1.1.json] --conll_model runs/conll/model [--conll_data dev.txt]
        [--questions 300] [--sentences 300] [--texts 50] [--repeat 3] [--threads 1]
        [--quantize none,dynamic_range,int8,int8_integer_only]
"""

import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402
from bench_tflite import interleaved  # noqa: E402

FLOAT = "none"
BATCH = 16  # Inputs per call when measuring the answers (latency is at batch 1).


def squad_inputs(path, n):
    """(SquadExamples, input rows {question, context}) of a SQuAD v1.1 file, the first n (0:
    all)."""
    from keras_bert.tasks.squad.data import read_squad

    examples = read_squad(path, "1.1")
    examples = examples[:n] if n else examples
    return examples, [{"question": e.question, "context": e.context} for e in examples]


def conll_inputs(path, n):
    """(NerExamples, input rows {text}) of a CoNLL-2003 file, the first n sentences (0: all)."""
    from keras_bert.tasks.ner.task import read_conll

    examples, _ = read_conll(path)
    examples = examples[:n] if n else examples
    return examples, [{"text": " ".join(e.words)} for e in examples]


def squad_answers(out):
    """serving_default outputs -> [(answer text, start_char, end_char)] per question."""
    return [
        (text.decode("utf-8", "replace"), int(start), int(end))
        for text, start, end in zip(out["answer"], out["start_char"], out["end_char"])
    ]


def entity_overlap(got, want):
    """Micro F1 of the entities `got` against `want` (lists per sentence of entity tuples)."""
    both = sum(len(set(a) & set(b)) for a, b in zip(got, want))
    total = sum(len(a) for a in got) + sum(len(b) for b in want)
    return 2 * both / total if total else 1.0


def runner_call(path, threads, read):
    """rows -> answers, for the TFLite model at `path` (`read`: outputs -> answers)."""
    from keras_bert.export import tflite

    runner = tflite.load_interpreter(
        os.path.join(path, tflite.MODEL_FILE), num_threads=threads
    ).get_signature_runner("serving_default")
    return lambda rows: read(
        runner(**{name: tflite.as_strings([r[name] for r in rows]) for name in rows[0]})
    )


def export_all(model_dir, directory, quantizations, calibration):
    """quantize -> version path of each export of `model_dir`."""
    from keras_bert.export import tflite

    paths = {}
    for quantize in quantizations:
        start = time.time()
        try:
            paths[quantize] = tflite.export_tflite(
                model_dir,
                os.path.join(directory, quantize),
                quantize=quantize,
                representative_texts=calibration,
            )
        except ValueError as e:  # A quantization the kind refuses (SQuAD integer-only).
            print(f"skipped {quantize}: {e}", flush=True)
            continue
        print(f"exported {quantize} in {time.time() - start:.0f} s", flush=True)
    return paths


def measure(task, args, directory):
    """The table rows of one task: answers kept, gold metrics, latency, size."""
    from keras_bert.export import tflite
    from keras_bert.tasks.ner.task import entity_metrics
    from keras_bert.tasks.squad.metrics import evaluate_v1, f1_score, gold_answers

    if task == "squad":
        examples, rows = squad_inputs(args.squad_data, args.questions)
        model_dir, calibration, read = args.squad_model, args.calibration_squad, squad_answers
    else:
        examples, rows = conll_inputs(args.conll_data, args.sentences)
        model_dir, calibration, read = args.conll_model, args.calibration_conll, common.ner_answers
    paths = export_all(model_dir, directory, args.quantize.split(","), calibration)
    calls = {q: runner_call(path, args.threads, read) for q, path in paths.items()}
    answers = {}
    for q, call in calls.items():
        start = time.time()
        answers[q] = [a for i in range(0, len(rows), BATCH) for a in call(rows[i : i + BATCH])]
        print(f"{task} {q}: {len(rows)} inputs answered in {time.time() - start:.0f} s", flush=True)
    timed = rows[: args.texts]
    interleaved(calls, timed[:3], 1)  # Warm-up, untimed.
    totals = interleaved(calls, timed, args.repeat)
    base = "dynamic_range" if "dynamic_range" in calls else FLOAT
    want, table = answers[FLOAT], []
    for q in calls:
        ratios = [b / t for b, t in zip(totals[base], totals[q])]
        kept = np.mean([a == b for a, b in zip(answers[q], want)])
        if task == "squad":
            text_kept = np.mean([a[0] == b[0] for a, b in zip(answers[q], want)])
            overlap = np.mean([f1_score(a[0], b[0]) for a, b in zip(answers[q], want)])
            predictions = {e.qas_id: a[0] for e, a in zip(examples, answers[q])}
            score = evaluate_v1(gold_answers(examples), predictions)
            quality = [f"{text_kept:.2%}", f"{kept:.2%}", f"{100 * overlap:.1f}"]
            quality += [f"{score['exact_match']:.1f}", f"{score['f1']:.1f}"]
        else:
            predicted = [common.word_tags(e.words, a) for e, a in zip(examples, answers[q])]
            f1 = entity_metrics([e.tags for e in examples], predicted, ())["f1"]
            quality = [f"{kept:.2%}", f"{100 * entity_overlap(answers[q], want):.1f}"]
            quality.append(f"{100 * f1:.1f}")
        table.append(
            [
                q,
                *quality,
                statistics.median(totals[q]) * 1e3 / len(timed),
                f"{(max(totals[q]) - min(totals[q])) / statistics.median(totals[q]):.0%}",
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
                os.path.getsize(os.path.join(paths[q], tflite.MODEL_FILE)) / 2**20,
            ]
        )
    if task == "squad":
        quality = ["answer text kept", "answer + offsets kept", "F1 vs float32", "EM", "F1"]
    else:
        quality = ["entities kept", "entity F1 vs float32", "entity F1"]
    header = ["model (batch 1)", *quality, "ms/input", "spread", f"speed vs {base}", "MB"]
    return len(rows), len(timed), common.format_table(header, table)


def parse_args(argv=None):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n\n")[0])
    common.add_task_args(parser, "Its dev file")
    parser.add_argument(
        "--calibration_squad", help="Rows question<TAB>context (default: model/'s)."
    )
    parser.add_argument("--calibration_conll", help="Sentences, one a line (default: model/'s).")
    parser.add_argument("--questions", type=int, default=300, help="SQuAD questions (0: all).")
    parser.add_argument("--sentences", type=int, default=300, help="CoNLL sentences (0: all).")
    parser.add_argument("--texts", type=int, default=50, help="Inputs timed at batch 1.")
    parser.add_argument("--repeat", type=int, default=3, help="Interleaved rounds.")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quantize", default="none,dynamic_range,int8,int8_integer_only")
    args = parser.parse_args(argv)
    if FLOAT not in args.quantize.split(","):
        parser.error(f"--quantize must include {FLOAT!r} (the answers are compared with it).")
    args.tasks = common.task_args(parser, args)
    return args


def main(argv=None):
    args = parse_args(argv)
    tasks = args.tasks
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            inputs, timed, text = measure(task, args, os.path.join(tmp, task))
            print(
                f"\n{getattr(args, f'{task}_model')}: {inputs} inputs of "
                f"{getattr(args, f'{task}_data')}; {timed} timed at batch 1, {args.repeat} "
                f"interleaved rounds, {args.threads} thread(s), {os.cpu_count()} CPUs\n"
            )
            print(text, flush=True)


if __name__ == "__main__":
    common.run_and_record(main, __file__)
