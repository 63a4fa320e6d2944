"""The demo's stages 6 and 7: a TF Serving SavedModel and a TFLite model of the fine-tuned model,
and the dev paragraphs answered through both as raw-text requests."""

import os

from keras_bert.apps.demo.finetuning import read_predictions
from keras_bert.apps.demo.job import QUANTIZE, native_stderr_to


def export_models(job, model_path):
    """Stage 6: a SavedModel version and a TFLite version; returns (version dir, .tflite file)."""
    from keras_bert import export
    from keras_bert.export import tflite
    from keras_bert.training.progress import ProgressBar

    job.start(f"Exporting a SavedModel and a TFLite model ({QUANTIZE.replace('_', '-')} quantized)")
    native_log = job.paths["converter and interpreter logs"] = os.path.join(
        job.model_dir, "native_logs.txt"
    )
    bar = ProgressBar(2)
    bar.update(0, [("now", "SavedModel")])
    with native_stderr_to(native_log):
        saved_model = export.export_saved_model(model_path, os.path.join(job.model_dir, "serving"))
        bar.update(1, [("now", "TFLite")])
        tflite_dir = tflite.export_tflite(
            model_path, os.path.join(job.model_dir, "tflite"), quantize=QUANTIZE
        )
    bar.update(2)
    tflite_file = os.path.join(tflite_dir, tflite.MODEL_FILE)
    job.paths.update({"SavedModel": saved_model, "TFLite model": tflite_file})
    job.result(
        f"SavedModel {saved_model}, TFLite {tflite_file} ({os.path.getsize(tflite_file) / 1e6:.1f} "
        "MB)"
    )
    return saved_model, tflite_file


def answer_requests(job, dev_rows, finetuning, saved_model, tflite_file):
    """Stage 7: the dev paragraphs through both exports; accuracy and agreement with Keras."""
    job.start(f"Answering {len(dev_rows)} dev paragraphs as raw-text requests")
    texts, truth = [text for _, text, _ in dev_rows], [label for label, *_ in dev_rows]
    keras_answers = read_predictions(finetuning["predictions"][0])
    with native_stderr_to(job.paths["converter and interpreter logs"]):
        answers = {
            "SavedModel": answer_saved_model(saved_model, texts),
            "TFLite": answer_tflite(tflite_file, texts),
        }
    print(format_answers(texts, truth, answers, job.settings["shown_answers"]))
    serving = {
        name: {"accuracy": share(got, truth), "agreement_with_keras": share(got, keras_answers)}
        for name, got in answers.items()
    }
    job.result(
        "; ".join(
            f"{name} accuracy {serving[name]['accuracy']:.3f}, agrees with Keras on "
            f"{serving[name]['agreement_with_keras']:.1%}"
            for name in answers
        )
    )
    serving["Keras"] = {"accuracy": share(keras_answers, truth), "agreement_with_keras": 1.0}
    return serving


def answer_saved_model(version_dir, texts, batch_size=64):
    """Labels from the SavedModel's `serving_default` signature (raw strings in)."""
    import tensorflow as tf

    serve = tf.saved_model.load(version_dir).signatures["serving_default"]
    labels = []
    for i in range(0, len(texts), batch_size):
        labels += [
            s.decode() for s in serve(text=tf.constant(texts[i : i + batch_size]))["label"].numpy()
        ]
    return labels


def answer_tflite(model_file, texts, batch_size=32):
    """Labels from the TFLite model's `serving_default` signature, run by LiteRT."""
    from keras_bert.export import tflite

    serve = tflite.load_interpreter(model_file).get_signature_runner("serving_default")
    labels = []
    for i in range(0, len(texts), batch_size):
        labels += [
            s.decode() for s in serve(text=tflite.as_strings(texts[i : i + batch_size]))["label"]
        ]
    return labels


def share(got, want):
    return sum(a == b for a, b in zip(got, want)) / max(len(want), 1)


def format_answers(texts, truth, answers, count):
    """A few requests: the paragraph's start, the true package and each model's answer."""
    names = list(answers)
    rows = [("true package", *names, "paragraph")]
    for i in range(min(count, len(texts))):
        snippet = texts[i] if len(texts[i]) <= 70 else texts[i][:67] + "..."
        rows.append((truth[i], *[answers[n][i] for n in names], snippet))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]) - 1)]
    return "\n".join(
        "    " + "  ".join(v.ljust(w) for v, w in zip(r, widths)) + "  " + r[-1] for r in rows
    )
