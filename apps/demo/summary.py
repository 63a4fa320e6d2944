"""The demo's numbers: the table printed at the end and `demo_summary.json`, which README.md's
demo table is rendered from (`keras_bert.apps.demo.readme`)."""

import json

SUMMARY_FILE = "demo_summary.json"


def write_summary(summary, job, path):
    """The final table's numbers as JSON (what README.md's demo table is rendered from)."""
    from keras_bert.io_utils import write_atomic

    pre, fine = summary["pretraining"], summary["finetuning"]
    numbers = {
        "settings": {k: v for k, v in job.settings.items() if k != "model"},
        "pretraining": {
            "steps": pre["steps"],
            "mlm_accuracy": pre["eval"]["mlm_accuracy"],
            "nsp_accuracy": pre["eval"]["nsp_accuracy"],
            **pre["baselines"],
        },
        "finetuning": {
            "accuracy": fine["eval"]["accuracy"],
            "macro_f1": fine["eval"]["macro_f1"],
            "best_epoch": fine["best"]["epoch"],
            "majority_accuracy": summary["majority_accuracy"],
            "train_paragraphs": summary["examples"]["train"],
            "dev_paragraphs": summary["examples"]["dev"],
            "classes": len(job.settings["packages"]),
        },
        "serving": summary["serving"],
        "seconds": {"total": summary["seconds"], **job.seconds},
    }
    write_atomic(path, json.dumps(numbers, indent=1, sort_keys=True) + "\n")


def format_table(summary):
    """The result table printed at the end: what each stage achieved and where it was written."""
    pre, fine, serving = summary["pretraining"], summary["finetuning"], summary["serving"]
    first, last, evals, base = pre["history"][0], pre["final"], pre["eval"], pre["baselines"]
    rows = [
        (
            "pre-training steps",
            f"{pre['steps']}  ({pre['examples_per_second'] or 0:.0f} examples/s)",
        ),
        (
            "train MLM loss (first loop -> last)",
            f"{first['mlm_loss']:.3f} -> {last['mlm_loss']:.3f}",
        ),
        (
            "held-out MLM accuracy",
            f"{evals['mlm_accuracy']:.3f}  (most frequent token: "
            f"{base['mlm_most_frequent_token']:.3f})",
        ),
        (
            "held-out NSP accuracy",
            f"{evals['nsp_accuracy']:.3f}  (majority label: {base['nsp_majority']:.3f})",
        ),
        (
            "package of a paragraph, dev accuracy",
            f"{fine['eval']['accuracy']:.3f}  (majority class: {summary['majority_accuracy']:.3f}; "
            f"{summary['examples']['train']} training / {summary['examples']['dev']} dev "
            "paragraphs)",
        ),
        *[
            (
                f"{name} accuracy / agreement with Keras",
                f"{serving[name]['accuracy']:.3f} / {serving[name]['agreement_with_keras']:.3f}",
            )
            for name in ("SavedModel", "TFLite")
        ],
        ("total time", f"{summary['seconds']:.0f} s"),
        *[(name, str(path)) for name, path in summary["paths"].items()],
        ("TensorBoard (both runs)", f"tensorboard --logdir {summary['model_dir']}"),
    ]
    width = max(len(k) for k, _ in rows)
    line = "-" * (width + 70)
    return "\n".join(
        [
            line,
            "BERT demo: standard-library docstrings -> pre-training -> fine-tuning -> serving",
            line,
        ]
        + [f"{k.ljust(width)}  {v}" for k, v in rows]
        + [line]
    )
