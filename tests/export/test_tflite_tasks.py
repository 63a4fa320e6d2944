"""TFLite exports of NER, SWAG and SQuAD (keras_bert.export.tflite): zero Flex ops; float32 answers
equal to the tasks' own Python post-processing on the Keras model and to the TensorFlow functions
the SavedModel serves (hostile text included); dynamic-range answers agreeing on >= 99% of varied
inputs; task.json and the flatbuffer metadata naming the kind and signatures; real SQuAD and
CoNLL dev inputs (when shared/data is there, `-m slow`). 10,000 hostile rows per kind, 1 MB texts
included: tests/export/test_fuzz.py (`-m slow`).

Each tiny model (cased: a smaller tokenizer graph, faster conversions) is converted once per
module, as float32 and as dynamic range, from one set of traced functions.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from conftest import NER_VOCAB, SQUAD_OPTIONS
from export_cases import SEQ_LENGTH, softmax, write_task_model
from finetune_cases import TINY, sentiment_rows
from tensorflow.lite.python import schema_py_generated as schema
from test_task_signatures import (
    BLANK_TEXTS,
    NER_TEXTS,
    SQUAD_CASES,
    _exported_entities,
    _python_entities,
    _python_squad,
    _words,
)

from keras_bert.export import (
    calibration,
    flatbuffer_edit,
    int8_flatbuffer,
    integer_check,
    quantization_recipes,
    quantization_report,
    smoothquant,
    tflite,
)
from keras_bert.export.source import load_source
from keras_bert.tasks import finetuning
from keras_bert.tasks.swag.task import SwagExample, SwagTask
from keras_bert.testing.real_data import real_file

ATOL = 1e-5
# Text that any export must answer: empty, blank, control characters, invalid UTF-8, emoji, CJK,
# a capital sigma, long.
HOSTILE = [
    "",
    "   \t\n ",
    "\x00\x07",
    b"the \xff\xfe movie \xc3\x28 film",
    "東京 the 🙂 film",
    b"\xf0\x9f\x98 the e\xcc\x81 plot",
    "ΣΟΦΟΣ the film Σ.",
    "🙂" * 40,
    " ".join(["the movies"] * 30),
]
TEXT_OPS = [
    "FastBertNormalize",
    "FastWordpieceTokenizeWithOffsets",
    "TFText>ByteSplitByOffsets",
    "TFText>ByteSplitWithOffsets",
]  # Cased models: the tokenizer, offsets and substrings.
AGREEMENT = 0.99  # Least share of inputs whose dynamic-range answer is the float32 one.


def _varied(n, seed):
    """n sentences of the test vocabulary (3..25 words)."""
    return [s for s, _ in sentiment_rows(n, seed=seed)]


def _export(tmp_path_factory, task, **options):
    """A cased tiny `task` model, its traced text functions, and its float32 and dynamic-range
    versions."""
    root = tmp_path_factory.mktemp(f"tflite_{task}")
    model_dir = write_task_model(root / "run", task, seed=len(task), lower_case=False, **options)
    if task == "conll2003":
        with open(os.path.join(model_dir, "vocab.txt"), "w") as f:
            f.write("".join(t + "\n" for t in NER_VOCAB))
    source = load_source(model_dir)
    functions = tflite.text_functions(source)
    paths = {
        q: tflite.write_tflite(source, str(root / "tflite"), quantize=q, functions=functions)
        for q in ("none", "dynamic_range")
    }
    return {"model_dir": model_dir, "functions": functions, "paths": paths}


@pytest.fixture(scope="module")
def ner(tmp_path_factory):
    return _export(tmp_path_factory, "conll2003")


@pytest.fixture(scope="module")
def swag(tmp_path_factory):
    return _export(tmp_path_factory, "swag")


@pytest.fixture(scope="module")
def squad2(tmp_path_factory):
    return _export(tmp_path_factory, "squad2", null_score_diff_threshold=-1.9, **SQUAD_OPTIONS)


def run(export, quantize, **texts):
    path = os.path.join(export["paths"][quantize], tflite.MODEL_FILE)
    runner = tflite.load_interpreter(path).get_signature_runner("serving_default")
    return runner(**{name: tflite.as_strings(values) for name, values in texts.items()})


def run_tf(export, **texts):
    """The TensorFlow function the SavedModel serves."""
    return {
        k: v.numpy()
        for k, v in export["functions"]["serving_default"](
            **{name: tf.constant(tflite.as_strings(values)) for name, values in texts.items()}
        ).items()
    }


def _rows(out):
    """NER outputs -> per row [(text, type, start_char, end_char)] (`_exported_entities` of
    numpy)."""
    return _exported_entities({k: tf.constant(v) for k, v in out.items()})


def _squad_answers(out):
    return list(
        zip(
            [a.decode("utf-8", "replace") for a in out["answer"]],
            out["start_char"].tolist(),
            out["end_char"].tolist(),
            out["has_answer"].tolist(),
        )
    )


# === Ops and files ===


@pytest.mark.parametrize("name", ["ner", "swag", "squad2"])
def test_tasks_convert_with_builtins_and_text_kernels_only(name, request):
    export = request.getfixturevalue(name)
    kind, outputs = {
        "ner": (
            "token_classification",
            [
                "end_char",
                "entity_count",
                "entity_text",
                "entity_type",
                "num_windows",
                "start_char",
                "text_cut",
            ],
        ),
        "swag": ("multiple_choice", ["choice", "probabilities"]),
        "squad2": (
            "span",
            ["answer", "end_char", "has_answer", "null_odds", "score", "start_char"],
        ),
    }[name]
    inputs = {"ner": ["text"], "swag": ["context", "endings"], "squad2": ["question", "context"]}[
        name
    ]
    for quantize, path in export["paths"].items():
        with open(os.path.join(path, tflite.MODEL_FILE), "rb") as f:
            flatbuffer = f.read()
        found = tflite.check_tflite_ops(flatbuffer)  # Raises on a Flex or other custom op.
        custom = [op for op, library in found.items() if library != "builtin"]
        assert set(custom) <= set(TEXT_OPS) and "FastWordpieceTokenizeWithOffsets" in custom, custom
        assert not any(op.startswith("Flex") for op in found)
        with open(os.path.join(path, "task.json")) as f:
            text = f.read()
        assert tflite.read_metadata(flatbuffer)[tflite.METADATA_NAME].decode() == text
        info = json.loads(text)
        assert (info["kind"], info["format"], info["quantize"]) == (kind, "tflite", quantize)
        assert info["signatures"]["serving_default"] == {"inputs": inputs, "outputs": outputs}
        assert info["signatures"]["preprocess"]["inputs"] == inputs
        assert info["tflite_custom_ops"] == custom
        assert sorted(os.listdir(path)) == ["model.tflite", "task.json", "vocab.txt"]


def test_code_point_offsets_of_any_bytes_count_as_python_decodes():
    """`entities.char_offsets` (byte values from tensorflow-text, no TensorFlow string op) at every
    character boundary of random ill-formed UTF-8: `len(text[:offset].decode("utf-8",
    "replace"))`."""
    from keras_bert.export import entities

    rng = np.random.default_rng(0)
    alphabet = [
        0x41,
        0x80,
        0x8F,
        0x90,
        0x9F,
        0xA0,
        0xBF,
        0xC0,
        0xC1,
        0xC2,
        0xDF,
        0xE0,
        0xE1,
        0xED,
        0xEE,
        0xEF,
        0xF0,
        0xF1,
        0xF4,
        0xF5,
        0xFF,
    ]
    texts = [bytes(rng.choice(alphabet, int(rng.integers(0, 10)))) for _ in range(1500)] + [
        t.encode() for t in ("東京 🙂 e\u0301", "\ufffd", "")
    ]

    def check(texts):
        row, offsets, want = [], [], []
        for i, text in enumerate(texts):
            whole = text.decode("utf-8", "replace")
            for o in range(len(text) + 1):
                head = text[:o].decode("utf-8", "replace")
                if head + text[o:].decode("utf-8", "replace") == whole:  # A character boundary.
                    row.append(i), offsets.append(o), want.append(len(head))
        (got,) = entities.char_offsets(tf.constant(texts), tf.constant(row), tf.constant(offsets))
        assert got.numpy().tolist() == want
        return len(want)

    assert check(texts) > 8000
    assert check([b"", bytes(range(128)), b"An ASCII batch"]) == 1 + 129 + 15  # Its own branch.


# === float32: the tasks' answers ===


def test_ner_entities_equal_the_tasks_predictions(ner):
    texts = [_words(c)[0] for c in NER_TEXTS]
    rows = _rows(run(ner, "none", text=texts + BLANK_TEXTS))
    assert rows == _python_entities(ner["model_dir"], NER_TEXTS) + [[]] * len(BLANK_TEXTS)
    assert len({e[1] for row in rows for e in row}) == 4 and any(
        " " in e[0] for row in rows for e in row
    )
    varied = _varied(60, seed=21) + HOSTILE
    out = run(ner, "none", text=varied)
    want = run_tf(ner, text=varied)
    assert _rows(out) == _rows(want)
    for key in want:
        np.testing.assert_array_equal(out[key], want[key])
    for text, row in zip(
        varied, _rows(out)
    ):  # Code point offsets of any bytes (Python's "replace").
        decoded = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        assert all(decoded[start:end] == entity for entity, _, start, end in row)
    empty = run(ner, "none", text=[])
    assert empty["entity_text"].shape == (0, 0) and empty["entity_count"].shape == (0,)


def _swag_cases():
    examples = [
        SwagExample(
            {"": "0"}, "The actor walks in.", "He", ("was good .", "is a film", "sings", "the plot")
        ),
        SwagExample(
            {"": "1"}, " ".join(["very"] * 40), "the film", ("was", "is " * 30, "fine", "")
        ),
        SwagExample({"": "2"}, "", "", ("good", "bad", "", "Ünïcödé 東京 🙂")),
    ]
    sentences = _varied(4 * 40, seed=22)
    examples += [
        SwagExample(
            {"": str(i)}, sentences[4 * i], "", tuple(sentences[4 * i + 1 : 4 * i + 4]) + ("",)
        )
        for i in range(3, 40)
    ]
    return examples


def test_swag_choices_equal_the_keras_model(swag):
    examples = _swag_cases()
    source = load_source(swag["model_dir"])
    task = SwagTask()
    logits = finetuning.predict(
        source.model, task, task.encode(examples, source.tokenizer, SEQ_LENGTH), batch_size=16
    )["logits"]
    want = softmax(np.asarray(logits, np.float64))
    context, endings = (
        [e.context for e in examples],
        [[b for _, b in e.choices()] for e in examples],
    )
    out = run(swag, "none", context=context, endings=endings)
    np.testing.assert_allclose(out["probabilities"], want, atol=ATOL)
    np.testing.assert_array_equal(out["choice"], want.argmax(-1))
    assert len(set(want.argmax(-1))) > 1
    hostile = [[HOSTILE[(i + j) % len(HOSTILE)] for j in range(4)] for i in range(len(HOSTILE))]
    out, want = (
        run(swag, "none", context=HOSTILE, endings=hostile),
        run_tf(swag, context=HOSTILE, endings=hostile),
    )
    np.testing.assert_allclose(out["probabilities"], want["probabilities"], atol=ATOL)
    np.testing.assert_array_equal(out["choice"], want["choice"])
    empty = run(swag, "none", context=[], endings=np.zeros([0, 4], object))
    assert empty["probabilities"].shape == (0, 4) and empty["choice"].shape == (0,)


def test_squad_answers_equal_the_tasks_predictions(squad2):
    examples, prediction, features, _ = _python_squad(squad2["model_dir"], "2.0")
    assert max(np.bincount(features.example_index)) >= 6  # Contexts over several windows.
    question, context = ([case[k] for case in SQUAD_CASES] for k in (0, 1))
    out = run(squad2, "none", question=question, context=context)
    answers = [a.decode() for a in out["answer"]]
    assert answers == [prediction.predictions[e.qas_id] for e in examples]
    assert 0 < sum(map(bool, answers)) < len(answers) - 1  # Null and span answers both occur.
    np.testing.assert_allclose(
        out["null_odds"], [prediction.null_odds[e.qas_id] for e in examples], atol=ATOL
    )
    for e, answer, start, end, has in zip(
        examples, answers, out["start_char"], out["end_char"], out["has_answer"]
    ):
        assert has == bool(answer) and (
            e.context[start:end] == answer if has else start == end == -1
        )
    # Hostile questions and contexts: the TensorFlow function's answers, -inf scores included.
    question, context = HOSTILE + ["the film"] * len(HOSTILE), HOSTILE[::-1] + HOSTILE
    out, want = (
        run(squad2, "none", question=question, context=context),
        run_tf(squad2, question=question, context=context),
    )
    assert _squad_answers(out) == _squad_answers(want)
    np.testing.assert_array_equal(out["answer"], want["answer"])
    for key in ("score", "null_odds"):
        np.testing.assert_allclose(out[key], want[key], atol=ATOL)
    assert np.isneginf(out["score"]).any() and out["has_answer"].any()
    empty = run(squad2, "none", question=[], context=[])
    assert empty["answer"].shape == (0,) and empty["score"].shape == (0,)


# === Dynamic range ===


def _squad_inputs(n, seed):
    """(questions, contexts): varied sentences; every fourth context is 3-9 sentences (several
    windows)."""
    rng = np.random.default_rng(seed)
    sentences = _varied(10 * n, seed=seed)
    questions = [" ".join(s.split()[: int(rng.integers(1, 8))]) + " ?" for s in sentences[:n]]
    contexts = [
        " ".join(sentences[n + 9 * i : n + 9 * i + (int(rng.integers(3, 10)) if i % 4 == 0 else 1)])
        for i in range(n)
    ]
    return questions, contexts


def test_dynamic_range_answers_agree(ner, swag, squad2):
    """Dynamic range against float32 on 200 varied inputs per task. The tiny models' heads are
    random, not fine-tuned: their near-ties (SWAG choices a few hundredths apart, NER tags of 20+
    words per text) flip under any rounding, so the whole-input bounds are loose; SWAG's choices
    decided by >= 0.05 in float32 must agree on >= 99%, as a fine-tuned model's do."""
    texts = _varied(200, seed=23)
    float_rows, quantized_rows = (_rows(run(ner, q, text=texts)) for q in ("none", "dynamic_range"))
    ner_agreement = np.mean([a == b for a, b in zip(float_rows, quantized_rows)])

    sentences = _varied(5 * 200, seed=24)
    context, endings = sentences[:200], [sentences[200 + 4 * i : 204 + 4 * i] for i in range(200)]
    float_out, quantized = (
        run(swag, q, context=context, endings=endings) for q in ("none", "dynamic_range")
    )
    swag_same = float_out["choice"] == quantized["choice"]
    top2 = np.sort(float_out["probabilities"], -1)[:, -2:]
    decided = top2[:, 1] - top2[:, 0] >= 0.05
    swag_difference = np.abs(float_out["probabilities"] - quantized["probabilities"]).max()

    question, context = _squad_inputs(200, seed=25)
    float_out, quantized = (
        run(squad2, q, question=question, context=context) for q in ("none", "dynamic_range")
    )
    same = np.array([a == b for a, b in zip(_squad_answers(float_out), _squad_answers(quantized))])
    both = same & float_out["has_answer"]
    score_difference = np.abs(float_out["score"] - quantized["score"])[both].max()
    odds_difference = np.abs(float_out["null_odds"] - quantized["null_odds"]).max()
    print(
        f"dynamic range vs float32: NER entities agree on {ner_agreement:.1%} of {len(texts)} "
        f"texts; SWAG choices on {swag_same.mean():.1%} ({swag_same[decided].mean():.1%} of the "
        f"{decided.sum()} decided; largest probability difference {swag_difference:.3g}); SQuAD "
        f"answers on {same.mean():.1%} (largest score difference {score_difference:.3g}, null odds "
        f"{odds_difference:.3g})"
    )
    assert swag_same[decided].mean() >= AGREEMENT and decided.sum() >= 10
    assert ner_agreement >= 0.75 and swag_same.mean() >= 0.9 and same.mean() >= 0.95
    assert swag_difference < 0.05 and score_difference < 0.2 and odds_difference < 0.2


# === int8 ===


def _op_types(path):
    with open(os.path.join(path, tflite.MODEL_FILE), "rb") as f:
        flatbuffer = f.read()
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    graph = model.Subgraphs(1)  # serving_default (preprocess is subgraph 0).
    hybrid = matmuls = 0
    for i in range(graph.OperatorsLength()):  # FULLY_CONNECTEDs with float in and out.
        op = graph.Operators(i)
        if flatbuffer_edit.op_name(model.OperatorCodes(op.OpcodeIndex())) == "FULLY_CONNECTED":
            matmuls += 1
            hybrid += graph.Tensors(op.Outputs(0)).Type() == schema.TensorType.FLOAT32
    return integer_check.op_tensor_types(flatbuffer), hybrid, matmuls


def test_int8_squad_and_ner_answer_in_float_from_int8_matmuls(ner, squad2, tmp_path):
    """int8 of SQuAD (refused before: TFLite's quantizer crashed the process on the -inf score of
    "no answer" in its calibration statistics) and NER, calibrated on 100 texts, against float32
    and dynamic range on 200 others: int8 weights in every matmul, activations quantized per call
    on SmoothQuant-scaled inputs (float out), the answer (top-k, exact score sums, -inf, argmax)
    in float from the logits; valid answers (offsets give the text, finite scores), agreeing with
    float32 nearly as often as dynamic range does (the tiny heads are random: near-ties flip
    under any rounding)."""
    question, context = _squad_inputs(300, seed=31)
    texts = _varied(300, seed=31)
    calibration = {"squad2": list(zip(question[:100], context[:100])), "ner": texts[:100]}
    inputs = {
        "squad2": dict(question=question[100:], context=context[100:]),
        "ner": dict(text=texts[100:]),
    }
    exports = {}
    for name, export in (("squad2", squad2), ("ner", ner)):
        path = tflite.write_tflite(
            load_source(export["model_dir"]),
            str(tmp_path / name),
            quantize="int8",
            representative_texts=calibration[name],
            functions=export["functions"],
        )
        exports[name] = dict(export, paths=dict(export["paths"], int8=path))
        types, hybrid, matmuls = _op_types(path)
        assert hybrid == matmuls == 6 * TINY["num_hidden_layers"] + 1  # Blocks and the head.
        assert all(", INT8" in kinds for kinds in types["FULLY_CONNECTED"]), types
        # The embedding tables: SQuAD's in float16 (float16_tables), NER's in int8 (int8_tables).
        tables = {"squad2": "FLOAT16", "ner": "INT8"}[name]
        assert types["DEQUANTIZE"] == [f"{tables} -> FLOAT32"]
        sizes = [
            os.path.getsize(os.path.join(p, tflite.MODEL_FILE))
            for p in (path, export["paths"]["dynamic_range"], export["paths"]["none"])
        ]
        if name == "ner":
            assert sizes[0] <= 1.1 * sizes[1], sizes
        else:  # Tables in float16: between dynamic range's (int8) and float32's.
            assert sizes[1] < sizes[0] < sizes[2], sizes
        answer_op = {"squad2": "TOPK_V2", "ner": "ARG_MAX"}[name]
        assert all(kinds.startswith("FLOAT32") for kinds in types[answer_op]), types[answer_op]
        with open(os.path.join(path, "task.json")) as f:
            info = json.load(f)["quantization"]
        assert info["per_call_int8_layers"] == list(quantization_recipes.LAYER_SITES)
        assert info["smoothing"] == {
            "method": "SmoothQuant",
            "alpha": 0.5,
            "sites": list(quantization_recipes.SMOOTH_SITES),
            "inputs_smoothed": 4 * TINY["num_hidden_layers"] + 1,
        }
        assert (
            info["embedding_tables"]
            == {
                "squad2": "float16, dequantized once",
                "ner": "int8, a scale per row, dequantized once",
            }[name]
        )
        gptq = name == "squad2"  # NER's weights are rounded to nearest (INT8_RECIPES).
        assert info["weight_rounding"] == ("GPTQ" if gptq else "nearest")
        described = quantization_report.describe(info)
        assert ("rounded by GPTQ" in described) == gptq
        assert f"SmoothQuant (alpha 0.5) on {4 * TINY['num_hidden_layers'] + 1} matmul" in described
        assert "call (not calibrated): query_key_value, attention_output_dense" in described

    read = {"squad2": _squad_answers, "ner": _rows}
    agreement = {}
    for name, export in exports.items():
        out = {q: run(export, q, **inputs[name]) for q in ("none", "dynamic_range", "int8")}
        want = read[name](out["none"])
        agreement[name] = {
            q: np.mean([a == b for a, b in zip(read[name](out[q]), want)])
            for q in ("dynamic_range", "int8")
        }
        if name == "squad2":
            got = out["int8"]
            for c, (answer, start, end, has) in zip(inputs[name]["context"], read[name](got)):
                assert c[start:end] == answer if has else start == end == -1
            assert np.isfinite(got["score"][got["has_answer"]]).all()
        else:
            for text, row in zip(inputs[name]["text"], read[name](out["int8"])):
                assert all(text[start:end] == entity for entity, _, start, end in row)
    print(f"answers as float32's (dynamic range, int8): {agreement}")
    for name, kept in agreement.items():
        assert kept["int8"] >= kept["dynamic_range"] - 0.1 and kept["int8"] >= 0.6, name


def test_smoothing_keeps_the_float_model(ner):
    """SmoothQuant's rewrite (X / s in a float MUL, s into the weights' columns) of the float
    model computes what it computed before: the logits and the entities of texts not calibrated
    on; it finds each block's four matmul inputs and the head's, and flattens their channel
    ranges (NumPy's max |X_j / s_j| against max |X_j|)."""
    functions, texts = ner["functions"], _varied(80, seed=7)
    samples = tflite.representative_dataset(functions, texts[:40])
    calibrated = tflite.calibrate(functions, samples)
    sites = smoothquant.matmul_sites(calibrated)
    layers = TINY["num_hidden_layers"]
    assert {site: len(groups) for site, groups in sites.items()} == {
        "qkv": layers,
        "attention_output": layers,
        "intermediate": layers,
        "output": layers,
        "head": 1,
    }
    assert [len(ops) for _, _, ops in sites["qkv"]] == [3] * layers
    inputs = [(g, x) for groups in sites.values() for g, x, _ in groups]
    _, per_channel, _ = calibration.measure(calibrated, samples(), [], inputs)
    highs = {
        site: [np.abs(per_channel[(g, x)]).max(axis=(0, 1)) for g, x, _ in groups]
        for site, groups in sites.items()
    }
    smoothed, scales = smoothquant.smooth(calibrated, highs, 0.5)
    assert sum(map(len, scales.values())) == len(inputs) == 4 * layers + 1
    (g, x), head = inputs[0], sites["head"][0][2][0]
    logits = int(schema.Model.GetRootAsModel(calibrated, 0).Subgraphs(g).Operators(head).Outputs(0))
    before, after = {}, {}
    for flatbuffer, values in ((calibrated, before), (smoothed, after)):
        interpreter = calibration._keeping_interpreter(flatbuffer)
        out = interpreter.get_signature_runner("serving_default")(
            text=tflite.as_strings(texts[40:])
        )
        values.update(out, logits=interpreter.get_tensor(logits, g))
    np.testing.assert_allclose(after["logits"], before["logits"], atol=1e-4, rtol=1e-4)
    for key in ("entity_text", "entity_type", "start_char", "end_char", "entity_count"):
        np.testing.assert_array_equal(after[key], before[key])
    names = _tensor_names(smoothed, g)
    smoothed_x = names.index(names[x] + smoothquant.SMOOTHED_SUFFIX)
    interpreter = calibration._keeping_interpreter(smoothed)
    interpreter.get_signature_runner("serving_default")(text=tflite.as_strings(texts[40:]))
    x_values = interpreter.get_tensor(x, g).reshape(-1, per_channel[(g, x)].shape[-1])
    scaled = interpreter.get_tensor(smoothed_x, g).reshape(x_values.shape)
    spread = [np.ptp(np.log(np.abs(v).max(axis=0) + 1e-6)) for v in (x_values, scaled)]
    assert spread[1] < spread[0], spread


def test_int8_tables_hold_each_row_within_half_its_step(ner):
    """`int8_tables`: the embedding tables a GATHER reads become int8 with a scale per row and a
    DEQUANTIZE before the lookup: the looked-up values are the float table's within half a step
    of their row's grid (NumPy), the file shrinks by about three quarters of the tables."""
    flatbuffer, smaller, tables, _ = _stored_tables(ner, int8_flatbuffer.int8_tables)
    assert integer_check.op_tensor_types(smaller)["DEQUANTIZE"] == ["INT8 -> FLOAT32"]
    saved = 0
    for want, got in tables:
        step = np.abs(want).max(axis=1, keepdims=True) / 127.0
        assert got.shape == want.shape and (np.abs(got - want) <= step / 2 + 1e-7).all()
        saved += want.size * 3 - want.shape[0] * 4  # Less a float32 scale per row.
    assert len(flatbuffer) - len(smaller) >= 0.8 * saved


def test_float16_tables_hold_each_value_rounded_to_float16(ner):
    """`float16_tables`: the embedding tables a GATHER reads become float16 constants with a
    DEQUANTIZE before the lookup: the looked-up values are the float table's rounded to float16
    (NumPy), the file shrinks by about half the tables; the entities stay float32's."""
    flatbuffer, smaller, tables, got_entities = _stored_tables(ner, int8_flatbuffer.float16_tables)
    assert integer_check.op_tensor_types(smaller)["DEQUANTIZE"] == ["FLOAT16 -> FLOAT32"]
    saved = 0
    for want, got in tables:
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_array_equal(got, want.astype(np.float16).astype(np.float32))
        assert np.abs(got - want).max() > 0  # Rounded: not the float32 table itself.
        saved += want.size * 2
    assert len(flatbuffer) - len(smaller) >= 0.9 * saved
    reference = calibration._keeping_interpreter(flatbuffer)
    want_entities = reference.get_signature_runner("serving_default")(text=_TABLE_TEXTS)
    assert _rows(got_entities) == _rows(want_entities)


_TABLE_TEXTS = tflite.as_strings(_varied(4, seed=2))


def _stored_tables(ner, store):
    """(the float32 NER flatbuffer, it with its tables stored by `store`, [(float32 table, the
    values its DEQUANTIZE gives)] of serving_default, that model's outputs on `_TABLE_TEXTS`)."""
    with open(os.path.join(ner["paths"]["none"], tflite.MODEL_FILE), "rb") as f:
        flatbuffer = f.read()
    smaller = store(flatbuffer, smallest=64)
    model = schema.Model.GetRootAsModel(flatbuffer, 0)
    g = 1  # serving_default
    names = _tensor_names(smaller, g)
    dequantized = [t for t, name in enumerate(names) if name.endswith("/dequantized")]
    assert dequantized, names
    interpreter = calibration._keeping_interpreter(smaller)
    outputs = interpreter.get_signature_runner("serving_default")(text=_TABLE_TEXTS)
    tables = []
    for t in dequantized:
        want = model.Subgraphs(g).Tensors(names.index(names[t][: -len("/dequantized")]))
        want = (
            model.Buffers(want.Buffer()).DataAsNumpy().view(np.float32).reshape(want.ShapeAsNumpy())
        )
        tables.append((want, interpreter.get_tensor(t, g)))
    return flatbuffer, smaller, tables, outputs


def _tensor_names(flatbuffer, g):
    graph = schema.Model.GetRootAsModel(flatbuffer, 0).Subgraphs(g)
    return [graph.Tensors(t).Name().decode() for t in range(graph.TensorsLength())]


# === Real inputs ===


def _conll_sentences(path, n):
    sentences, words = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("-DOCSTART-"):
                if words:
                    sentences.append(" ".join(words))
                words = []
            else:
                words.append(line.split()[0])
    return sentences[:n]


@pytest.mark.slow
def test_real_squad_and_conll_inputs(ner, squad2):
    """SQuAD v1.1 dev questions and contexts (most over several windows of the test model) and
    CoNLL-2003 dev sentences: the TensorFlow function's answers exactly (the tiny vocabulary makes
    most words [UNK]: what is checked is windows, offsets and substrings of real text)."""
    squad, conll = real_file("squad_v1.1", "dev-v1.1.json"), real_file("conll2003", "dev.txt")
    if not (squad and conll):
        pytest.skip("the real data folder (shared/data) is absent")
    with open(squad, encoding="utf-8") as f:
        articles = json.load(f)["data"]
    pairs = [
        (qa["question"], p["context"])
        for a in articles[:3]
        for p in a["paragraphs"][:10]
        for qa in p["qas"][:1]
    ]
    question, context = [q for q, _ in pairs], [c for _, c in pairs]
    for start in range(0, len(pairs), 10):
        part = dict(question=question[start : start + 10], context=context[start : start + 10])
        out, want = run(squad2, "none", **part), run_tf(squad2, **part)
        assert _squad_answers(out) == _squad_answers(want)
        np.testing.assert_allclose(out["score"], want["score"], atol=ATOL)
    sentences = _conll_sentences(conll, 300)
    assert len(sentences) == 300
    out, want = run(ner, "none", text=sentences), run_tf(ner, text=sentences)
    assert _rows(out) == _rows(want)
