"""Extra SQuAD inputs for distillation (`keras_bert.tasks.squad.augment`): cloze questions,
questions on neighbouring paragraphs, noised questions; the split guard; the written file read
by the squad1 task as `--unlabeled_file` and appended with no gold labels."""

import json
import subprocess
import sys
import types

import numpy as np
import pytest
from finetune_cases import VOCAB

from keras_bert.tasks import registry
from keras_bert.tasks.distillation.runner import with_unlabeled
from keras_bert.tasks.distillation.trainer import GOLD
from keras_bert.tasks.features import FeatureSet
from keras_bert.tasks.squad import augment
from keras_bert.tasks.squad.data import parse_squad
from keras_bert.text.tokenizer import BertTokenizer

PARAGRAPHS = [
    "The college was founded in 1850 by John Smith. It had 300 students then.",
    "Its library holds books. The Old Main building burned down in 1901!",
    "Nothing here has a name or a number.",
]


def _data(articles=((0, 1, 2), (2,))):
    """SQuAD JSON: articles of the given paragraphs, two questions per paragraph."""
    return {
        "version": "1.1",
        "data": [
            {
                "title": f"a{a}",
                "paragraphs": [
                    {
                        "context": PARAGRAPHS[p],
                        "qas": [
                            {
                                "id": f"q{a}{i}{k}",
                                "question": f"Who wrote paper number {k} of {i}?",
                                "answers": [{"text": "The", "answer_start": 0}],
                            }
                            for k in range(2)
                        ],
                    }
                    for i, p in enumerate(paragraphs)
                ],
            }
            for a, paragraphs in enumerate(articles)
        ],
    }


def _questions(data):
    return {
        qa["id"]: (qa["question"], p["context"])
        for a in data["data"]
        for p in a["paragraphs"]
        for qa in p["qas"]
    }


def test_cloze_candidates_blank_years_numbers_and_names():
    assert augment.cloze_candidates("The college was founded in 1850 by John Smith.") == [
        ("The college was founded in when by John Smith?", "1850"),
        ("The college was founded in 1850 by what?", "John Smith"),
    ]
    # The opening capital is not a name; a clause keeps clause_words each side.
    assert augment.cloze_candidates("It had 300 students in all of Old Main", clause_words=2) == [
        ("It had how many students in?", "300"),
        ("all of what?", "Old Main"),
    ]
    assert augment.cloze_candidates("Nothing here has a name") == []
    assert augment.sentences(PARAGRAPHS[1]) == [
        "Its library holds books.",
        "The Old Main building burned down in 1901!",
    ]


def test_each_kind_keeps_the_training_paragraphs():
    data = _data()
    source = _questions(data)
    options = augment.AugmentOptions(cloze_per_paragraph=5, noise_rate=0.5, seed=3)
    out = augment.augment_squad(data, options)
    questions = _questions(out)
    assert len(questions) == sum(len(p["qas"]) for a in out["data"] for p in a["paragraphs"])
    examples = parse_squad(out, "1.1")  # Reads as SQuAD (unique ids, contexts present).
    assert {e.context for e in examples} <= set(PARAGRAPHS)
    assert all(not e.answers for e in examples)

    neighbours = {k: v for k, v in questions.items() if k.endswith("-n1")}
    # Article 0's questions move one paragraph on (wrapping); one-paragraph article 1: none.
    assert sorted(neighbours) == sorted(f"{q}-n1" for q in source if q.startswith("q0"))
    for qas_id, (question, context) in neighbours.items():
        i = int(qas_id[2])
        assert (question, context) == (source[qas_id[:-3]][0], PARAGRAPHS[(i + 1) % 3])

    noised = {k: v for k, v in questions.items() if k.endswith("-r1")}
    assert sorted(noised) == sorted(f"{q}-r1" for q in source)
    changed = 0
    for qas_id, (question, context) in noised.items():
        original = source[qas_id[:-3]][0].split()
        words = question.split()
        assert len(words) == len(original) and words[0] == original[0]
        replaced = [w for w, o in zip(words, original) if w != o]
        assert set(replaced) <= set(context.split())
        changed += len(replaced)
    assert changed > 0

    cloze = {k: v for k, v in questions.items() if k.startswith("cloze-")}
    # Paragraph 0: both sentences; 1: the second only; 2: none (no name, no number).
    assert sorted(cloze) == ["cloze-0-0-0", "cloze-0-0-1", "cloze-0-1-1"]
    sentence_of = {k: augment.sentences(v[1])[int(k.split("-")[-1])] for k, v in cloze.items()}
    for qas_id, (question, _) in cloze.items():
        assert question in [q for q, _ in augment.cloze_candidates(sentence_of[qas_id])]
    assert augment.augment_squad(data, options) == out  # Deterministic for a seed.
    assert augment.augment_squad(data, augment.AugmentOptions(noise_rate=0.5, seed=4)) != out


def test_options_choose_the_kinds_and_counts():
    data = _data(articles=((0, 1, 2),))
    out = augment.augment_squad(
        data, augment.AugmentOptions(kinds=("neighbours",), neighbours=5, seed=0)
    )
    ids = sorted(_questions(out))
    # At most the article's other two paragraphs.
    assert ids == sorted(f"q0{i}{k}-n{n}" for i in range(3) for k in range(2) for n in (1, 2))
    out = augment.augment_squad(
        data, augment.AugmentOptions(kinds=("cloze",), cloze_per_paragraph=1)
    )
    assert [len(p["qas"]) for p in out["data"][0]["paragraphs"]] == [1, 1]
    for bad in (dict(kinds=("paraphrase",)), dict(kinds=()), dict(noised=0), dict(noise_rate=0)):
        with pytest.raises(ValueError, match="must be"):
            augment.AugmentOptions(**bad)


def test_the_dev_split_is_refused_and_nothing_written(tmp_path):
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    train.write_text(json.dumps(_data()))
    dev.write_text(json.dumps(_data(articles=((1,),))))
    output = tmp_path / "extra.json"
    command = [
        sys.executable, "-m", "keras_bert.tasks.squad.augment", f"--train_file={train}",
        f"--output={output}", f"--exclude_file={dev}",
    ]  # fmt: skip
    failed = subprocess.run(command, capture_output=True, text=True)
    assert failed.returncode != 0
    assert "1 paragraphs of the training articles are also in the exclude file" in failed.stderr
    assert not output.exists()
    dev.write_text(json.dumps({"data": [{"paragraphs": [{"context": "Elsewhere.", "qas": []}]}]}))
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "questions ({'cloze': 3, 'neighbours': 6, 'noised': 8})" in done.stdout
    assert len(_questions(json.loads(output.read_text()))) == 17


def test_the_file_is_unlabeled_input_of_the_squad_task(tmp_path):
    """What `keras-bert-distill --unlabeled_file` does with it: the squad1 task reads every
    question, and the runner appends their features with GOLD 0 and ignored span labels."""
    words = "college was founded by john smith it had students then".split()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(list(VOCAB) + [w for w in words if w not in VOCAB]) + "\n")
    tokenizer = BertTokenizer(str(vocab), lower_case=True)
    data = _data(articles=((0,),))
    path = tmp_path / "extra.json"
    counts = augment.write_augmented(str(_train(tmp_path, data)), str(path))
    assert counts == {"cloze": 2, "neighbours": 0, "noised": 2}
    task = registry.get_task("squad1", dict(doc_stride=8, max_query_length=6))
    examples = task.read_unlabeled(str(path))
    assert [e.qas_id for e in examples] == sorted(_questions(json.loads(path.read_text())))
    gold = task.read(None, "train", file=str(tmp_path / "train.json"))
    train = task.encode(gold, tokenizer, 24, training=True)
    config = types.SimpleNamespace(unlabeled_file=str(path), task_object=task, seq_length=24)
    joined = with_unlabeled(config, tokenizer, train)
    extra = joined.num_features - train.num_features
    assert extra >= len(examples) and isinstance(joined, FeatureSet)
    np.testing.assert_array_equal(joined.labels[GOLD], [1] * train.num_features + [0] * extra)
    for key in ("start_positions", "end_positions"):
        assert (np.asarray(joined.labels[key])[train.num_features :] < 0).all()


def _train(tmp_path, data):
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    return path
