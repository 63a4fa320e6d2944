"""SQuAD feature creation: keras_bert's SquadTask vs the original Python code (tf-models-official).

Both turn the same SQuAD file into training features (max_seq_length 384, doc_stride 128,
max_query_length 64): ours is `SquadTask.read` + `SquadTask.encode` (every context and question
tokenized in batched graph calls, windows in NumPy); the original is `squad_lib.read_squad_examples`
+ `convert_examples_to_features` with its `FullTokenizer`. The original demands one answer per
training question, so both read a copy of the file that keeps each question's first answer.

Times are medians over interleaved repeats, after one warm-up call of ours (its time, the first
in the process, is printed too). Agreement: the share of
examples with the same number of windows, of features with identical input ids and type ids, and
of features with the same start and end positions.

    .venv/bin/python bench/bench_squad_features.py [--squad_file dev-v1.1.json] [--vocab vocab.txt]

Both files default to the real data folder's (SQuAD v1.1 dev, the uncased vocabulary).
"""

import json
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)
from common import format_table  # noqa: E402


def first_answers_copy(path, limit=None):
    """A temporary copy of a SQuAD file with each question's first answer only (and the first
    `limit` questions)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    kept = 0
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            qas = paragraph["qas"][: max(0, limit - kept)] if limit else paragraph["qas"]
            for qa in qas:
                qa["answers"] = qa["answers"][:1]
            paragraph["qas"] = qas
            kept += len(qas)
        article["paragraphs"] = [p for p in article["paragraphs"] if p["qas"]]
    data["data"] = [a for a in data["data"] if a["paragraphs"]]
    out = os.path.join(tempfile.mkdtemp(), os.path.basename(path))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return out


def ours(path, tokenizer, args):
    from keras_bert.tasks.squad.task import SquadTask

    task = SquadTask("1.1", doc_stride=args.doc_stride, max_query_length=args.max_query_length)
    return task.encode(
        task.read(None, "train", file=path), tokenizer, args.max_seq_length, training=True
    )


def original(path, tokenizer, args):
    from official.nlp.data import squad_lib

    examples = squad_lib.read_squad_examples(path, is_training=True, version_2_with_negative=False)
    features = []
    squad_lib.convert_examples_to_features(
        examples,
        tokenizer,
        args.max_seq_length,
        args.doc_stride,
        args.max_query_length,
        True,
        features.append,
    )
    return features


def agreement(ours_features, original_features):
    """(same window counts, same ids, same positions) as fractions (of examples, features,
    features)."""
    mine = {}
    ids = ours_features.inputs["input_word_ids"].to_list()
    types = ours_features.inputs["input_type_ids"].to_list()
    for f, e in enumerate(ours_features.example_index):
        mine.setdefault(int(e), []).append(f)
    theirs = {}
    for feature in original_features:
        theirs.setdefault(feature.example_index, []).append(feature)
    same_count = sum(len(mine.get(e, [])) == len(fs) for e, fs in theirs.items())
    same_ids = same_positions = total = 0
    for e, fs in theirs.items():
        for f, feature in zip(mine.get(e, []), fs):
            n = sum(feature.input_mask)
            same_ids += ids[f] == feature.input_ids[:n] and types[f] == feature.segment_ids[:n]
            same_positions += (
                int(ours_features.labels["start_positions"][f]) == feature.start_position
                and int(ours_features.labels["end_positions"][f]) == feature.end_position
            )
        total += len(fs)
    return same_count / len(theirs), same_ids / total, same_positions / total


def main():
    parser = common.argument_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--squad_file",
        default=common.data_file("squad_v1.1", "dev-v1.1.json"),
        help=common.data_help("A SQuAD v1.1 file"),
    )
    parser.add_argument(
        "--vocab",
        default=common.data_file("bert_uncased", "vocab.txt"),
        help=common.data_help("The uncased vocab.txt"),
    )
    parser.add_argument("--examples", type=int, default=None, help="Use only the first questions.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_query_length", type=int, default=64)
    args = parser.parse_args()
    common.require_data(args.squad_file, "--squad_file")
    common.require_data(args.vocab, "--vocab")
    # Every import before anything is timed (`ours` and `original` import theirs again, cached).
    import official.nlp.data.squad_lib  # noqa: F401
    from absl import logging
    from official.nlp.tools import tokenization

    import keras_bert.tasks.squad.task  # noqa: F401
    from keras_bert.text import BertTokenizer

    logging.set_verbosity(logging.WARNING)  # The original logs its first 20 features.

    path = first_answers_copy(args.squad_file, args.examples)
    our_tokenizer = BertTokenizer(args.vocab, lower_case=True)
    reference = tokenization.FullTokenizer(args.vocab, do_lower_case=True)
    reference.wordpiece_tokenizer.max_input_chars_per_word = our_tokenizer.max_chars_per_word

    start = time.perf_counter()
    our_features = ours(
        path, our_tokenizer, args
    )  # Cold: the first tokenizer calls of the process.
    cold = time.perf_counter() - start
    times = {"keras_bert SquadTask": [], "original squad_lib": []}
    for _ in range(args.repeats):
        for name, run, tokenizer in (
            ("keras_bert SquadTask", ours, our_tokenizer),
            ("original squad_lib", original, reference),
        ):
            start = time.perf_counter()
            result = run(path, tokenizer, args)
            times[name].append(time.perf_counter() - start)
            if name == "original squad_lib":
                original_features = result
    same_count, same_ids, same_positions = agreement(our_features, original_features)

    examples = len({int(e) for e in our_features.example_index})
    medians = {name: statistics.median(t) for name, t in times.items()}
    ours_median = medians["keras_bert SquadTask"]
    print(
        f"{args.squad_file}: {examples} questions -> {our_features.num_features} features "
        f"(original: {len(original_features)}); {args.repeats} interleaved repeats; cores: "
        f"{os.cpu_count()}"
    )
    rows = [
        (name, medians[name], min(t), max(t), medians[name] / ours_median)
        for name, t in times.items()
    ]
    print(format_table(["feature creation", "median s", "min s", "max s", "x ours"], rows))
    print(
        f"\nours cold (the first call in the process): {cold:.2f} s; "
        f"original / ours cold: {medians['original squad_lib'] / cold:.1f}x"
    )
    print(
        f"agreement: window counts {same_count:.2%} of questions, input ids {same_ids:.2%} and "
        f"start/end positions {same_positions:.2%} of features"
    )


if __name__ == "__main__":
    common.run_and_record(main, __file__)
