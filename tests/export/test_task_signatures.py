"""Serving signatures of NER, SWAG and SQuAD exports: the answers of the task's own Python
post-processing (`NerTask.predictions`, `SwagTask` logits, `SquadTask.predict`) on the saved
Keras model, after reloading and in a process as bare as TF Serving."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import SQUAD_OPTIONS
from export_cases import SEQ_LENGTH, softmax
from seqeval.metrics.sequence_labeling import get_entities
from test_saved_model import _json_text

from keras_bert.export.source import load_source
from keras_bert.tasks import finetuning
from keras_bert.tasks.ner.task import NerExample, NerTask
from keras_bert.tasks.squad.task import SquadExample, SquadTask
from keras_bert.tasks.swag.task import SwagExample, SwagTask
from keras_bert.testing.served import serve_fresh
from keras_bert.text.preprocessor import BertPreprocessor

ATOL = 1e-5
# NER texts as "|"-separated words, each with the blanks before it: multi-piece words ("movies"),
# punctuation glued to words, tabs and double spaces, unknown and accented words, CJK characters
# (one word each), an emoji, and a text of 75 words read in windows (seq_length - 2 = 30 pieces
# each).
NER_TEXTS = [
    "The| movies|,| really|  good|!| the| actor| was| boring|.",
    "a",
    "Zzz| films| and| Ünïcödé| 東|京| 🙂| plot|.|.|.",
    ",|.|,",
    "MUSIC| and|\tscenes| with| a| story",
    "|".join(["the", " movies", " "] * 25).replace("| |", "| "),
    "it| is| fine| ,| but| the| plots| were| bad",
]
BLANK_TEXTS = ["", "   \t\n ", "\x00\x07"]


def _words(case):
    """(text, words, character start of each word) of a "|"-separated NER case."""
    text, words, starts = "", [], []
    for part in case.split("|"):
        word = part.lstrip()
        if word:  # (A blank part is no word: whitespace.)
            starts.append(len(text) + len(part) - len(word))
            words.append(word)
        text += part
    return text, words, starts


def _python_entities(model_dir, cases):
    """Per case, [(text, type, start_char, end_char)] from NerTask's predictions on the Keras model
    (long sentences in windows, as the export reads them)."""
    source = load_source(model_dir)
    task = NerTask()
    assert list(task.labels) == source.info["labels"]
    parsed = [_words(c) for c in cases]
    examples = []
    for _, words, _ in parsed:
        examples.append(NerExample(words))
    features = task.encode(examples, source.tokenizer, SEQ_LENGTH)
    outputs = finetuning.predict(source.model, task, features, batch_size=4)
    answers = []
    for (text, words, starts), tags in zip(parsed, task.predictions(examples, features, outputs)):
        answers.append(
            [
                (
                    text[starts[a] : starts[b] + len(words[b])],
                    kind,
                    starts[a],
                    starts[b] + len(words[b]),
                )
                for kind, a, b in get_entities(tags)
            ]
        )
    return answers


def _exported_entities(out):
    """Per row, [(text, type, start_char, end_char)] from serving_default's padded outputs."""
    rows = []
    for i, count in enumerate(out["entity_count"].numpy()):
        rows.append(
            [
                (
                    out["entity_text"][i, j].numpy().decode("utf-8", "replace"),
                    out["entity_type"][i, j].numpy().decode(),
                    int(out["start_char"][i, j]),
                    int(out["end_char"][i, j]),
                )
                for j in range(count)
            ]
        )
    return rows


def test_ner_entities_equal_the_tasks_predictions(conll):
    loaded = tf.saved_model.load(conll["path"])
    assert sorted(loaded.signatures) == ["predict_ids", "preprocess", "serving_default"]
    texts = [_words(c)[0] for c in NER_TEXTS]
    out = loaded.signatures["serving_default"](text=tf.constant(texts + BLANK_TEXTS))
    want = _python_entities(conll["model_dir"], NER_TEXTS) + [[]] * len(BLANK_TEXTS)
    assert _exported_entities(out) == want
    # Texts one at a time, and a batch of one window each: the graph's one-window branch.
    windows = out["num_windows"].numpy()
    assert windows.max() > 1 and (windows == 1).sum() > 1
    for i, text in enumerate(texts):
        one = loaded.signatures["serving_default"](text=tf.constant([text]))
        assert _exported_entities(one) == [want[i]]
    short = [i for i, n in enumerate(windows[: len(texts)]) if n == 1]
    some = loaded.signatures["serving_default"](text=tf.constant([texts[i] for i in short]))
    assert _exported_entities(some) == [want[i] for i in short]
    # The check can tell: entities of every type, of several words, of multi-piece words ("movies").
    flat = [e for row in want for e in row]
    assert {e[1] for e in flat} == {"PER", "ORG", "LOC", "MISC"}
    assert any(" " in e[0] for e in flat) and any("movies" in e[0] for e in flat)
    assert any("Ünïcödé 東京 🙂" in e[0] for e in flat)
    assert want[5][-1][3] == 274 and out["num_windows"].numpy()[5] > 1  # Every window's words.
    # Padding: "" and -1 after each row's entities; the width is the batch's most entities.
    count = out["entity_count"].numpy()
    assert out["entity_text"].shape == (len(texts) + len(BLANK_TEXTS), count.max())
    pad = np.arange(count.max())[None, :] >= count[:, None]
    assert np.all(out["start_char"].numpy()[pad] == -1) and np.all(
        out["end_char"].numpy()[pad] == -1
    )
    assert np.all(out["entity_text"].numpy()[pad] == b"") and np.all(
        out["entity_type"].numpy()[pad] == b""
    )
    # An empty batch.
    empty = loaded.signatures["serving_default"](text=tf.constant([], tf.string))
    assert empty["entity_text"].shape == (0, 0) and empty["entity_count"].shape == (0,)


def test_ner_reads_a_megabyte_text_in_max_windows(conll):
    """1 MB of text: entities from all 16 windows read (past the first), the rest cut and said."""
    loaded = tf.saved_model.load(conll["path"])
    text = ("The movies were really good , the actor was Zzz . " * 21000)[: 1 << 20]
    out = loaded.signatures["serving_default"](text=tf.constant([text, "the movie"]))
    assert out["num_windows"].numpy().tolist() == [16, 1]
    assert out["text_cut"].numpy().tolist() == [True, False]
    ends = out["end_char"].numpy()[0, : out["entity_count"].numpy()[0]]
    room = SEQ_LENGTH - 2  # Pieces of a window; 16 windows half a window apart.
    piece_ends = (
        load_source(conll["model_dir"])
        .tokenizer.tokenize_with_offsets(tf.constant([text[:5000]]))[2][0]
        .numpy()
    )  # (ASCII: bytes are characters.)
    assert piece_ends[2 * room] < ends.max() <= piece_ends[15 * (room // 2) + room - 1]


def test_ner_preprocess_and_predict_ids_give_the_keras_logits(conll):
    signatures = tf.saved_model.load(conll["path"]).signatures
    texts = tf.constant([_words(c)[0] for c in NER_TEXTS] + BLANK_TEXTS)
    inputs = {k: v.numpy() for k, v in signatures["preprocess"](text=texts).items()}
    index = inputs.pop("example_index")
    assert len(index) > len(NER_TEXTS + BLANK_TEXTS)  # The long text is read in windows.
    first = [int(np.flatnonzero(index == i)[0]) for i in range(texts.shape[0])]
    source = load_source(conll["model_dir"])
    full = BertPreprocessor(source.tokenizer, SEQ_LENGTH)(texts)
    width = inputs["input_word_ids"].shape[1]
    assert width == SEQ_LENGTH  # The long text fills the row.
    for name in full:  # Each text's first window is its truncation.
        np.testing.assert_array_equal(inputs[name][first], full[name][:, :width])
    logits = signatures["predict_ids"](**inputs)["logits"].numpy()[first]
    mask = inputs["input_mask"][first][..., None]
    want = np.asarray(source.model(full, training=False)["logits"])
    np.testing.assert_allclose(logits * mask, want[:, :width] * mask, atol=ATOL)


def test_ner_offsets_count_code_points_of_any_bytes(conll):
    """Offsets count code points, each ill-formed UTF-8 sequence as one (Python's "replace")."""
    texts = [
        b"the \xff\xfe movie \xc3\x28 film",
        "東京 the 🙂 film".encode(),
        b"\xf0\x9f\x98 the e\xcc\x81 plot",
    ]
    out = tf.saved_model.load(conll["path"]).signatures["serving_default"](text=tf.constant(texts))
    for text, row in zip(texts, _exported_entities(out)):
        assert row, text  # Every text has entities to check (the tags are random but rarely O).
        for entity, _, start, end in row:
            assert text.decode("utf-8", "replace")[start:end] == entity


def test_swag_choices_equal_the_tasks_logits(swag):
    examples = [
        SwagExample(
            {"": "0"}, "The actor walks in.", "He", ("was good .", "is a film", "sings", "the plot")
        ),
        SwagExample({"": "1"}, "a story", "", ("boring", "lovely music", "it", "a a a")),
        SwagExample(
            {"": "2"}, " ".join(["very"] * 40), "the film", ("was", "is " * 30, "fine", "")
        ),
        SwagExample({"": "3"}, "", "", ("good", "bad", "", "Ünïcödé 東京 🙂")),
        SwagExample(
            {"": "4"}, "the movie", "and", ("scenes", "music", "the actor was poor", "great")
        ),
    ]
    source = load_source(swag["model_dir"])
    task = SwagTask()
    features = task.encode(examples, source.tokenizer, SEQ_LENGTH)
    logits = finetuning.predict(source.model, task, features, batch_size=2)["logits"]
    want = softmax(np.asarray(logits, np.float64))
    signatures = tf.saved_model.load(swag["path"]).signatures
    context = tf.constant([e.context for e in examples])
    endings = tf.constant([[b for _, b in e.choices()] for e in examples])  # sent2 + " " + ending
    out = signatures["serving_default"](context=context, endings=endings)
    np.testing.assert_allclose(out["probabilities"], want, atol=ATOL)
    np.testing.assert_array_equal(out["choice"], want.argmax(-1))
    assert len(set(want.argmax(-1))) > 1
    inputs = signatures["preprocess"](context=context, endings=endings)  # (B, 4, S)
    ids = features.inputs["input_word_ids"].to_tensor().numpy()
    assert inputs["input_word_ids"].shape == ids.shape == (5, 4, SEQ_LENGTH)
    np.testing.assert_array_equal(inputs["input_word_ids"], ids)
    np.testing.assert_array_equal(
        inputs["input_type_ids"], features.inputs["input_type_ids"].to_tensor()
    )
    np.testing.assert_allclose(signatures["predict_ids"](**inputs)["logits"], logits, atol=ATOL)
    empty = signatures["serving_default"](
        context=tf.constant([], tf.string), endings=tf.zeros([0, 4], tf.string)
    )
    assert empty["probabilities"].shape == (0, 4) and empty["choice"].shape == (0,)


def test_signatures_as_saved_model_cli_lists_them(conll, swag):
    def described(function):
        inputs = {
            k: (v.dtype.name, v.shape.as_list())
            for k, v in function.structured_input_signature[1].items()
        }
        outputs = {k: (v.dtype.name, v.shape.rank) for k, v in function.structured_outputs.items()}
        return inputs, outputs

    ner = tf.saved_model.load(conll["path"]).signatures
    assert described(ner["serving_default"]) == (
        {"text": ("string", [None])},
        {
            "entity_text": ("string", 2),
            "entity_type": ("string", 2),
            "start_char": ("int32", 2),
            "end_char": ("int32", 2),
            "entity_count": ("int32", 1),
            "num_windows": ("int32", 1),
            "text_cut": ("bool", 1),
        },
    )
    assert described(ner["predict_ids"])[1] == {"logits": ("float32", 3)}
    choice = tf.saved_model.load(swag["path"]).signatures
    assert described(choice["serving_default"]) == (
        {"context": ("string", [None]), "endings": ("string", [None, 4])},
        {"choice": ("int32", 1), "probabilities": ("float32", 2)},
    )
    ids = {
        name: ("int32", [None, 4, None])
        for name in ("input_word_ids", "input_mask", "input_type_ids")
    }
    assert described(choice["predict_ids"])[0] == ids
    assert {k: v[0] for k, v in described(choice["preprocess"])[1].items()} == {
        k: "int32" for k in ids
    }


def test_fresh_process_answers_ner_and_swag_rest_bodies(conll, swag, tmp_path):
    texts = [_words(c)[0] for c in NER_TEXTS] + BLANK_TEXTS
    want = _exported_entities(
        tf.saved_model.load(conll["path"]).signatures["serving_default"](text=tf.constant(texts))
    )
    rows, columns = serve_fresh(
        conll["path"],
        [{"instances": [{"text": _json_text(t)} for t in texts]}, {"inputs": {"text": texts[:2]}}],
        tmp_path,
    )
    for row, entities in zip(rows["predictions"], want):
        assert row["entity_count"] == len(entities)
        assert (
            list(zip(row["entity_text"], row["entity_type"], row["start_char"], row["end_char"]))[
                : len(entities)
            ]
            == entities
        )
    assert columns["outputs"]["entity_count"] == [len(e) for e in want[:2]]
    body = {"instances": [{"context": "the movie", "endings": ["was good", "bad", "", "🙂"]}]}
    (answer,) = serve_fresh(swag["path"], [body], tmp_path)
    out = tf.saved_model.load(swag["path"]).signatures["serving_default"](
        context=tf.constant(["the movie"]), endings=tf.constant([["was good", "bad", "", "🙂"]])
    )
    np.testing.assert_allclose(
        answer["predictions"][0]["probabilities"], out["probabilities"][0], atol=ATOL
    )
    assert answer["predictions"][0]["choice"] == int(out["choice"][0])


# (question, context): short and long contexts (up to 10 windows), casing, symbols, empty.
SQUAD_CASES = [
    ("what was the movie ?", "The movie was really good, and the actor was poor."),
    (
        "who is the actor in the story with the music and the scenes ?",
        " ".join(["the film is a story"] * 20),
    ),
    ("is it good", "Ünïcödé 東京 the film 🙂 was good , but the plot was boring ."),
    ("", "a lovely film ."),
    ("the plot", ""),
    ("Story?", "it was bad. " * 12 + "it was great. the music was fine and the actor was awful"),
]


def _python_squad(model_dir, version):
    """(examples, `squad.postprocess.Prediction`, features, outputs) of SquadTask on the Keras
    model."""
    source = load_source(model_dir)
    task = SquadTask(
        version, null_score_diff_threshold=source.info["null_score_diff_threshold"], **SQUAD_OPTIONS
    )
    examples = [SquadExample(str(i), q, c) for i, (q, c) in enumerate(SQUAD_CASES)]
    features = task.encode(examples, source.tokenizer, SEQ_LENGTH)
    outputs = finetuning.predict(source.model, task, features, batch_size=4)
    return examples, task.predict(examples, features, outputs), features, outputs


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_squad_answers_equal_the_tasks_predictions(squad1, squad2, version):
    export = squad1 if version == "1.1" else squad2
    examples, prediction, features, outputs = _python_squad(export["model_dir"], version)
    assert max(np.bincount(features.example_index)) >= 6  # Contexts over several windows.
    signatures = tf.saved_model.load(export["path"]).signatures
    question, context = (tf.constant([case[k] for case in SQUAD_CASES]) for k in (0, 1))
    out = signatures["serving_default"](question=question, context=context)
    answers = [a.decode() for a in out["answer"].numpy()]
    assert answers == [prediction.predictions[e.qas_id] for e in examples]
    # One question at a time: those of one window take the graph's one-window branch.
    for i in range(len(examples)):
        one = signatures["serving_default"](
            question=question[i : i + 1], context=context[i : i + 1]
        )
        assert one["answer"].numpy()[0].decode() == answers[i]
        assert one["start_char"].numpy()[0] == out["start_char"].numpy()[i]
    for e, answer, start, end, score, has in zip(
        examples,
        answers,
        out["start_char"].numpy(),
        out["end_char"].numpy(),
        out["score"].numpy(),
        out["has_answer"].numpy(),
    ):
        assert has == bool(answer) and (
            e.context[start:end] == answer if has else start == end == -1
        )
        best = next((n for n in prediction.nbest[e.qas_id] if n["text"]), None)
        assert (
            score == pytest.approx(best["start_logit"] + best["end_logit"], abs=ATOL)
            if best
            else score == -np.inf
        )
    if version == "2.0":
        np.testing.assert_allclose(
            out["null_odds"], [prediction.null_odds[e.qas_id] for e in examples], atol=ATOL
        )
        assert 0 < sum(map(bool, answers)) < len(answers) - 1  # Null and span answers both occur.
    else:
        assert (
            "null_odds" not in out and sum(map(bool, answers)) == len(answers) - 1
        )  # "" for the empty context.
    # preprocess: the task's windows; predict_ids: its logits.
    inputs = signatures["preprocess"](question=question, context=context)
    np.testing.assert_array_equal(inputs["example_index"], features.example_index)
    for name in ("input_word_ids", "input_type_ids"):
        np.testing.assert_array_equal(inputs[name], features.inputs[name].to_tensor())
    logits = signatures["predict_ids"](**{k: v for k, v in inputs.items() if k != "example_index"})
    for name in ("start_logits", "end_logits"):
        for row, want in zip(logits[name].numpy(), outputs[name]):
            np.testing.assert_allclose(row[: len(want)], want, atol=ATOL)
    empty = signatures["serving_default"](
        question=tf.constant([], tf.string), context=tf.constant([], tf.string)
    )
    assert empty["answer"].shape == (0,) and empty["score"].shape == (0,)


def test_squad_fresh_process(squad2, tmp_path):
    body = {
        "inputs": {"question": [q for q, _ in SQUAD_CASES], "context": [c for _, c in SQUAD_CASES]}
    }
    (answer,) = serve_fresh(squad2["path"], [body], tmp_path)
    _, prediction, _, _ = _python_squad(squad2["model_dir"], "2.0")
    assert answer["outputs"]["answer"] == [
        prediction.predictions[str(i)] for i in range(len(SQUAD_CASES))
    ]


@pytest.fixture(autouse=True)
def _fresh_keras_session():
    yield
    keras.backend.clear_session()
