"""A teacher and its distilled students as TFLite: dev metric against latency and size, for every
quantization in `keras_bert.export.QUANTIZATIONS`, measured side by side in one run.

Each model directory (a fine-tuned or distilled `model/`: GLUE, text_classification, SQuAD,
NER) is exported to TFLite in each quantization (`keras_bert.export.export`; int8 modes
calibrated on the first training texts of --data_dir; a quantization the export refuses for the
task, e.g. int8_integer_only for SQuAD, is skipped with a note). Every export answers the task's
dev set from raw text (LiteRT with tensorflow-text's kernels, batches of 32), scored with the
task's own metric (the main one: MRPC F1; SQuAD F1 of the exported answer strings by the
official script's rules; CoNLL-2003 entity F1 of the exported entities mapped back to the
words). Latency is batch 1 over the first `--texts` dev inputs, one call each; all
(model, quantization) pairs are interleaved in each of `--repeat` rounds. The table gives
medians over all calls with their spread ((max - min) / median), the ratio to the teacher's
export of the same quantization (median of per-round ratios), and the file size; the chart
(`--out`) plots the metric against latency and against size.

    .venv/bin/python bench/bench_students.py --teacher runs/mrpc/model \\
        --students runs/mrpc-3/model [--data_dir ../shared/data/mrpc] \\
        [--texts 50] [--repeat 3] [--threads 1] [--eval_examples 0] [--quantize all]

The teacher runs/mrpc/model is what `make bench-model` makes (all-MiniLM-L6-v2 fine-tuned on
MRPC); a student, `keras-bert-distill --teacher=runs/mrpc/model --student_layers=3
--data_dir=../shared/data/mrpc --model_dir=runs/mrpc-3 --do_train --do_eval`. `--data_dir`
defaults to the real data folder's mrpc/ (its train and dev files). Without --teacher, a tiny
teacher and a 1-layer student are trained here on generated sentiment sentences (seconds; the
shape of the run, not a measurement).
"""

import os
import statistics
import tempfile
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
import numpy as np  # noqa: E402

from keras_bert.export import QUANTIZATIONS  # noqa: E402
from keras_bert.tasks import registry  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(argv):
    """The flags; stops with one line when an input is missing."""
    parser = common.argument_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--teacher",
        help="The teacher's model/ directory, e.g. runs/mrpc/model, which "
        f"{common.mrpc_model_command()} makes (default: a tiny teacher trained here).",
    )
    parser.add_argument("--students", default="", help="Comma-separated students' model/ dirs.")
    parser.add_argument(
        "--data_dir",
        default=common.data_file("mrpc"),
        help=common.data_help("With --teacher: the task's data folder (train and dev files)"),
    )
    parser.add_argument("--texts", type=int, default=50, help="Dev inputs timed at batch 1.")
    parser.add_argument("--repeat", type=int, default=3, help="Interleaved rounds.")
    parser.add_argument("--threads", type=int, default=1, help="TFLite interpreter threads.")
    parser.add_argument(
        "--eval_examples", type=int, default=0, help="Score on the first N dev examples (0: all)."
    )
    parser.add_argument(
        "--quantize", default="all", help="Comma-separated QUANTIZATIONS (default all of them)."
    )
    parser.add_argument("--out", default=os.path.join(HERE, "out", "students.png"))
    args = parser.parse_args(argv)
    if args.teacher:
        common.require(args.teacher, "--teacher", f"run {common.mrpc_model_command()}")
        for student in (s for s in args.students.split(",") if s):
            common.require(student, "--students", "run keras-bert-distill (see --help)")
        common.require_data(args.data_dir, "--data_dir")
    return args


def rows_of(task, examples):
    """The raw-text rows of a task's examples, in serving_default's input order."""
    return [task.serving_row(e) for e in examples]


def input_names(info):
    """serving_default's text inputs (NER takes one `text`: its words joined by spaces)."""
    if info.get("problem") == "token_classification":
        return ("text",)
    return tuple(info.get("text_inputs") or ("text",))


def caller(runner, names):
    """A function: a batch of rows -> serving_default's outputs."""
    from keras_bert.export import tflite

    return lambda rows: runner(
        **{name: tflite.as_strings([r[i] for r in rows]) for i, name in enumerate(names)}
    )


def logits_of(out):
    """Classification or regression outputs -> logits-like [B, C] (log-probabilities, or the
    score as one column)."""
    if "probabilities" in out:
        return np.log(np.maximum(out["probabilities"], 1e-30))
    return np.asarray(out["score"], np.float32).reshape(-1, 1)


def export_all(models, quantizations, calibration, tmp, threads):
    """{(model name, quantization): (signature runner, size in bytes)}; quantizations the export
    refuses for the task's kind (`quantization.UNSUPPORTED_KINDS`) are left out."""
    import keras_bert.export
    from keras_bert.checkpoints.task_model import read_task_info
    from keras_bert.export import quantization, tflite

    runners = {}
    kind = read_task_info(models["teacher"]).get("problem")
    for name, model_dir in models.items():
        for quantize in quantizations:
            if kind in quantization.UNSUPPORTED_KINDS.get(quantize, {}):
                print(f"  skipped {name} {quantize}: refused for {kind!r} models", flush=True)
                continue
            path = keras_bert.export.export(
                model_dir,
                os.path.join(tmp, name, quantize),
                format="tflite",
                quantize=quantize,
                representative_texts=calibration if quantize.startswith("int8") else None,
            )
            file = os.path.join(path, tflite.MODEL_FILE)
            interpreter = tflite.load_interpreter(file, num_threads=threads)
            runners[(name, quantize)] = (
                interpreter.get_signature_runner("serving_default"),
                os.path.getsize(file),
            )
            print(
                f"  exported {name} {quantize}: {os.path.getsize(file) / 2**20:.1f} MB", flush=True
            )
    return runners


def score(task, runner, names, examples):
    """The task's metrics of one export on `examples`, answered from raw text in batches of 32:
    classification and regression through `task.evaluate`; SQuAD's answer strings scored by
    the official v1.1 script's rules; NER's entities mapped back to the words as IOB2 tags and
    scored as conlleval does."""
    from keras_bert.tasks.ner.task import entity_metrics
    from keras_bert.tasks.squad import metrics as squad_metrics

    rows, batches, call = rows_of(task, examples), [], caller(runner, names)
    for i in range(0, len(rows), 32):
        batches.append((examples[i : i + 32], call(rows[i : i + 32])))
    kind = task.info().get("problem")
    if kind == "span":
        answers = {
            e.qas_id: a.decode() for part, out in batches for e, a in zip(part, out["answer"])
        }
        gold = squad_metrics.gold_answers(examples)
        if task.version_2:
            return squad_metrics.evaluate_v2(gold, answers)
        return squad_metrics.evaluate_v1(gold, answers)
    if kind == "token_classification":
        predicted = [
            common.word_tags(e.words, entities)
            for part, out in batches
            for e, entities in zip(part, common.ner_answers(out))
        ]
        return entity_metrics([e.tags for e in examples], predicted, ())
    logits = np.concatenate([logits_of(out) for _, out in batches])
    # One row per example (the export pools windows): the features are the examples themselves.
    one_each = types.SimpleNamespace(example_index=np.arange(len(examples)))
    return {k: float(v) for k, v in task.evaluate(examples, one_each, {"logits": logits}).items()}


def time_rounds(runners, names, rows, repeat):
    """{key: [time_call result per round]}, the keys interleaved within each round."""
    cases = {
        key: (lambda call: lambda: [call([row]) for row in rows])(caller(runner, names))
        for key, (runner, _) in runners.items()
    }
    for fn in cases.values():
        fn()  # Warm-up, untimed.
    rounds = {key: [] for key in cases}
    for index in range(repeat):
        for key, fn in cases.items():
            rounds[key].append(common.time_call(fn, warmup=0, iters=1))
        print(f"  round {index + 1} of {repeat} timed", flush=True)
    return rounds


def table(task, runners, metrics, rounds, n_timed, teacher):
    """The printed rows: model, quantization, metric, ms per input, spread, speed-up vs the
    teacher's same quantization, MB."""
    rows = []
    for (name, quantize), (_, size) in runners.items():
        summary = common.summarize_rounds(rounds[(name, quantize)])
        ratio = statistics.median(
            t["median"] / s["median"]
            for t, s in zip(rounds[(teacher, quantize)], rounds[(name, quantize)])
        )
        rows.append(
            [
                name,
                quantize,
                f"{metrics[(name, quantize)][task.main_metric]:.4f}",
                summary["median"] * 1e3 / n_timed,
                f"{(summary['max'] - summary['min']) / summary['median']:.0%}",
                f"{ratio:.2f}x",
                size / 2**20,
            ]
        )
    return rows


def plot(path, task, runners, metrics, rounds, n_timed):
    """Two panels: main metric against ms per input and against MB; a colour per model, a
    marker per quantization."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(name for name, _ in runners))
    quantizations = list(dict.fromkeys(q for _, q in runners))
    markers = dict(zip(quantizations, "osD^vPX*"))
    colors = dict(zip(names, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for (name, quantize), (_, size) in runners.items():
        y = metrics[(name, quantize)][task.main_metric]
        timing = common.summarize_rounds(rounds[(name, quantize)])
        ms, low, high = (timing[k] * 1e3 / n_timed for k in ("median", "min", "max"))
        style = dict(color=colors[name], marker=markers[quantize], markersize=8, ls="")
        axes[0].errorbar(ms, y, xerr=[[ms - low], [high - ms]], capsize=3, **style)  # min..max
        axes[1].plot(size / 2**20, y, **style)
    for ax, label in zip(
        axes, ("ms per input (batch 1, TFLite; bars: min..max)", "model.tflite MB")
    ):
        ax.set_xlabel(label)
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"dev {task.main_metric}")
    handles = [plt.Line2D([], [], color=colors[n], marker="o", ls="", label=n) for n in names]
    handles += [
        plt.Line2D([], [], color="gray", marker=markers[q], ls="", label=q) for q in quantizations
    ]
    axes[1].legend(handles=handles, fontsize=8, loc="lower right")
    figure.suptitle(f"{task.name}: teacher and students, TFLite quantizations")
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    return path


def tiny_models(tmp):
    """(teacher dir, [student dir], data_dir): a tiny teacher and a distilled 1-layer student."""
    from keras_bert.tasks.distillation.runner import run_distillation
    from keras_bert.tasks.finetuning import run_finetuning
    from keras_bert.testing.tiny_tasks import write_checkpoint, write_sst2

    data_dir = write_sst2(os.path.join(tmp, "SST-2"))
    quiet = dict(do_train=True, batch_size=16, verbose=False, plot=False)
    teacher = run_finetuning(
        task="sst2",
        data_dir=data_dir,
        init_checkpoint=write_checkpoint(os.path.join(tmp, "ckpt"), num_hidden_layers=2),
        model_dir=os.path.join(tmp, "teacher"),
        learning_rate=3e-3,
        num_train_epochs=6,
        seq_length=64,
        **quiet,
    )["model_path"]
    student = run_distillation(
        teacher=teacher,
        student_layers=1,
        data_dir=data_dir,
        model_dir=os.path.join(tmp, "student"),
        learning_rate=3e-3,
        num_train_epochs=2,
        **quiet,
    )["model_path"]
    return teacher, [student], data_dir


def main(argv=None):
    args = parse(argv)
    import tensorflow as tf

    from keras_bert.checkpoints.task_model import read_task_info, require_task_model

    with tempfile.TemporaryDirectory() as tmp:
        if args.teacher:
            teacher, students = args.teacher, [s for s in args.students.split(",") if s]
            data_dir = args.data_dir
        else:
            teacher, students, data_dir = tiny_models(tmp)
        models = {"teacher": require_task_model(teacher, "teacher")}
        for i, student in enumerate(students):
            info = read_task_info(require_task_model(student, "student"))
            run_name = os.path.basename(os.path.dirname(os.path.abspath(student)))
            models[f"student {i + 1} ({run_name}, {info.get('model_class')})"] = student
        task = registry.get_task(read_task_info(models["teacher"])["task"])
        train = task.read(data_dir, task.train_split)
        dev = task.read(data_dir, next(iter(task.eval_splits)))
        dev = dev[: args.eval_examples] if args.eval_examples else dev
        quantizations = list(QUANTIZATIONS) if args.quantize == "all" else args.quantize.split(",")
        print(
            f"{task.name}: {len(models)} models x {len(quantizations)} quantizations; dev "
            f"{len(dev)} examples, {args.texts} timed at batch 1, {args.threads} thread(s), "
            f"{args.repeat} rounds; TF {tf.__version__}, {os.cpu_count()} CPUs",
            flush=True,
        )
        names = input_names(read_task_info(models["teacher"]))
        runners = export_all(models, quantizations, rows_of(task, train), tmp, args.threads)
        metrics = {key: score(task, runner, names, dev) for key, (runner, _) in runners.items()}
        rounds = time_rounds(runners, names, rows_of(task, dev)[: args.texts], args.repeat)
        n = min(args.texts, len(dev))
        rows = table(task, runners, metrics, rounds, n, "teacher")
        print()
        header = [
            "model",
            "quantize",
            task.main_metric,
            "ms/input",
            "spread",
            "speed vs teacher",
            "MB",
        ]
        print(common.format_table(header, rows))
        for name in list(models)[1:]:
            for quantize in quantizations:
                ratio = common.ratio_text(rounds[("teacher", quantize)], rounds[(name, quantize)])
                print(f"speed {name} / teacher, {quantize}: {ratio}")
        print(f"chart: {plot(args.out, task, runners, metrics, rounds, n)}")
        for name, path in models.items():
            print(f"  {name}: {path}")


if __name__ == "__main__":
    common.run_and_record(main, __file__)
