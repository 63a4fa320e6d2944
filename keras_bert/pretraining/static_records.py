"""Corpus -> static pre-training TFRecords (the original `create_pretraining_data.py`, fast and
parallel).

Its command line is `keras_bert.pretraining.create_pretraining_data`:

    python -m keras_bert.pretraining.create_pretraining_data --input_file=corpus/*.txt \\
        --output_dir=data/seq128 --vocab_file=vocab.txt --max_seq_length=128 --num_shards=16

The corpus is streamed in chunks of `documents_per_chunk` documents (random next segments come from
another document of the same chunk). Each chunk is tokenized in one call of the in-graph tokenizer,
turned into examples `dupe_factor` times (`keras_bert.pretraining.examples`, duplicate d of chunk c
seeded by (seed, c, d)) and serialized with NumPy (`example_proto`). Chunks run on `num_workers`
processes (the main one and helpers); the main process writes their examples round-robin into
`num_shards` files in chunk order, so the output depends only on the corpus, the settings and
`seed`, never on `num_workers`. Files are written as `*.tmp` and renamed at the end; on an error
they are removed. Helpers pay a start-up (TensorFlow import, tokenizer build) of a few seconds each:
they pay off on corpora that take minutes, on machines with free cores. A helper imports this
module, the tokenizer and what they use, nothing else (not the runner, models or checkpoints).

Records have the original feature names and dtypes: int64 input_ids, input_mask, segment_ids [S],
masked_lm_positions, masked_lm_ids [P], float masked_lm_weights [P], int64 next_sentence_labels [1]
(0 = IsNext, 1 = random next; with `objective="mlm_sop"` 1 = segments swapped). With
`objective="mlm"` the rows are RoBERTa's full sentences (`keras_bert.pretraining.full_sentences`:
sentences contiguous across documents, [SEP] between documents, one segment, labels 0; not
packed: they are already full). With `pack=True` the examples of each duplicate of a chunk are
packed, up to `max_instances` per row, by first-fit-decreasing (`keras_bert.pretraining.packing`,
which documents the packed records' extra features); the statistics add the packed `rows` and the
`packing_efficiency` (real tokens / all tokens) with `unpacked_efficiency` beside it.
"""

import collections
import concurrent.futures
import json
import multiprocessing
import os
import queue
import sys
import time
from collections.abc import Iterable, Sequence

import numpy as np
import tensorflow as tf

from keras_bert.io_utils import write_atomic
from keras_bert.pretraining import corpus as corpus_lib
from keras_bert.pretraining import examples as examples_lib
from keras_bert.pretraining import full_sentences, packing, records
from keras_bert.pretraining.example_proto import serialize_examples

# The objectives the writer makes data for (sentence pairs for NSP or SOP; full-sentence rows).
OBJECTIVES = ("mlm_nsp", "mlm_sop", "mlm")


class ExampleFactory:
    """Tokenizes chunks of documents and turns them into serialized examples (one per process).

    Args:
      tokenizer: a `keras_bert.text.BertTokenizer` (tf.string [B] -> ragged ids [B, (T)] with
        vocabulary, vocab_size, cls_id, sep_id, mask_id, pad_id).
      settings: dict of create_pretraining_data's example settings (max_seq_length,
        max_predictions_per_seq, masked_lm_prob, short_seq_prob, dupe_factor, whole_word_masking,
        seed, and `max_instances`: None, or the most instances per packed row).
    """

    def __init__(self, tokenizer, settings):
        self.tokenizer = tokenizer
        self.settings = dict(settings)
        self.is_continuation = None
        if self.settings["whole_word_masking"]:
            self.is_continuation = examples_lib.continuation_pieces(tokenizer.vocabulary)

    def tokenize(self, documents):
        """documents: list of lists of str sentences -> examples_lib.TokenizedChunk."""
        sentences = [s for doc in documents for s in doc]
        ids = self.tokenizer(tf.constant(sentences, tf.string)) if sentences else None
        if ids is None:
            return examples_lib.TokenizedChunk.from_sentence_lengths(
                np.zeros([0], np.int64), [], []
            )
        return examples_lib.TokenizedChunk.from_sentence_lengths(
            ids.flat_values.numpy().astype(np.int64),
            ids.row_lengths().numpy(),
            [len(d) for d in documents],
        )

    def __call__(self, chunk_index, documents):
        """Returns a list of (serialized records, stats) per duplicate of the chunk."""
        return self.examples(chunk_index, self.tokenize(documents))

    def examples(self, chunk_index, chunk):
        """TokenizedChunk -> a list of (serialized records, stats) per duplicate."""
        s = self.settings
        results = []
        for dupe in range(s["dupe_factor"]):
            if chunk.num_documents == 0:
                results.append(([], collections.Counter()))
                continue
            features = self._create_examples(
                chunk, np.random.SeedSequence([s["seed"], chunk_index, dupe])
            )
            stats = collections.Counter(
                examples=len(features["input_ids"]),
                tokens=int(features["input_mask"].sum()),
                masked_tokens=int(features["masked_lm_weights"].sum()),
                random_next=int(features["next_sentence_labels"].sum()),
            )
            names = records.FEATURE_NAMES
            if s.get("max_instances"):
                features, _ = packing.pack_examples(
                    features, s["max_instances"], s["packed_predictions"]
                )
                names = packing.PACKED_FEATURE_NAMES
                stats["rows"] = len(features["input_ids"])
            results.append((serialize_examples({k: features[k] for k in names}), stats))
        stats = collections.Counter(
            documents=chunk.num_documents,
            sentences=len(chunk.sentence_starts) - 1,
            corpus_tokens=len(chunk.token_ids),
        )
        results[0][1].update(stats)
        return results

    def _create_examples(self, chunk, seed_sequence):
        """One duplicate's features of a chunk: sentence pairs (`examples`), or with objective
        "mlm" full-sentence rows (`full_sentences`)."""
        s, tok = self.settings, self.tokenizer
        ids = (tok.vocab_size, tok.cls_id, tok.sep_id, tok.mask_id, tok.pad_id)
        masking = (s["max_seq_length"], s["max_predictions_per_seq"], s["masked_lm_prob"])
        if s.get("objective") == "mlm":
            return full_sentences.create_examples(
                chunk, *masking, *ids, seed_sequence, self.is_continuation
            )
        return examples_lib.create_examples(
            chunk,
            *masking,
            s["short_seq_prob"],
            *ids,
            seed_sequence,
            self.is_continuation,
            sentence_order=s.get("objective") == "mlm_sop",
        )


def _make_tokenizer(vocab_file, lower_case):
    from keras_bert.text.tokenizer import BertTokenizer  # Keras import only where tokenizing.

    return BertTokenizer(vocab_file, lower_case=lower_case)


def _helper_loop(tasks, results, vocab_file, lower_case, settings):
    """A helper process: takes (index, documents) tasks until None, puts (index, results or
    error)."""
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    try:
        factory = ExampleFactory(_make_tokenizer(vocab_file, lower_case), settings)
    except BaseException as e:  # Reported by the main process.
        results.put((-1, f"worker start-up failed: {e!r}"))
        return
    while (task := tasks.get()) is not None:
        try:
            results.put((task[0], factory(*task)))
        except BaseException as e:
            results.put((task[0], f"chunk {task[0]} failed: {e!r}"))


def _chunks(documents, documents_per_chunk, max_chunk_sentences):
    """Groups a document stream into chunks of documents_per_chunk documents (or max_chunk_sentences
    sentences, with at least 2 documents). A last chunk of fewer than documents_per_chunk // 2
    documents joins the one before, so random next segments always have other documents to come from
    (unless the whole corpus is one document)."""
    previous, chunk, sentences = None, [], 0
    for doc in documents:
        chunk.append(doc)
        sentences += len(doc)
        if len(chunk) >= documents_per_chunk or (
            sentences >= max_chunk_sentences and len(chunk) >= 2
        ):
            if previous is not None:
                yield previous
            previous, chunk, sentences = chunk, [], 0
    if previous is not None and chunk and len(chunk) < documents_per_chunk // 2:
        previous, chunk = previous + chunk, []
    for rest in (previous, chunk):
        if rest:
            yield rest


def _ordered_results(chunks, num_workers, vocab_file, lower_case, settings):
    """Yields each chunk's results in chunk order.

    With num_workers > 1, num_workers - 1 helper processes and the main process take chunks from one
    task queue (at most 2 * num_workers chunks ahead of the writer); the main process works on a
    chunk whenever the next one to write is not ready, so helpers starting up (importing TensorFlow)
    cost little. Results are keyed by chunk index, so the output does not depend on who computed
    what.
    """
    factory = ExampleFactory(_make_tokenizer(vocab_file, lower_case), settings)
    if (
        num_workers <= 1
    ):  # Tokenize the next chunk (TensorFlow, without the GIL) on a thread meanwhile.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            previous = None
            for index, chunk in enumerate(chunks):
                tokenized = pool.submit(factory.tokenize, chunk)
                if previous is not None:
                    yield factory.examples(index - 1, previous.result())
                previous = tokenized
            if previous is not None:
                yield factory.examples(index, previous.result())
        return
    context = multiprocessing.get_context("spawn")  # TensorFlow is not fork-safe.
    tasks, results = context.Queue(), context.Queue()
    helpers = [
        context.Process(
            target=_helper_loop,
            args=(tasks, results, vocab_file, lower_case, settings),
            daemon=True,
        )
        for _ in range(num_workers - 1)
    ]
    for helper in helpers:
        helper.start()
    indexed, done = enumerate(chunks), {}
    submitted = next_index = 0
    exhausted = False
    try:
        while True:
            while not exhausted and submitted - next_index < 2 * num_workers:
                task = next(indexed, None)
                if task is None:
                    exhausted = True
                else:
                    tasks.put(task)
                    submitted += 1
            if exhausted and next_index == submitted:
                return
            if next_index in done:
                yield done.pop(next_index)
                next_index += 1
                continue
            try:  # The next chunk is not ready: work on the oldest unclaimed one here.
                index, chunk = tasks.get(timeout=0.05)
                done[index] = factory(index, chunk)
                continue
            except queue.Empty:
                pass
            try:
                index, result = results.get(timeout=1.0)
            except queue.Empty:
                if not all(h.is_alive() for h in helpers):
                    raise RuntimeError("A create_pretraining_data worker process died.") from None
                continue
            if isinstance(result, str):
                raise RuntimeError(result)
            done[index] = result
    finally:
        for _ in helpers:
            tasks.put(None)
        for helper in helpers:  # All results are in: a helper still starting up is not waited for.
            helper.join(timeout=1)
            if helper.is_alive():
                helper.terminate()


class _Progress:
    """A status line on stderr: redrawn each second on a terminal, a new line every 30 s in logs."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.start = self.last = time.time()
        self.interval = 1.0 if sys.stderr.isatty() else 30.0

    def update(self, stats, final=False):
        now = time.time()
        if not self.enabled or (not final and now - self.last < self.interval):
            return
        self.last = now
        rate = stats["examples"] / max(now - self.start, 1e-9)
        end = "\n" if final or not sys.stderr.isatty() else "\r"
        sys.stderr.write(
            f"documents {stats['documents']:,} | examples {stats['examples']:,} | "
            f"{rate:,.0f} examples/s | {now - self.start:,.0f}s{end}"
        )
        sys.stderr.flush()


def _check_settings(settings, num_shards, documents_per_chunk):
    """Raises ValueError naming the first setting out of its range."""
    s = settings
    checks = [
        (s["max_seq_length"] >= 5, f"max_seq_length must be >= 5, got {s['max_seq_length']}"),
        (
            s["max_predictions_per_seq"] >= 1,
            f"max_predictions_per_seq must be >= 1, got {s['max_predictions_per_seq']}",
        ),
        (
            0.0 < s["masked_lm_prob"] <= 1.0,
            f"masked_lm_prob must be in (0, 1], got {s['masked_lm_prob']}",
        ),
        (
            0.0 <= s["short_seq_prob"] <= 1.0,
            f"short_seq_prob must be in [0, 1], got {s['short_seq_prob']}",
        ),
        (s["dupe_factor"] >= 1, f"dupe_factor must be >= 1, got {s['dupe_factor']}"),
        (num_shards >= 1, f"num_shards must be >= 1, got {num_shards}"),
        (documents_per_chunk >= 2, f"documents_per_chunk must be >= 2, got {documents_per_chunk}"),
        (
            s.get("objective", "mlm_nsp") in OBJECTIVES,
            f"objective must be one of {OBJECTIVES}, got {s.get('objective')!r}",
        ),
        (
            not (s.get("objective") == "mlm" and s.get("max_instances")),
            "objective mlm writes full-sentence rows, already filled up to max_seq_length: "
            "packing has nothing to add (leave pack / --pack off)",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


def create_pretraining_data(
    input_files: str | Sequence[str] | None,
    output_dir: str,
    vocab_file: str,
    lower_case: bool = True,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15,
    short_seq_prob: float = 0.1,
    dupe_factor: int = 10,
    whole_word_masking: bool = False,
    num_shards: int = 1,
    num_workers: int = 1,
    seed: int = 12345,
    file_format: str = "sentences",
    documents: Iterable[Sequence[str]] | None = None,
    output_prefix: str = "pretraining",
    documents_per_chunk: int = 1000,
    max_chunk_sentences: int = 50000,
    progress: bool = False,
    pack: bool = False,
    max_instances: int = 4,
    objective: str = "mlm_nsp",
) -> list[str]:
    """Writes pre-training TFRecords from a corpus (see the module docstring).

    Args:
      input_files: str (comma-separated glob patterns) or list of patterns, or `documents`.
      output_dir: str, created if needed (local or gs://).
      vocab_file: str, a WordPiece vocab.txt (what `keras_bert.text.vocab.load_vocabulary` reads).
      lower_case: bool, uncased tokenization.
      max_seq_length: int S.
      max_predictions_per_seq: int P.
      masked_lm_prob: float, share of tokens to predict.
      short_seq_prob: float, probability of a shorter random target length.
      dupe_factor: int, passes over the corpus with different pairs and masks.
      whole_word_masking: bool, mask all pieces of a word together.
      num_shards: int, output files.
      num_workers: int, processes creating examples (the output does not depend on it). Helpers are
        spawned: in a script, call from under `if __name__ == "__main__":`.
      seed: int.
      file_format: "sentences" (original), "text" or "lines"; see `keras_bert.pretraining.corpus`.
      documents: optional iterable of documents (lists of str sentences), e.g. from
        `corpus.tfds_documents("wikipedia/20230601.en")`, used instead of `input_files`.
      output_prefix: str, files are named `{prefix}-{i:05d}-of-{num_shards:05d}.tfrecord`.
      documents_per_chunk: int, documents per chunk (the pool random next segments come from).
      max_chunk_sentences: int, a chunk also ends at this many sentences (bounds memory).
      progress: bool, a status line on stderr.
      pack: bool, write packed rows of up to `max_instances` (int) instances (module docstring).
      objective: "mlm_nsp", "mlm_sop" (`examples.create_pairs`) or "mlm" (`full_sentences`).

    Returns:
      list of str, the written files. Statistics (documents, sentences, examples, tokens,
      masked_tokens, random_next, per-shard example counts) are written to
      `{output_dir}/{prefix}-stats.json` and logged.
    """
    settings: dict[str, object] = dict(
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob,
        short_seq_prob=short_seq_prob,
        dupe_factor=dupe_factor,
        whole_word_masking=whole_word_masking,
        seed=seed,
    )
    settings.update(_packing_settings(settings, max_instances) if pack else {})
    settings.update({} if objective == "mlm_nsp" else {"objective": objective})  # In the stats.
    _check_settings(settings, num_shards, documents_per_chunk)
    _check_vocabulary(vocab_file, lower_case)
    if documents is None:
        documents = corpus_lib.read_documents(input_files, file_format=file_format)  # Fails early.
    files = _shard_files(output_dir, output_prefix, num_shards)
    progress_line = _Progress(progress)
    chunks = _chunks(documents, documents_per_chunk, max_chunk_sentences)
    results = _ordered_results(chunks, max(1, num_workers), vocab_file, lower_case, settings)
    stats, shard_counts = _write_shards(files, results, progress_line)
    progress_line.update(stats, final=True)
    _write_summary(output_dir, output_prefix, stats, shard_counts, settings, files)
    return files


def _packing_settings(settings, max_instances):
    """`max_instances` and the masked predictions per packed row (`packed_predictions`)."""
    if max_instances < 1:
        raise ValueError(f"max_instances must be >= 1, got {max_instances}")
    width = packing.packed_predictions(
        settings["max_seq_length"],
        settings["max_predictions_per_seq"],
        settings["masked_lm_prob"],
        max_instances,
    )
    return {"max_instances": max_instances, "packed_predictions": width}


def _shard_files(output_dir, output_prefix, num_shards):
    """The output files' paths, `{prefix}-{i:05d}-of-{num_shards:05d}.tfrecord` in output_dir
    (created if needed)."""
    tf.io.gfile.makedirs(output_dir)
    return [
        os.path.join(output_dir, f"{output_prefix}-{i:05d}-of-{num_shards:05d}.tfrecord")
        for i in range(num_shards)
    ]


def _write_summary(output_dir, output_prefix, stats, shard_counts, settings, files):
    """Writes the statistics, examples per shard, settings and file names as JSON to
    `{output_dir}/{output_prefix}-stats.json`."""
    path = os.path.join(output_dir, f"{output_prefix}-stats.json")
    if settings.get("max_instances"):
        row_tokens = settings["max_seq_length"]
        stats = dict(
            stats,
            packing_efficiency=packing.efficiency(stats["tokens"], stats["rows"], row_tokens),
            unpacked_efficiency=packing.efficiency(stats["tokens"], stats["examples"], row_tokens),
        )
    summary = dict(
        stats,
        shard_examples=shard_counts,
        settings=settings,
        files=[os.path.basename(f) for f in files],
    )
    write_atomic(path, json.dumps(summary, indent=2))


def _check_vocabulary(vocab_file, lower_case):
    """Raises if the vocabulary does not load or does not fit the casing (before any output)."""
    from keras_bert.text.vocab import load_vocabulary, vocabulary_is_uncased

    vocabulary = load_vocabulary(
        vocab_file
    )  # Fail early (missing file, special tokens), before any output.
    if (
        not lower_case
        and vocabulary_is_uncased(vocabulary)
        and any(t != t.upper() for t in vocabulary)
    ):
        raise ValueError(
            f"lower_case=False (cased tokenization) but the vocabulary {vocab_file} is uncased (no "
            f"upper-case letters): every capitalized word would become [UNK]. Pass lower_case=True "
            f"(--lower_case) or a cased vocabulary."
        )


def _write_shards(files, results, progress_line):
    """Writes the records of `results` round-robin into `files` (each as `<file>.tmp`, renamed
    at the end; removed on failure); returns (stats Counter, examples per shard)."""
    num_shards = len(files)
    writers = [tf.io.TFRecordWriter(f + ".tmp") for f in files]
    stats = collections.Counter()
    shard_counts = [0] * num_shards
    try:
        shard = 0
        for result in results:
            for records, unit_stats in result:
                stats.update(unit_stats)
                for record in records:
                    writers[shard].write(record)
                    shard_counts[shard] += 1
                    shard = (shard + 1) % num_shards
            progress_line.update(stats)
        if stats["examples"] == 0:
            raise ValueError("The corpus gave no examples (no document with a non-empty sentence).")
        for writer in writers:
            writer.close()
        for f in files:
            tf.io.gfile.rename(f + ".tmp", f, overwrite=True)
    except BaseException:
        for writer, f in zip(writers, files):
            writer.close()
            if tf.io.gfile.exists(f + ".tmp"):
                tf.io.gfile.remove(f + ".tmp")
        raise
    return stats, shard_counts
