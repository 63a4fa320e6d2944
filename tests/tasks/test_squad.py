"""SQuAD v1.1 / v2.0 on tiny files in the official format: reading and its errors, features and
post-processing against the original run_squad code (tf-models-official's squad_lib), the
evaluation against the official scripts' copies, and the runner end to end.

The helpers here (the synthetic sets, the original's features) are shared with test_squad_real.py.
"""

import collections
import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_bert.tasks import registry
from keras_bert.tasks.finetuning import run_finetuning
from keras_bert.tasks.squad import metrics as squad_eval
from keras_bert.tasks.squad.data import SquadDataError, SquadExample, locate_answer
from keras_bert.tasks.squad.features import doc_windows, max_context_masks
from keras_bert.tasks.squad.task import SquadTask
from keras_bert.text import BertTokenizer

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
NAMES = ["anna", "boris", "clara", "dmitri", "elena", "felix", "greta", "hugo"]
SEASONS = ["spring", "summer", "autumn", "winter"]
FILLER = [
    "the",
    "river",
    "flows",
    "past",
    "old",
    "mill",
    "bridge",
    "is",
    "made",
    "of",
    "stone",
    "and",
    "near",
    "a",
    "quiet",
    "road",
    "farmers",
    "sell",
    "bread",
    "on",
    "market",
    "days",
    "unbelievable",
    "walking",
]
ACCENTED = [
    "Café",
    "naïve",
    "Zürich",
    "東京",
]  # Several UTF-8 bytes per character; as long uncased.
QUESTION = ["who", "when", "did", "visit", "visited", "town", "in", "built"]
VOCAB = (
    SPECIAL
    + [".", ",", "?"]
    + FILLER[:-2]
    + QUESTION
    + NAMES
    + SEASONS
    + [
        "un",
        "##believ",
        "##able",
        "walk",
        "##ing",
        "caf",
        "##e",
        "naive",
        "zur",
        "##ich",
        "東",
        "京",
        "##s",
    ]
)


# === Synthetic sets and the original code ===


def squad_dict(
    n_paragraphs,
    seed=0,
    version="1.1",
    filler=(1, 4),
    one_answer=False,
    emoji=True,
    spaces=True,
    who_only=False,
):
    """An official-format SQuAD dict: filler sentences around one "<Name> visited the town in
    <season>.", asking who (the name; answered twice unless `one_answer`) and, unless `who_only`,
    when (the season); v2.0 adds the unanswerable "Who built the bridge?". `emoji` lets filler
    hold an [UNK] word, `spaces` separates sentences by varied whitespace."""
    rng = np.random.default_rng(seed)
    words = FILLER + ACCENTED + (["😀"] if emoji else [])
    articles = []
    for p in range(n_paragraphs):
        name, season = (
            NAMES[rng.integers(len(NAMES))].capitalize(),
            SEASONS[rng.integers(len(SEASONS))],
        )
        sentences = [
            " ".join(rng.choice(words, size=int(rng.integers(3, 9)))).capitalize() + "."
            for _ in range(int(rng.integers(*filler)) + int(rng.integers(*filler)))
        ]
        sentences.insert(
            int(rng.integers(len(sentences) + 1)), f"{name} visited the town in {season}."
        )
        separators = [
            str(rng.choice([" ", "  ", "\n", " \t"])) if spaces else " " for _ in sentences
        ]
        context = "".join(s + sep for s, sep in zip(sentences, separators)).rstrip()
        at = context.index(f"{name} visited")
        who = [{"text": name, "answer_start": at}] * (1 if one_answer else 2)
        qas = [
            {"id": f"q{p}-who", "question": "Who visited the town?", "answers": who},
            {
                "id": f"q{p}-when",
                "question": f"When did {name} visit the town?",
                "answers": [{"text": season, "answer_start": context.index(season, at)}],
            },
        ][: 1 if who_only else 2]
        if version == "2.0":
            qas = [dict(qa, is_impossible=False) for qa in qas] + [
                {
                    "id": f"q{p}-built",
                    "question": "Who built the bridge?",
                    "answers": [],
                    "is_impossible": True,
                }
            ]
        articles.append({"title": f"Article_{p}", "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": version, "data": articles}


def write_file(path, text):
    os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text if isinstance(text, str) else json.dumps(text, ensure_ascii=False))
    return os.fspath(path)


def original_features(
    path, vocab_file, training, version_2=False, seq_length=384, doc_stride=128, max_query_length=64
):
    """(examples, features) made by the original code: squad_lib with its FullTokenizer."""
    from absl import logging as absl_logging
    from official.nlp.data import squad_lib
    from official.nlp.tools import tokenization

    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    tokenizer.wordpiece_tokenizer.max_input_chars_per_word = (
        200  # google-research/bert's limit, as ours.
    )
    examples = squad_lib.read_squad_examples(
        path, is_training=training, version_2_with_negative=version_2
    )
    features = []
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.WARNING)  # It logs its first 20 features.
    try:
        squad_lib.convert_examples_to_features(
            examples,
            tokenizer,
            seq_length,
            doc_stride,
            max_query_length,
            training,
            (lambda f: features.append(f))
            if training
            else (lambda f, is_padding: features.append(f)),
            batch_size=1,
        )
    finally:
        absl_logging.set_verbosity(verbosity)
    return examples, features


def oracle_outputs(features):
    """Logits [L] per feature peaking at its training labels (the gold span or [CLS])."""
    outputs = {"start_logits": [], "end_logits": []}
    for f, length in enumerate(features.lengths):
        for key, label in (("start_logits", "start_positions"), ("end_logits", "end_positions")):
            logits = np.zeros(length, np.float32)
            logits[features.labels[label][f]] = 10.0
            outputs[key].append(logits)
    return outputs


def random_outputs(features, seed):
    rng = np.random.default_rng(seed)
    return {
        k: [rng.normal(size=n).astype(np.float32) for n in features.lengths]
        for k in ("start_logits", "end_logits")
    }


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lower_case=True)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return write_file(
        tmp_path_factory.mktemp("vocab") / "vocab.txt", "".join(t + "\n" for t in VOCAB)
    )


# === Reading ===


def test_reads_official_files(tmp_path):
    data = squad_dict(3, version="2.0")
    path = write_file(tmp_path / "dev-v2.0.json", data)
    examples = SquadTask("2.0").read(str(tmp_path), "dev")
    assert [e.qas_id for e in examples] == [
        qa["id"] for a in data["data"] for qa in a["paragraphs"][0]["qas"]
    ]
    first = data["data"][0]["paragraphs"][0]
    assert examples[0] == SquadExample(
        "q0-who",
        "Who visited the town?",
        first["context"],
        tuple((a["text"], a["answer_start"]) for a in first["qas"][0]["answers"]),
        False,
        "Article_0",
    )
    assert [e.is_impossible for e in examples[:3]] == [False, False, True] and examples[
        2
    ].answers == ()
    assert SquadTask("2.0").read(None, "dev", file=path) == examples  # --eval_file
    with pytest.raises(SquadDataError, match="train-v2.0.json"):
        SquadTask("2.0").read(str(tmp_path), "train")


def _mutate(data, change):
    data = json.loads(json.dumps(data))
    change(data["data"][1]["paragraphs"][0])
    return data


BAD_RECORDS = {  # name -> (change to article 1's paragraph, what the error names)
    "no context": (lambda p: p.pop("context"), r"Article_1.*no context.*q1-who"),
    "blank context": (lambda p: p.update(context=" \n"), r"Article_1.*no context"),
    "no question": (lambda p: p["qas"][1].pop("question"), r"Article_1.*'q1-when'.*'question'"),
    "answer_start not int": (
        lambda p: p["qas"][0]["answers"][0].update(answer_start="12"),
        r"'q1-who'.*'answer_start'",
    ),
    "empty answer text": (
        lambda p: p["qas"][0]["answers"][0].update(text=""),
        r"'q1-who'.*non-empty",
    ),
    "duplicate id": (lambda p: p["qas"][1].update(id="q1-who"), r"'q1-who'.*duplicate"),
    "qas not a list": (lambda p: p.update(qas={}), r"Article_1.*'qas'"),
}


@pytest.mark.parametrize("name", BAD_RECORDS)
def test_bad_records_name_file_and_record(tmp_path, name):
    change, message = BAD_RECORDS[name]
    path = write_file(tmp_path / "dev-v1.1.json", _mutate(squad_dict(3), change))
    with pytest.raises(SquadDataError, match=r"dev-v1\.1\.json.*" + message):
        SquadTask("1.1").read(None, "dev", file=path)


def test_bad_files(tmp_path):
    task = SquadTask("1.1")
    with pytest.raises(SquadDataError, match="not found"):
        task.read(str(tmp_path), "dev")
    path = write_file(tmp_path / "broken.json", json.dumps(squad_dict(2))[:-20])
    with pytest.raises(SquadDataError, match=r"broken\.json: not valid JSON"):
        task.read(None, "dev", file=path)
    with pytest.raises(SquadDataError, match="'data' list"):
        task.read(None, "dev", file=write_file(tmp_path / "list.json", "[]"))
    with pytest.raises(SquadDataError, match=r"SQuAD 2\.0, read as SQuAD 1\.1.*squad2"):
        task.read(None, "dev", file=write_file(tmp_path / "v2.json", squad_dict(2, version="2.0")))
    both = _mutate(squad_dict(2, version="2.0"), lambda p: p["qas"][0].update(is_impossible=True))
    with pytest.raises(
        SquadDataError, match="'q1-who': is_impossible is true but the question has answers"
    ):
        SquadTask("2.0").read(None, "dev", file=write_file(tmp_path / "both.json", both))


def test_locate_answer_as_the_original():
    context = "The leader was John Smith (1895-1943). Japanese  industry"
    assert locate_answer(context, "John Smith", 15) == (15, 25)
    assert locate_answer(context, "1895", 25) == (27, 31)  # Off by two, inside the words it covers.
    assert locate_answer(context, "Japan", 39) == (39, 44)
    assert (
        locate_answer(context, "Smith", 0) is None
    )  # Not in the words at 0..4: the original skips it.
    assert (
        locate_answer(context, "industry", 200) is None
        and locate_answer(context, "The", -1) is None
    )


def test_training_skips_answers_not_found_with_a_count(tmp_path, tokenizer, caplog):
    data = squad_dict(4, one_answer=True)
    data["data"][2]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = (
        0  # The season is not at 0.
    )
    examples = SquadTask("1.1").read(None, "train", file=write_file(tmp_path / "train.json", data))
    with caplog.at_level(logging.WARNING):
        features = SquadTask("1.1").encode(examples, tokenizer, 64, training=True)
    assert features.extras["skipped"] == [5] and 5 not in features.example_index
    assert "skipped 1 of 8 examples" in caplog.text and "q2-when" in caplog.text
    unanswered = [SquadExample("none", "Who?", "Anna.", (), title="T")]
    with pytest.raises(
        SquadDataError, match="Training needs an answer: question 'none' \\(article 'T'\\)"
    ):
        SquadTask("1.1").encode(unanswered, tokenizer, 64, training=True)
    # Evaluation keeps every question.
    assert sorted(set(SquadTask("1.1").encode(examples, tokenizer, 64).example_index)) == list(
        range(8)
    )


def test_tfds_reader(monkeypatch):
    texts = ["Anna visited the town in spring.", "Café Zürich."]
    rows = {
        "id": ["a", "b"],
        "title": ["T1", "T2"],
        "context": texts,
        "question": ["Who?", "Where?"],
        "answers": {
            "text": tf.ragged.constant([["Anna", "Anna"], ["Zürich"]]),
            "answer_start": tf.ragged.constant([[0, 0], [5]]),
        },
    }

    def as_dataset(self, split, **kwargs):
        assert str(split) == "validation"
        return tf.data.Dataset.from_tensor_slices(rows)

    with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_CODE, as_dataset_fn=as_dataset):
        examples = SquadTask("1.1").read(None, "dev", use_tfds=True)
    assert examples == [
        SquadExample("a", "Who?", texts[0], (("Anna", 0), ("Anna", 0)), False, "T1"),
        SquadExample("b", "Where?", texts[1], (("Zürich", 5),), False, "T2"),
    ]


# === Features ===


@pytest.mark.parametrize(
    "seq_length, doc_stride, max_query_length", [(384, 128, 64), (40, 8, 6), (32, 30, 4)]
)
def test_features_equal_the_originals(
    tmp_path, tokenizer, vocab_file, seq_length, doc_stride, max_query_length
):
    """Same windows, ids, type ids and training positions as squad_lib, on long contexts with
    accented, CJK and emoji words, questions cut at max_query_length, answers on token bounds."""
    path = write_file(
        tmp_path / "train.json", squad_dict(12, seed=3, filler=(2, 9), one_answer=True)
    )
    task = SquadTask("1.1", doc_stride=doc_stride, max_query_length=max_query_length)
    examples = task.read(None, "train", file=path)
    for training in (True, False):
        ours = task.encode(examples, tokenizer, seq_length, training=training)
        _, theirs = original_features(
            path,
            vocab_file,
            training,
            seq_length=seq_length,
            doc_stride=doc_stride,
            max_query_length=max_query_length,
        )
        assert ours.num_features == len(theirs) >= len(examples) + (seq_length < 384)
        assert ours.example_index.tolist() == [f.example_index for f in theirs]
        lengths = [sum(f.input_mask) for f in theirs]
        assert ours.inputs["input_word_ids"].to_list() == [
            f.input_ids[:n] for f, n in zip(theirs, lengths)
        ]
        assert ours.inputs["input_type_ids"].to_list() == [
            f.segment_ids[:n] for f, n in zip(theirs, lengths)
        ]
        for f, feature in enumerate(
            theirs
        ):  # The original's max-context map, over the window's tokens.
            offset = ours.extras["doc_offset"][f]
            assert ours.extras["max_context"][f].tolist() == [
                feature.token_is_max_context[offset + i]
                for i in range(len(ours.extras["max_context"][f]))
            ]
        if training:
            assert ours.labels["start_positions"].tolist() == [f.start_position for f in theirs]
            assert ours.labels["end_positions"].tolist() == [f.end_position for f in theirs]
            assert (ours.labels["start_positions"] > 0).any()
            assert (ours.labels["start_positions"] == 0).any() == (seq_length < 384)
        else:
            assert ours.labels == {}


def test_max_context_matches_the_original():
    from official.nlp.data.squad_lib import _check_is_max_context

    Span = collections.namedtuple("Span", ["start", "length"])
    for num_tokens, room, stride in [
        (1, 5, 2),
        (50, 10, 3),
        (50, 10, 10),
        (97, 20, 7),
        (300, 128, 64),
    ]:
        windows = doc_windows(num_tokens, room, stride)
        spans = [Span(*w) for w in windows]
        masks = max_context_masks(windows, num_tokens)
        for w, (start, length) in enumerate(windows):
            assert masks[w].tolist() == [
                _check_is_max_context(spans, w, start + i) for i in range(length)
            ]
    assert doc_windows(0, 10, 3) == [(0, 0)]  # An empty context still gets a feature.


def test_windows_labels_and_layout(tokenizer):
    context = " ".join(["the river flows past the old mill ."] * 6) + " Anna visited."
    example = SquadExample(
        "x", "Who visited the town in winter?", context, (("Anna", context.index("Anna")),)
    )
    features = SquadTask("1.1", doc_stride=10, max_query_length=4).encode(
        [example], tokenizer, 24, training=True
    )
    ids = features.inputs["input_word_ids"].to_list()
    question = [
        tokenizer.token_to_id(t) for t in ("who", "visited", "the", "town")
    ]  # Cut to 4 tokens.
    assert all(
        row[:6] == [tokenizer.cls_id] + question + [tokenizer.sep_id]
        and row[-1] == tokenizer.sep_id
        for row in ids
    )
    assert (
        all(len(row) <= 24 for row in ids) and len(ids) == 5
    )  # 51 context tokens, 17 per window, stride 10.
    assert features.extras["window_start"].tolist() == [0, 10, 20, 30, 40]
    anna = tokenizer.token_to_id("anna")
    want = [row.index(anna) if anna in row else 0 for row in ids]
    assert (
        features.labels["start_positions"].tolist()
        == want
        == features.labels["end_positions"].tolist()
    )
    assert want[-1] > 0 and want[0] == 0
    types = features.inputs["input_type_ids"].to_list()
    assert all(t == [0] * 6 + [1] * (len(t) - 6) for t in types)


def test_question_longer_than_the_sequence_is_an_error(tokenizer):
    example = SquadExample("long", "who " * 40, "Anna visited.", (("Anna", 0),))
    with pytest.raises(ValueError, match="seq_length 32 leaves no room.*'long'"):
        SquadTask("1.1").encode([example], tokenizer, 32)


# === Post-processing ===


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_postprocess_equals_the_originals(tmp_path, tokenizer, vocab_file, version):
    """Random logits: the same predictions, n-best lists (texts, probabilities, logits) and null
    odds as squad_lib's postprocess_output, on windows with shared tokens (max context)."""
    from official.nlp.data import squad_lib

    seq_length = 48
    path = write_file(
        tmp_path / "dev.json",
        squad_dict(10, seed=5, version=version, filler=(2, 8), emoji=False, spaces=False),
    )
    task = SquadTask(
        version, doc_stride=12, n_best_size=7, max_answer_length=5, null_score_diff_threshold=-4.0
    )
    examples = task.read(None, "dev", file=path)
    features = task.encode(examples, tokenizer, seq_length)
    outputs = random_outputs(features, seed=1)
    ours = task.predict(examples, features, outputs)
    original_examples, theirs = original_features(
        path, vocab_file, False, version == "2.0", seq_length, 12
    )
    assert features.num_features == len(theirs) > len(examples)
    raw = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
    pad = lambda x: [float(v) for v in x] + [-1e4] * (seq_length - len(x))  # noqa: E731
    results = [
        raw(f.unique_id, pad(s), pad(e))
        for f, s, e in zip(theirs, outputs["start_logits"], outputs["end_logits"])
    ]
    predictions, nbest, null_odds = squad_lib.postprocess_output(
        original_examples,
        theirs,
        results,
        7,
        5,
        True,
        version_2_with_negative=version == "2.0",
        null_score_diff_threshold=-4.0,
    )
    assert ours.predictions == predictions
    assert ours.nbest == {k: [dict(e) for e in v] for k, v in nbest.items()}
    assert ours.null_odds == dict(null_odds)
    if version == "2.0":
        assert "" in ours.predictions.values() and set(ours.predictions.values()) != {""}


def test_answers_are_exact_context_substrings(tokenizer):
    """Gold spans -> features -> logits at the gold tokens -> the gold text itself, after
    multi-byte characters, with odd whitespace, inside long windows; [UNK] words whole."""
    context = (
        "Zürich  東京 Café\n naïve 😀 walking... Unbelievable (Anna-Maria) visited, \ud800 東京."
    )
    spans = [
        "Zürich",
        "東京",
        "Café",
        "naïve",
        "😀",
        "walking",
        "Unbelievable",
        "Anna-Maria",
        "visited",
        "(Anna",
    ]
    examples = [
        SquadExample(f"q{i}", "Who?", context, ((t, context.index(t)),))
        for i, t in enumerate(spans)
    ]
    for seq_length, stride in ((128, 128), (12, 2)):
        task = SquadTask("1.1", doc_stride=stride)
        features = task.encode(examples, tokenizer, seq_length, training=True)
        assert task.predict(examples, features, oracle_outputs(features)).predictions == {
            e.qas_id: e.answers[0][0] for e in examples
        }


def test_no_valid_span_predicts_empty(tokenizer):
    example = SquadExample("q", "Who?", "Anna.", (("Anna", 0),))
    features = SquadTask("1.1").encode([example], tokenizer, 16)
    assert features.inputs["input_word_ids"].to_list() == [
        [2, 30, 7, 3, 38, 5, 3]
    ]  # [CLS] who ? [SEP] anna . [SEP]
    outputs = {
        "start_logits": [np.array([0, 0, 0, 5, 0, 0, 0], np.float32)],  # The best start on [SEP].
        "end_logits": [np.array([0, 0, 0, 0, 0, 5, 0], np.float32)],
    }
    prediction = SquadTask("1.1", n_best_size=1).predict([example], features, outputs)
    assert prediction.predictions == {"q": ""} and prediction.nbest == {"q": []}
    # A context of characters the tokenizer drops: one feature with an empty window.
    example = SquadExample("q", "Who?", "\x00\x01", (("\x00", 0),))
    features = SquadTask("1.1").encode([example], tokenizer, 16)
    assert features.inputs["input_word_ids"].to_list() == [[2, 30, 7, 3, 3]]
    assert SquadTask("1.1").predict(
        [example], features, random_outputs(features, 0)
    ).predictions == {"q": ""}


# === Evaluation ===


def _predictions(examples, rng):
    """Gold, perturbed (a word dropped or added, an article, other case), empty and missing."""
    out = {}
    for e in examples:
        gold = e.answers[0][0] if e.answers else ""
        kind = rng.integers(6)
        if kind == 0:
            out[e.qas_id] = gold
        elif kind == 1:
            out[e.qas_id] = f"The {gold.upper()}!"
        elif kind == 2:
            out[e.qas_id] = e.context[
                max(0, e.context.find(gold) - 12) : e.context.find(gold) + len(gold)
            ]
        elif kind == 3:
            out[e.qas_id] = ""
        elif kind == 4:
            out[e.qas_id] = str(rng.choice(NAMES + SEASONS))
    return out


def test_evaluation_equals_the_official_scripts(tmp_path):
    from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

    rng = np.random.default_rng(0)
    for version in ("1.1", "2.0"):
        data = squad_dict(30, seed=7, version=version)
        data["data"][0]["paragraphs"][0]["qas"][0]["answers"][1]["text"] = (
            "the"  # Normalizes to nothing.
        )
        examples = SquadTask(version).read(
            None, "dev", file=write_file(tmp_path / f"{version}.json", data)
        )
        gold = squad_eval.gold_answers(examples)
        for _ in range(3):
            predictions = _predictions(examples, rng)
            if version == "1.1":
                official = squad_evaluate_v1_1.evaluate(data["data"], predictions)
                ours = squad_eval.evaluate_v1(gold, predictions)
                assert ours["exact_match"] == pytest.approx(
                    100 * official["exact_match"], abs=1e-12
                )
                assert ours["f1"] == pytest.approx(100 * official["final_f1"], abs=1e-12)
                continue
            na_probs = {q: float(rng.choice([rng.normal(), 0.5, 1.5])) for q in predictions}
            for probs in (None, na_probs):
                official = squad_evaluate_v2_0.evaluate(data["data"], predictions, probs)
                renamed = {
                    k.replace("final_", "best_"): v
                    for k, v in official.items()
                    if not k.startswith("pr_")
                }
                assert squad_eval.evaluate_v2(gold, predictions, probs) == renamed
    assert squad_eval.normalize_answer("  The  Café, an (old) mill!") == "café old mill"


def test_task_metrics_and_prediction_files(tmp_path, tokenizer):
    for version in ("1.1", "2.0"):
        task = SquadTask(version)
        examples = task.read(
            None, "dev", file=write_file(tmp_path / "d.json", squad_dict(6, version=version))
        )
        features = task.encode(examples, tokenizer, 64, training=True)
        metrics = task.evaluate(examples, features, oracle_outputs(features))
        assert metrics["exact_match"] == metrics["f1"] == 100.0
        if version == "2.0":
            assert metrics["HasAns_exact"] == metrics["NoAns_exact"] == metrics["best_f1"] == 100.0
            assert {
                "HasAns_total",
                "NoAns_f1",
                "best_exact",
                "best_exact_thresh",
                "best_f1_thresh",
            } <= set(metrics)
        out = tmp_path / version
        out.mkdir()
        paths = task.write_predictions(
            "dev", examples, features, oracle_outputs(features), str(out)
        )
        names = ["predictions.json", "nbest_predictions.json"] + (
            ["null_odds.json"] if version == "2.0" else []
        )
        assert [os.path.basename(p) for p in paths] == names and sorted(os.listdir(out)) == sorted(
            names
        )
        with open(out / "predictions.json", encoding="utf-8") as f:
            assert json.load(f) == {
                e.qas_id: (e.answers[0][0] if e.answers else "") for e in examples
            }
        with open(out / "nbest_predictions.json", encoding="utf-8") as f:
            nbest = json.load(f)
        assert set(nbest["q0-who"][0]) == {"text", "probability", "start_logit", "end_logit"}


def test_registry_recipes_and_settings():
    squad1, squad2 = registry.get_task("squad1"), registry.get_task("squad2")
    assert (squad1.name, squad1.version, squad2.name, squad2.version) == (
        "squad1",
        "1.1",
        "squad2",
        "2.0",
    )
    assert squad1.recipe == {
        "seq_length": 384,
        "learning_rate": 5e-5,
        "num_train_epochs": 3,
        "batch_size": 32,
    }
    assert squad2.recipe == {
        "seq_length": 384,
        "learning_rate": 5e-5,
        "num_train_epochs": 2,
        "batch_size": 48,
    }
    assert (
        squad1.doc_stride,
        squad1.max_query_length,
        squad1.n_best_size,
        squad1.max_answer_length,
        squad1.null_score_diff_threshold,
    ) == (128, 64, 20, 30, 0.0)
    assert squad1.token_outputs == ("start_logits", "end_logits") and squad1.predict_splits == {
        "dev": "predictions.json"
    }
    with pytest.raises(ValueError, match="version"):
        SquadTask("3.0")
    with pytest.raises(ValueError, match="doc_stride"):
        SquadTask("1.1", doc_stride=0)


# === The runner ===


@pytest.fixture(scope="module")
def squad_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("squad")
    for version in ("1.1", "2.0"):
        write_file(
            root / version / f"train-v{version}.json",
            squad_dict(240, seed=11, version=version, one_answer=True, who_only=True),
        )
        write_file(
            root / version / f"dev-v{version}.json",
            squad_dict(48, seed=12, version=version, who_only=True),
        )
    return root, write_file(root / "vocab.txt", "".join(t + "\n" for t in VOCAB))


def test_fine_tune_learns_squad(squad_dirs, tmp_path):
    root, vocab = squad_dirs
    model_dir = str(tmp_path / "run")
    summary = run_finetuning(
        task="squad1",
        data_dir=str(root / "1.1"),
        model="tiny",
        vocab_file=vocab,
        model_dir=model_dir,
        do_train=True,
        do_eval=True,
        do_predict=True,
        seq_length=64,
        learning_rate=1e-3,
        num_train_epochs=3,
        batch_size=16,
        verbose=False,
        plot=False,
    )
    # Trivial baselines: the context's first word, the most frequent answer.
    examples = SquadTask("1.1").read(str(root / "1.1"), "dev")
    gold = squad_eval.gold_answers(examples)
    common = collections.Counter(e.answers[0][0] for e in examples).most_common(1)[0][0]
    baseline = max(
        squad_eval.evaluate_v1(gold, {e.qas_id: e.context.split()[0] for e in examples})["f1"],
        squad_eval.evaluate_v1(gold, {e.qas_id: common for e in examples})["f1"],
    )
    assert baseline < 30 and summary["eval"]["exact_match"] >= 90.0, summary["eval_history"]
    with open(os.path.join(model_dir, "eval_results.json")) as f:
        results = json.load(f)
    assert results["task"] == "squad1" and results["f1"] == summary["eval"]["f1"]
    with open(os.path.join(model_dir, "predictions", "predictions.json")) as f:
        predictions = json.load(f)
    assert squad_eval.evaluate_v1(gold, predictions) == {
        k: summary["eval"][k] for k in ("exact_match", "f1")
    }
    with open(os.path.join(model_dir, "model", "task.json")) as f:
        info = json.load(f)
    assert (
        info["problem"] == "span" and info["squad_version"] == "1.1" and info["doc_stride"] == 128
    )


def test_fine_tune_squad2_outputs(squad_dirs, tmp_path):
    root, vocab = squad_dirs
    model_dir = str(tmp_path / "run")
    summary = run_finetuning(
        task="squad2",
        data_dir=str(root / "2.0"),
        model="tiny",
        vocab_file=vocab,
        model_dir=model_dir,
        do_train=True,
        do_eval=True,
        do_predict=True,
        seq_length=64,
        num_train_epochs=1,
        batch_size=16,
        max_train_examples=64,
        verbose=False,
        plot=False,
    )
    with open(os.path.join(model_dir, "eval_results.json")) as f:
        results = json.load(f)
    assert results["task"] == "squad2" and {
        "exact_match",
        "f1",
        "HasAns_exact",
        "HasAns_f1",
        "NoAns_exact",
        "NoAns_f1",
        "best_exact",
        "best_exact_thresh",
        "best_f1",
        "best_f1_thresh",
    } <= set(results)
    assert results["NoAns_total"] == results["HasAns_total"] == 48
    with open(os.path.join(model_dir, "predictions", "null_odds.json")) as f:
        null_odds = json.load(f)
    with open(os.path.join(model_dir, "predictions", "predictions.json")) as f:
        predictions = json.load(f)
    assert set(null_odds) == set(predictions) and len(predictions) == 96
    assert all((p == "") == (null_odds[q] > 0.0) for q, p in predictions.items())
    assert results["best_f1"] >= results["f1"] and summary["eval"]["best_f1"] == results["best_f1"]
