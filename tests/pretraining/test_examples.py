"""Static pre-training examples: masking and pair statistics, the record format, determinism, and
interoperability with tf-models-official's create_pretraining_data (the original algorithm)."""

import random

import generated_corpus
import numpy as np
import pytest
import tensorflow as tf
from official.nlp.data import create_pretraining_data as original
from official.nlp.tools import tokenization

from keras_bert.pretraining import corpus as corpus_lib
from keras_bert.pretraining import examples, records
from keras_bert.pretraining.create_pretraining_data import ExampleFactory, create_pretraining_data
from keras_bert.pretraining.example_proto import serialize_examples
from keras_bert.text.tokenizer import BertTokenizer

S, P = 64, 10
SETTINGS = dict(
    max_seq_length=S,
    max_predictions_per_seq=P,
    masked_lm_prob=0.15,
    short_seq_prob=0.1,
    dupe_factor=1,
    whole_word_masking=False,
    seed=3,
)


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(generated_corpus.VOCABULARY)


@pytest.fixture(scope="module")
def chunk(tokenizer):
    return ExampleFactory(tokenizer, SETTINGS).tokenize(generated_corpus.documents(400, seed=1))


def _mask(tokenizer, chunk, whole_word, seed=0, max_predictions=P):
    pairs = examples.create_pairs(chunk, S, 0.1, random.Random(seed))
    pairs = examples.truncate_pairs(pairs, S - 3, np.random.default_rng(seed))
    ids, _, lengths = examples.pack_pairs(
        chunk.token_ids, pairs, S, tokenizer.cls_id, tokenizer.sep_id
    )
    is_cont = np.array([t.startswith("##") for t in tokenizer.vocabulary]) if whole_word else None
    out = examples.mask_tokens(
        ids,
        lengths,
        max_predictions,
        0.15,
        tokenizer.vocab_size,
        tokenizer.mask_id,
        (tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id),
        np.random.default_rng(seed + 1),
        is_cont,
    )
    return ids, lengths, out


@pytest.mark.parametrize("whole_word", [False, True])
def test_masking_statistics(tokenizer, chunk, whole_word):
    ids, lengths, out = _mask(tokenizer, chunk, whole_word, max_predictions=100)
    weights = out["masked_lm_weights"]
    count = weights.sum(axis=1).astype(int)
    expected = np.maximum(1, np.round(lengths * 0.15)).astype(int)
    if whole_word:  # Words are taken while they fit: never more, rarely fewer.
        assert np.all(count <= expected) and np.mean(count) > 0.97 * np.mean(expected)
    else:
        np.testing.assert_array_equal(count, expected)
    rows, slots = np.nonzero(weights)
    positions = out["masked_lm_positions"][rows, slots]
    # Labels are the original ids; positions are sorted and never special tokens or padding.
    np.testing.assert_array_equal(out["masked_lm_ids"][rows, slots], ids[rows, positions])
    assert np.all(np.diff(out["masked_lm_positions"], axis=1)[weights[:, 1:] > 0] > 0)
    assert not np.isin(
        ids[rows, positions], [tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id]
    ).any()
    assert np.all(positions < lengths[rows])
    assert np.all(out["masked_lm_positions"][weights == 0] == 0) and np.all(
        out["masked_lm_ids"][weights == 0] == 0
    )
    # Unchosen tokens are unchanged; chosen ones are 80% [MASK], 10% unchanged, 10% random.
    chosen = np.zeros(ids.shape, bool)
    chosen[rows, positions] = True
    np.testing.assert_array_equal(out["input_ids"][~chosen], ids[~chosen])
    new = out["input_ids"][rows, positions]
    old = ids[rows, positions]
    is_mask = new == tokenizer.mask_id
    same = (new == old) & ~is_mask
    n = len(new)
    assert n > 5000
    assert abs(is_mask.mean() - 0.8) < 0.03
    # A random id equals the original with probability 1/V: expected share 0.1 + 0.1 / V.
    assert abs(same.mean() - (0.1 + 0.1 / tokenizer.vocab_size)) < 0.03
    assert abs((~is_mask & ~same).mean() - 0.1 * (1 - 1 / tokenizer.vocab_size)) < 0.03


def test_whole_word_groups_are_complete(tokenizer, chunk):
    ids, lengths, out = _mask(tokenizer, chunk, whole_word=True)
    is_cont = np.array([t.startswith("##") for t in tokenizer.vocabulary])
    chosen = np.zeros(ids.shape, bool)
    rows, slots = np.nonzero(out["masked_lm_weights"])
    chosen[rows, out["masked_lm_positions"][rows, slots]] = True
    special = np.isin(ids, [tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id])
    cont = is_cont[ids]
    assert cont[chosen].sum() > 100  # Multi-piece words are masked...
    # ...always whole: a "##" piece is chosen exactly when the piece before it is (a "##" piece
    # right after [CLS]/[SEP], left by truncation, is a word of its own as in the original).
    inner = cont[:, 1:] & ~special[:, :-1]
    np.testing.assert_array_equal(chosen[:, 1:][inner], chosen[:, :-1][inner])
    assert (cont[:, 1:] & special[:, :-1] & chosen[:, 1:]).any()


def _document_of(chunk, token_positions):
    sentence = np.searchsorted(chunk.sentence_starts, token_positions, side="right") - 1
    return np.searchsorted(chunk.document_starts, sentence, side="right") - 1


def test_pairs_follow_the_original_algorithm(tokenizer, chunk):
    pairs = examples.create_pairs(chunk, S, 0.1, random.Random(5))
    doc_a = _document_of(chunk, pairs.a_start)
    doc_b = _document_of(chunk, pairs.b_start)
    rand = pairs.is_random_next
    # IsNext: B starts right after A in the same document; NotNext: B is from another document.
    np.testing.assert_array_equal(pairs.b_start[~rand], (pairs.a_start + pairs.a_length)[~rand])
    assert np.all(doc_a[~rand] == doc_b[~rand]) and np.all(doc_a[rand] != doc_b[rand])
    # Segments are whole sentences before truncation.
    assert (
        np.isin(pairs.a_start, chunk.sentence_starts).all()
        and np.isin(pairs.b_start, chunk.sentence_starts).all()
    )
    # Same statistics as the original create_instances_from_document on the same documents.
    vocab = list(tokenizer.vocabulary)
    docs = [
        [
            [
                vocab[t]
                for t in chunk.token_ids[chunk.sentence_starts[s] : chunk.sentence_starts[s + 1]]
            ]
            for s in range(chunk.document_starts[d], chunk.document_starts[d + 1])
        ]
        for d in range(chunk.num_documents)
    ]
    rng = random.Random(5)
    reference = [
        inst
        for d in range(len(docs))
        for inst in original.create_instances_from_document(docs, d, S, 0.1, 0.15, P, vocab, rng)
    ]
    ref_random = np.mean([inst.is_random_next for inst in reference])
    ref_len = np.mean([len(inst.tokens) for inst in reference])
    ours_len = np.mean(np.minimum(pairs.a_length + pairs.b_length, S - 3) + 3)
    assert abs(len(rand) - len(reference)) < 0.05 * len(reference)
    assert abs(rand.mean() - ref_random) < 0.05
    assert abs(ours_len - ref_len) < 0.05 * ref_len


def test_truncation_matches_the_original_loop():
    rng = np.random.default_rng(0)
    la, lb = rng.integers(1, 90, 2000), rng.integers(1, 90, 2000)
    pairs = examples.PairRanges(
        np.full(2000, 1000), la, np.full(2000, 5000), lb, np.zeros(2000, bool)
    )
    out = examples.truncate_pairs(pairs, 61, np.random.default_rng(1))
    for i in range(2000):
        a, b = list(range(la[i])), list(range(lb[i]))
        original.truncate_seq_pair(a, b, 61, random.Random(i))
        assert (out.a_length[i], out.b_length[i]) == (len(a), len(b))
    # Removed tokens come from both ends of a segment: the kept range stays inside the original one.
    assert np.all(out.a_start >= 1000) and np.all(out.a_start + out.a_length <= 1000 + la)
    front = out.a_start - 1000
    assert 0.4 < front.sum() / max((la - out.a_length).sum(), 1) < 0.6


def test_serialized_records_equal_tf_train_example():
    rng = np.random.default_rng(0)
    features = {
        "input_ids": rng.integers(0, 2**40, (5, 7)),
        "input_mask": rng.integers(0, 2, (5, 7)),
        "masked_lm_weights": rng.random((5, 3)).astype(np.float32),
        "next_sentence_labels": rng.integers(0, 300, (5, 1)),
    }
    for i, record in enumerate(serialize_examples(features)):
        expected = tf.train.Example(
            features=tf.train.Features(
                feature={
                    k: tf.train.Feature(float_list=tf.train.FloatList(value=v[i]))
                    if v.dtype == np.float32
                    else tf.train.Feature(int64_list=tf.train.Int64List(value=v[i]))
                    for k, v in features.items()
                }
            )
        )
        assert tf.train.Example.FromString(record) == expected


def _parse(files, spec):
    return [
        {k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
        for r in tf.data.TFRecordDataset(files)
    ]


def _original_records(tmp_path, corpus, vocab_file):
    """Runs tf-models-official's create_pretraining_data functions on the corpus."""
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    instances = original.create_training_instances(
        [corpus],
        tokenizer,
        original.get_processor_text_fn(False, True),
        S,
        2,
        0.1,
        0.15,
        P,
        random.Random(1),
    )
    path = str(tmp_path / "original.tfrecord")
    original.write_instance_to_example_files(instances, tokenizer, S, P, [path], False, False)
    return path


def test_records_match_the_original_format(tmp_path):
    vocab_file = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(
        tmp_path / "corpus.txt", generated_corpus.documents(60, seed=2)
    )
    ours = create_pretraining_data(
        corpus,
        str(tmp_path / "ours"),
        vocab_file,
        max_seq_length=S,
        max_predictions_per_seq=P,
        dupe_factor=2,
        num_shards=3,
        seed=1,
    )
    theirs = _original_records(tmp_path, corpus, vocab_file)
    # Same feature names and kinds (int64_list / float_list) and lengths as the original's records.

    def first(f):
        return tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(f))).numpy())

    def kinds(ex):
        return {
            k: (v.WhichOneof("kind"), len(getattr(v, v.WhichOneof("kind")).value))
            for k, v in ex.features.feature.items()
        }

    assert kinds(first(ours[0])) == kinds(first(theirs))
    # Both parse with the reader's spec; examples are well formed.
    spec = records.feature_spec(S, P)
    ours_parsed, theirs_parsed = _parse(ours, spec), _parse([theirs], spec)
    assert abs(len(ours_parsed) - len(theirs_parsed)) < 0.1 * len(theirs_parsed)
    for ex in ours_parsed:
        length = ex["input_mask"].sum()
        assert (
            ex["input_ids"][0] == 2
            and ex["input_ids"][length - 1] == 3
            and not ex["input_ids"][length:].any()
        )
        assert ex["segment_ids"][length - 1] == 1 and not ex["segment_ids"][length:].any()
    for key in ("next_sentence_labels", "masked_lm_weights"):
        ours_mean = np.mean([ex[key].sum() for ex in ours_parsed])
        theirs_mean = np.mean([ex[key].sum() for ex in theirs_parsed])
        assert abs(ours_mean - theirs_mean) < 0.1 * theirs_mean, key


def test_deterministic_across_workers_and_atomic(tmp_path):
    vocab_file = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(
        tmp_path / "corpus.txt", generated_corpus.documents(120, seed=3)
    )
    run = lambda name, workers, seed=7: create_pretraining_data(  # noqa: E731
        corpus,
        str(tmp_path / name),
        vocab_file,
        max_seq_length=S,
        max_predictions_per_seq=P,
        dupe_factor=2,
        num_shards=2,
        num_workers=workers,
        seed=seed,
        documents_per_chunk=30,
        whole_word_masking=True,
    )
    one, two, again, other = run("one", 1), run("two", 2), run("again", 1), run("other", 1, seed=8)
    read = lambda files: [r.numpy() for f in files for r in tf.data.TFRecordDataset(f)]  # noqa: E731
    assert read(one) == read(two) == read(again)
    assert read(one) != read(other)
    # Documents from any source (here tf.data, as tfds corpora come) give the same records as the
    # file.
    dataset = tf.data.Dataset.from_tensor_slices(
        ["\n".join(d) for d in generated_corpus.documents(120, seed=3)]
    )
    from_dataset = create_pretraining_data(
        None,
        str(tmp_path / "dataset"),
        vocab_file,
        max_seq_length=S,
        max_predictions_per_seq=P,
        dupe_factor=2,
        num_shards=2,
        seed=7,
        documents_per_chunk=30,
        whole_word_masking=True,
        documents=corpus_lib.dataset_documents(dataset),
    )
    assert read(from_dataset) == read(one)
    assert not list((tmp_path / "two").glob("*.tmp"))


def test_helper_process_gives_the_same_examples_and_imports_only_what_it_needs(
    tmp_path, capfd, monkeypatch
):
    """A spawned helper (as create_pretraining_data starts them) imports the writer and the
    tokenizer, not the runner, models, checkpoints or tasks (its imports: -X importtime on
    stderr)."""
    import multiprocessing
    import re

    from keras_bert.pretraining.static_records import _helper_loop

    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")

    vocab_file = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    docs = generated_corpus.documents(40, seed=8)
    settings = dict(SETTINGS, dupe_factor=2, whole_word_masking=True)
    context = multiprocessing.get_context("spawn")
    tasks, results = context.Queue(), context.Queue()
    for task in [(3, docs), None]:
        tasks.put(task)
    helper = context.Process(target=_helper_loop, args=(tasks, results, vocab_file, True, settings))
    helper.start()
    index, theirs = results.get(timeout=240)
    helper.join(timeout=60)
    ours = ExampleFactory(BertTokenizer(vocab_file), settings)(3, docs)
    assert index == 3 and len(ours) == 2 and ours[0][0]
    assert [records for records, _ in theirs] == [records for records, _ in ours]
    imported = set(re.findall(r"^import time:.*\|\s+(\S+)$", capfd.readouterr().err, re.MULTILINE))
    assert {"keras_bert.pretraining.static_records", "keras_bert.text.tokenizer"} <= imported
    needless = (
        "keras_bert.pretraining.runner",
        "keras_bert.models",
        "keras_bert.checkpoints",
        "keras_bert.tasks",
        "keras_bert.training.optimizers",
        "keras_bert.config",
    )
    assert not [m for m in imported if m.startswith(needless)]


def test_chunks_keep_other_documents_for_random_next():
    from keras_bert.pretraining.static_records import _chunks

    sizes = lambda n, per=10, cap=10**6: [len(c) for c in _chunks([["s."]] * n, per, cap)]  # noqa: E731
    assert (
        sizes(25) == [10, 10, 5] and sizes(24) == [10, 14] and sizes(10) == [10] and sizes(3) == [3]
    )
    big = [["s."] * 30] * 5
    assert [len(c) for c in _chunks(big, 10, 50)] == [2, 3]  # The sentence cap keeps 2+ documents.


def test_bad_input(tmp_path):
    vocab_file = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    with pytest.raises(FileNotFoundError, match="nothing"):
        create_pretraining_data(str(tmp_path / "nothing*.txt"), str(tmp_path / "out"), vocab_file)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n")
    with pytest.raises(ValueError, match="no examples"):
        create_pretraining_data(str(empty), str(tmp_path / "out"), vocab_file)
    assert not list((tmp_path / "out").glob("*.tfrecord*"))
    with pytest.raises(FileNotFoundError, match="no_vocab.txt"):
        create_pretraining_data(str(empty), str(tmp_path / "out2"), str(tmp_path / "no_vocab.txt"))
    assert not (tmp_path / "out2").exists()
    with pytest.raises(ValueError, match="max_seq_length"):
        create_pretraining_data(str(empty), str(tmp_path / "out"), vocab_file, max_seq_length=4)


def test_command_line(tmp_path):
    import subprocess
    import sys

    vocab_file = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(
        tmp_path / "corpus.txt", generated_corpus.documents(20, seed=5)
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_bert.pretraining.create_pretraining_data",
            f"--input_file={corpus}",
            f"--output_dir={tmp_path / 'cli'}",
            f"--vocab_file={vocab_file}",
            "--max_seq_length=32",
            "--max_predictions_per_seq=5",
            "--dupe_factor=1",
            "--num_shards=2",
            "--num_workers=1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    files = result.stdout.split()
    assert len(files) == 2 and "examples/s" in result.stderr
    parsed = _parse(files, records.feature_spec(32, 5))
    assert len(parsed) > 10
