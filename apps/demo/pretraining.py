"""The demo's stages 2 to 4: a WordPiece vocabulary, masked-LM / next-sentence examples, and a tiny
BERT pre-trained on them (`run_pretraining`), reported next to trivial baselines."""

import collections
import os

from keras_bert.apps.demo.job import LOWER_CASE, MAX_PREDICTIONS, SEQ_LENGTH


def learn_vocabulary(job):
    """Stage 2: vocab.txt from the pre-training corpus; returns (path, size)."""
    from keras_bert.text.vocab import write_vocabulary
    from keras_bert.text.vocab_builder import build_vocabulary

    job.start("Learning a WordPiece vocabulary")
    vocab_file = job.paths["vocabulary"] = os.path.join(job.data_dir, "vocab.txt")
    vocab = build_vocabulary(
        [os.path.join(job.data_dir, "train.txt")],
        vocab_size=job.settings["vocab_size"],
        lower_case=LOWER_CASE,
    )
    write_vocabulary(vocab, vocab_file)
    job.result(f"{len(vocab)} tokens")
    return vocab_file, len(vocab)


def write_examples(job, vocab_file):
    """Stage 3: masked-LM / next-sentence TFRecords; returns their (train, held-out) patterns."""
    from keras_bert.pretraining.create_pretraining_data import create_pretraining_data
    from keras_bert.pretraining.records import count_records

    job.start("Writing masked-LM / next-sentence examples")
    common = dict(
        vocab_file=vocab_file,
        lower_case=LOWER_CASE,
        max_seq_length=SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
        num_workers=job.settings["workers"],
    )
    data = job.data_dir
    create_pretraining_data(
        os.path.join(data, "train.txt"),
        os.path.join(data, "train"),
        dupe_factor=job.settings["dupe_factor"],
        num_shards=2,
        **common,
    )
    create_pretraining_data(
        os.path.join(data, "eval.txt"), os.path.join(data, "eval"), dupe_factor=1, seed=7, **common
    )
    train_files, eval_files = (
        os.path.join(data, "train", "*.tfrecord"),
        os.path.join(data, "eval", "*.tfrecord"),
    )
    job.paths["pre-training examples"] = os.path.join(data, "train")
    job.result(
        f"{count_records(train_files)} training and {count_records(eval_files)} held-out examples"
    )
    return train_files, eval_files


def pretrain(job, vocab_file, vocab_size, train_files, eval_files):
    """Stage 4: `run_pretraining` and the held-out baselines; returns its summary."""
    import keras_bert
    from keras_bert.pretraining.runner import run_pretraining

    config = keras_bert.BertConfig.preset(
        "tiny", vocab_size=vocab_size, max_position_embeddings=SEQ_LENGTH
    )
    config = config.replace(**job.settings["model"])
    layers, steps = config.num_hidden_layers, job.settings["steps"]
    job.start(
        f"Pre-training a tiny BERT ({layers} layer{'s' * (layers > 1)}, hidden size "
        f"{config.hidden_size}) for {steps} steps"
    )
    run_dir = job.paths["pre-training run"] = os.path.join(job.model_dir, "run")
    pretraining = run_pretraining(
        bert_config=config,
        train_files=train_files,
        eval_files=eval_files,
        batch_size=32,
        seq_length=SEQ_LENGTH,
        max_predictions_per_seq=MAX_PREDICTIONS,
        num_train_steps=steps,
        num_warmup_steps=max(1, steps // 10),
        learning_rate=1e-3,
        model_dir=run_dir,
        checkpoint_every=steps,
        verbose=True,
        vocab_file=vocab_file,
        lower_case=LOWER_CASE,
    )  # Recorded in the run: it loads as an init checkpoint.
    mlm_base, nsp_base = baselines(eval_files, SEQ_LENGTH, MAX_PREDICTIONS, train_files)
    pretraining["baselines"] = {"mlm_most_frequent_token": mlm_base, "nsp_majority": nsp_base}
    evals = pretraining["eval"]
    job.result(
        f"held-out MLM accuracy {evals['mlm_accuracy']:.3f} (most frequent token {mlm_base:.3f}), "
        f"NSP accuracy {evals['nsp_accuracy']:.3f} (majority {nsp_base:.3f})"
    )
    job.paths.update(
        {
            "pre-training checkpoint": pretraining["checkpoint"],
            "pre-training TensorBoard logs": pretraining["tensorboard_dir"],
            "pre-training curve": pretraining["plot"],
        }
    )
    return pretraining


def baselines(pattern, seq_length, max_predictions_per_seq, train_pattern):
    """Held-out accuracy of trivial predictors: the most frequent masked token of the training
    data for every MLM position, and the majority NSP label."""
    from keras_bert.pretraining import records

    counts = collections.Counter()
    for _, labels in records.make_dataset(
        train_pattern,
        256,
        seq_length,
        max_predictions_per_seq,
        is_training=False,
        drop_remainder=False,
    ):
        w = labels["masked_lm_weights"].numpy() > 0
        counts.update(labels["masked_lm_ids"].numpy()[w].tolist())
    top = counts.most_common(1)[0][0]
    hit = total = nsp_pos = nsp_total = 0
    for _, labels in records.make_dataset(
        pattern, 256, seq_length, max_predictions_per_seq, is_training=False, drop_remainder=False
    ):
        w = labels["masked_lm_weights"].numpy() > 0
        ids = labels["masked_lm_ids"].numpy()[w]
        hit, total = hit + int((ids == top).sum()), total + ids.size
        nsp = labels["next_sentence_labels"].numpy()
        nsp_pos, nsp_total = nsp_pos + int(nsp.sum()), nsp_total + nsp.size
    return hit / max(total, 1), max(nsp_pos, nsp_total - nsp_pos) / max(nsp_total, 1)
