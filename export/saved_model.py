"""SavedModels for TF Serving: raw text in, the task's answer out, one version directory each.

>>> export_saved_model("runs/sst2/model", "serving/sst2")   # doctest: +SKIP
'serving/sst2/1'

`<export_dir>/<version>/` holds `saved_model.pb`, `variables/` and `assets.extra/` (task.json
with the export's facts, vocab.txt, and for TF Serving `tf_serving_warmup_requests`, replayed
when a version loads (`keras_bert.export.warmup`), and with `tune_batching`
`batching_parameters.txt` (`keras_bert.export.batching`)). The signatures are those
of `keras_bert.export.signatures` for the model's kind. Before the version appears, the
written SavedModel is checked: every op must be servable (`keras_bert.export.ops.check_ops`)
and, reloaded, every signature must give the answers of the functions it was saved from
(`verify_reload`). A failed check leaves no version directory.
"""

import contextlib
import json
import os

import keras
import tensorflow as tf

from keras_bert.export import batching, checks, int8_saved_model, ops, versions, warmup
from keras_bert.export.signatures import build_signatures
from keras_bert.export.source import load_source
from keras_bert.text.vocab import write_vocabulary

EXTRA_DIR = "assets.extra"
# Probe texts of the reload check: empty, plain, punctuation and accents, over-long.
PROBE_TEXTS = ("", "Hello, world!", "Ünïcödé — ça va? 東京 🙂", "a very long text " * 400)


def export_saved_model(
    model_dir: str | os.PathLike[str] | keras.Model,
    export_dir: str | os.PathLike[str],
    version: int | None = None,
    seq_length: int | None = None,
    warmup_requests: bool = True,
    warmup_texts: warmup.Texts | None = None,
    tune_batching: bool = False,
    quantize: str = "none",
    text_pair: bool | None = None,
) -> str:
    """Exports a fine-tuned task model (or a pre-trained encoder) for TF Serving.

    Args:
        model_dir: a task model in memory with its preprocessor (`from_preset`), or str:
            The `model/` directory of a fine-tuning run (or the run directory),
            or a pre-trained encoder checkpoint (see `keras_bert.export.source.load_source`).
        export_dir: str. The model's base directory; versions are its integer subdirectories.
        version: int or None (the next version).
        seq_length: int or None. Longest packed sequence (default: the training length).
        warmup_requests: bool. Write `assets.extra/tf_serving_warmup_requests` (every padded
            width, every batch size; see `keras_bert.export.warmup`).
        warmup_texts: None, or real texts for the warmup requests (and the batching
            measurement): rows of texts or a file, one row per line, columns tab-separated.
        tune_batching: bool. Measure TF Serving's batching settings on this machine and write
            `assets.extra/batching_parameters.txt` (a minute or so); the warmup requests then
            use its `allowed_batch_sizes`.
        quantize: str, "none" (float32) or "int8" (the Dense layers' products in 8 bits, see
            `keras_bert.export.int8_saved_model`; task.json's `quantization` says which).
        text_pair: bool or None. A classifier's signatures take `text` and `text_b`: for a
            Hugging Face directory fine-tuned on pairs (nothing in it says so, unless its
            config.json's `finetuning_task` does); None: as the model says
            (`keras_bert.export.source.load_source`).

    Returns:
        str, the new version directory.

    Raises:
        FileExistsError: the version exists (it is never overwritten).
        keras_bert.export.ops.OpCheckError: an op TF Serving cannot run (naming op and node).
        ValueError: warmup_texts rows with fewer texts than the signature takes, or a
            quantize other than "none" and "int8".
    """
    int8_saved_model.check_quantize(quantize)
    source = load_source(model_dir, seq_length=seq_length, mlm=False, text_pair=text_pair)
    if quantize == "int8":
        source = int8_saved_model.int8_source(source)
    return write_saved_model(
        source,
        export_dir,
        version=version,
        warmup_requests=warmup_requests,
        warmup_texts=warmup_texts,
        tune_batching=tune_batching,
    )


def write_saved_model(
    source, export_dir, version=None, warmup_requests=True, warmup_texts=None, tune_batching=False
):
    """Writes the signatures of an `ExportSource` as a new checked version; returns its path."""
    signatures = build_signatures(source)
    module = serving_module(source, signatures)
    with versions.new_version(export_dir, version) as (tmp, final):
        tf.saved_model.save(module, tmp, signatures=signatures)
        text_ops = sorted(
            o.name for o in ops.check_ops(tmp).values() if o.library == "tensorflow-text"
        )
        verify_reload(
            tmp, signatures, probe_inputs(signatures), eager="quantization" not in source.info
        )
        write_extra(tmp, source, signatures, text_ops)
        batch_sizes = warmup.BATCH_SIZES
        if tune_batching:
            batch_sizes = write_batching(tmp, signatures, source, warmup_texts).allowed_batch_sizes
        if warmup_requests:
            requests = warmup.warmup_requests(
                signatures,
                source.tokenizer.vocabulary,
                source.seq_length,
                batch_sizes,
                warmup_texts,
            )
            warmup.write_warmup(os.path.join(tmp, EXTRA_DIR, warmup.WARMUP_FILE), requests)
    return final


def write_batching(path, functions, source, texts=None):
    """Measures batching on the SavedModel at `path` (single-row requests of `texts`, or of
    vocabulary words of every length) and writes assets.extra/batching_parameters.txt; returns
    the chosen `batching.BatchingOptions`."""
    columns = warmup.text_columns(functions["serving_default"])
    rows = (
        warmup.read_rows(texts, sum(columns.values()))
        if texts is not None
        else warmup.synthetic_rows(
            source.tokenizer.vocabulary, source.seq_length, sum(columns.values())
        )
    )
    requests = [warmup.as_request([row], columns) for row in rows]
    function = tf.saved_model.load(path).signatures["serving_default"]
    clients = 2 * max(batching.MAX_BATCH_SIZES)
    best, table = batching.tune(function, requests, seconds=batching.TUNE_SECONDS, clients=clients)
    text = batching.batching_parameters(best, table, clients)
    with tf.io.gfile.GFile(os.path.join(path, EXTRA_DIR, batching.PARAMETERS_FILE), "w") as f:
        f.write(text)
    return best


def serving_module(source, functions):
    """A tf.Module holding the model's variables and the functions (also as attributes)."""
    module = tf.Module()
    module.model_variables = list(
        (source.model if source.model is not None else source.encoder).variables
    )
    for name, function in functions.items():
        setattr(module, name, function)
    return module


def probe_inputs(functions):
    """Inputs for the reload check by signature input name: the probe texts for every string
    input (a [B, K] input gets them K times, rotated), and `preprocess`'s answer on them for the
    encoder inputs."""
    texts = tf.constant(PROBE_TEXTS)
    probes = {}
    for function in functions.values():
        for spec in tf.nest.flatten(function.input_signature):
            if spec.dtype == tf.string:
                columns = [
                    tf.roll(texts, i, 0)
                    for i in range(spec.shape[1] if spec.shape.rank == 2 else 1)
                ]
                probes[spec.name] = tf.stack(columns, 1) if spec.shape.rank == 2 else texts
    if "preprocess" in functions:
        spec = functions["preprocess"].input_signature
        with eagerly():
            probes.update(
                functions["preprocess"](*tf.nest.map_structure(lambda s: probes[s.name], spec))
            )
    return probes


def verify_reload(
    path, functions, probes, eager=True, atol=checks.ATOL, scale_rtol=checks.SCALE_RTOL
):
    """Reloads the SavedModel at `path`; each signature must answer `probes` as `functions` do.

    Each signature is run on the probes and on their first row alone (a batch of one: int8
    exports answer it in their single-request graph, `keras_bert.export.single_request`).
    Floating-point outputs are compared on their own scale (`keras_bert.export.checks`): within
    `atol + scale_rtol *` the reference output's largest magnitude, so that float noise between the
    eager run and the optimized graph (3.5e-5 on a token classifier's logits of 5) passes and a
    weight that did not reload (a change of a sizeable part of the outputs) fails.

    Args:
        path: str, a SavedModel directory.
        functions: dict signature name -> tf.function it was saved from (with input_signature).
        probes: dict input name -> tensor; a signature with other inputs is not checked.
        eager: bool. Compare with the functions run eagerly (cheap); False: their graphs (for
            int8 exports: 8-bit rounding turns the float differences between the eager run and
            the optimized graph into differences of a few percent of the outputs).
        atol: float, the tolerance of outputs that are all near zero.
        scale_rtol: float, the tolerance's part proportional to the output's largest magnitude.

    Raises:
        AssertionError: naming every signature and output that differs, with the largest
            difference, where it is and what was allowed.
    """
    loaded = tf.saved_model.load(path)
    problems = []
    for name, function in functions.items():
        if name not in loaded.signatures:
            raise AssertionError(f"{path}: signature {name} is missing after reloading.")
        spec = function.input_signature
        flat = tf.nest.flatten(spec)
        if not all(s.name in probes for s in flat):
            continue
        # The whole batch, and its first row alone (int8: the single-request graph).
        for rows, label in ((None, ""), (1, " (one row)")):
            given = {s.name: probes[s.name][:rows] for s in flat}
            # The reference: the same Python code, run eagerly (no tracing), or the graph.
            with eagerly() if eager else contextlib.nullcontext():
                want = function(*tf.nest.map_structure(lambda s, g=given: g[s.name], spec))
            got = loaded.signatures[name](**given)
            for key, value in want.items():
                problem = checks.difference(got[key], value, atol, scale_rtol)
                if problem:
                    problems.append(
                        f"signature {name} output {key}{label} differs after reloading: {problem}"
                    )
    if problems:
        raise AssertionError(f"{path}: " + "; ".join(problems) + ".")


@contextlib.contextmanager
def eagerly():
    """Runs tf.functions as plain Python in this block (no tracing): cheap reference outputs."""
    before = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(before)


def write_extra(path, source, functions, text_ops):
    """assets.extra/task.json (task facts and the export's signatures and text ops) and
    vocab.txt."""
    extra = os.path.join(path, EXTRA_DIR)
    tf.io.gfile.makedirs(extra)
    signatures = {
        name: [s.name for s in tf.nest.flatten(f.input_signature)] for name, f in functions.items()
    }
    info = dict(
        source.info,
        seq_length=source.seq_length,
        kind=source.kind,
        signatures=signatures,
        tensorflow_text_ops=text_ops,
        tensorflow_version=tf.__version__,
    )
    with tf.io.gfile.GFile(os.path.join(extra, "task.json"), "w") as f:
        f.write(json.dumps(info, indent=1))
    write_vocabulary(source.tokenizer.vocabulary, os.path.join(extra, "vocab.txt"))
