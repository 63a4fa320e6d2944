"""RoBERTa's full-sentence rows (`create_pretraining_data(objective="mlm")`, issue 44): exact rows
of a hand-computed corpus (sentences contiguous, [SEP] between documents, long sentences truncated
as the original), masked as the other objectives; written from the command line too, and trained
by the runner's objective mlm."""

import json

import generated_corpus
import numpy as np
import pytest
import tensorflow as tf

import keras_bert
from keras_bert.pretraining import records, runner
from keras_bert.pretraining.static_records import create_pretraining_data

S, P, DUPES = 12, 3, 6  # A row holds S - 2 = 10 tokens between [CLS] and [SEP].
LONG = "wca wcb wcc wcd wce wcf wcg wch wda wdb wdc wdd ."  # 13 tokens: truncated to 10.
DOCUMENTS = [
    ["waa wab .", "wac wad wae waf .", "wag wah ."],
    ["wba wbb wbc ."],
    [LONG, "wde ."],
    ["wea ."],
]
# The rows by hand: a sentence that does not fit starts the next row; [SEP] between documents.
ROWS = [
    "[CLS] waa wab . wac wad wae waf . [SEP]",
    "[CLS] wag wah . [SEP] wba wbb wbc . [SEP]",
    "[CLS] wde . [SEP] wea . [SEP]",
]
INDEX = {token: i for i, token in enumerate(generated_corpus.VOCABULARY)}


def _ids(text):
    return tuple(INDEX[t] for t in text.split())


def _write(tmp_path, name="mlm", **kwargs):
    vocab = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(tmp_path / "corpus.txt", DOCUMENTS)
    settings = dict(max_seq_length=S, max_predictions_per_seq=P, dupe_factor=DUPES, seed=7)
    out = tmp_path / name
    files = create_pretraining_data(corpus, str(out), vocab, objective="mlm", **settings, **kwargs)
    return files, json.loads((out / "pretraining-stats.json").read_text())


def _read(files):
    spec = records.feature_spec(S, P)
    parse = lambda r: tf.io.parse_single_example(r, spec)  # noqa: E731
    return [{k: v.numpy() for k, v in parse(r).items()} for r in tf.data.TFRecordDataset(files)]


def _unmasked(record):
    """The row's tokens before masking (the masked positions' original ids written back)."""
    n, real = record["input_mask"].sum(), record["masked_lm_weights"] > 0
    ids = record["input_ids"].copy()
    positions = record["masked_lm_positions"][real]
    assert ((positions > 0) & (positions < n - 1)).all()  # Never [CLS], the last [SEP] or padding.
    assert not np.isin(record["masked_lm_ids"][real], [INDEX["[CLS]"], INDEX["[SEP]"]]).any()
    ids[positions] = record["masked_lm_ids"][real]
    assert (ids[n:] == 0).all() and (record["input_mask"][:n] == 1).all()
    return tuple(ids[:n])


def test_full_sentence_rows_of_a_hand_computed_corpus(tmp_path):
    files, stats = _write(tmp_path)
    assert stats["examples"] == 4 * DUPES and stats["random_next"] == 0
    assert stats["settings"]["objective"] == "mlm"
    rows = _read(files)
    assert len(rows) == 4 * DUPES
    long, fronts = _ids(LONG), set()
    for dupe in range(DUPES):  # One shard: each duplicate's rows one after another.
        mine = rows[4 * dupe : 4 * dupe + 4]
        unmasked = [_unmasked(r) for r in mine]
        rest = [r for r in unmasked if r not in {_ids(row) for row in ROWS}]
        assert sorted(set(unmasked) - set(rest)) == sorted(_ids(row) for row in ROWS)
        assert len(rest) == 1 and len(rest[0]) == S  # Every sentence once: the long one alone.
        window = rest[0][1:-1]
        front = [f for f in range(len(long) - (S - 2) + 1) if long[f : f + S - 2] == window]
        assert rest[0][0] == INDEX["[CLS]"] and rest[0][-1] == INDEX["[SEP]"] and front
        fronts.add(front[0])
        for record in mine:
            n = record["input_mask"].sum()
            assert n <= S and (record["segment_ids"] == 0).all()
            assert record["next_sentence_labels"].tolist() == [0]
            predicted = record["masked_lm_weights"].sum()
            assert predicted == min(P, max(1, round(n * 0.15)))  # The original's count.
        masks = [tuple(r["masked_lm_positions"]) for r in mine]
        assert len(set(masks)) > 1
    assert len(fronts) > 1  # Cut from the front and from the back, by chance as the original.
    assert (np.array([r["input_ids"] for r in rows]) == INDEX["[MASK]"]).any()


def test_full_sentence_rows_refuse_packing_and_unknown_objectives(tmp_path):
    with pytest.raises(ValueError, match="full-sentence rows, already filled.*packing"):
        _write(tmp_path, pack=True)
    vocab = generated_corpus.write_vocab(tmp_path / "vocab.txt")
    corpus = generated_corpus.write_corpus(tmp_path / "corpus.txt", DOCUMENTS)
    with pytest.raises(ValueError, match="objective must be one of"):
        create_pretraining_data(corpus, str(tmp_path / "x"), vocab, objective="electra")


def test_command_line_writes_them_and_the_runner_trains_objective_mlm(tmp_path, capsys):
    from absl import flags

    from keras_bert.pretraining import create_pretraining_data as command_line

    files, _ = _write(tmp_path)
    command_line.define_flags()
    flags.FLAGS.unparse_flags()
    argv = ["create", f"--input_file={tmp_path / 'corpus.txt'}", "--num_workers=1", "--seed=7"]
    argv += [f"--vocab_file={tmp_path / 'vocab.txt'}", f"--output_dir={tmp_path / 'cli'}"]
    argv += [f"--max_seq_length={S}", f"--max_predictions_per_seq={P}", f"--dupe_factor={DUPES}"]
    flags.FLAGS([*argv, "--objective=mlm"])
    try:
        command_line.main([])
    finally:
        flags.FLAGS.unparse_flags()
    written = capsys.readouterr().out.split()
    assert len(written) == 1
    assert open(written[0], "rb").read() == open(files[0], "rb").read()
    summary = runner.run_pretraining(
        bert_config=keras_bert.BertConfig.preset(
            "tiny", vocab_size=len(generated_corpus.VOCABULARY), num_hidden_layers=1
        ),
        objective="mlm",
        train_files=written[0],
        batch_size=4,
        seq_length=S,
        max_predictions_per_seq=P,
        num_train_steps=4,
        num_warmup_steps=1,
        learning_rate=1e-3,
        checkpoint_every=2,
        model_dir=str(tmp_path / "run"),
        verbose=False,
        plot=False,
    )
    losses = [h["mlm_loss"] for h in summary["history"]]
    assert not summary["model"].next_sentence and "nsp_loss" not in summary["final"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses


def test_raw_text_full_sentence_rows_are_the_same_rows_masked_afresh():
    from keras_bert.pretraining.dynamic import dynamic_masking, full_sentence_rows
    from keras_bert.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(generated_corpus.VOCABULARY)
    sentences = [s for doc in DOCUMENTS for s in doc]
    documents = [d for d, doc in enumerate(DOCUMENTS) for _ in doc]
    batches = tf.data.Dataset.from_tensor_slices((sentences, documents)).batch(len(sentences))
    rows = full_sentence_rows(batches, tokenizer, S, seed=3)
    long, fronts = _ids(LONG), set()
    for _ in range(DUPES):  # Every iteration: the same rows, the long sentence cut anew.
        got = [{k: v.numpy() for k, v in row.items()} for row in rows]
        ids = [tuple(r["input_word_ids"][: r["input_mask"].sum()]) for r in got]
        assert sorted(i for i in ids if len(i) < S) == sorted(_ids(row) for row in ROWS)
        (cut,) = [i[1:-1] for i in ids if len(i) == S]
        fronts.add(next(f for f in range(4) if long[f : f + S - 2] == cut))
        assert all((r["input_type_ids"] == 0).all() for r in got)
        assert all((r["input_word_ids"][r["input_mask"].sum() :] == 0).all() for r in got)
    assert len(fronts) > 1
    inputs, labels = next(iter(dynamic_masking(rows.batch(4), tokenizer, P, seed=1)))
    assert "next_sentence_labels" not in labels and inputs["input_word_ids"].shape == (4, S)
    assert labels["masked_lm_weights"].numpy().sum() > 0
