"""A long-document classification set from real text, whose label lies past the first window.

Every document is 3 to 7 real paragraphs (the contexts of the SQuAD v1.1 dev set, 48 Wikipedia
articles): filler paragraphs from articles on places, institutions and culture, and one key
paragraph from a science article (label "science") or a history article (label "history"). The
key paragraph never starts before token `seq_length - 2` (the first window): the first window
holds filler only, drawn independently of the label, so a model that reads a document's first
`seq_length` tokens is at chance (50% expected, provably), and only a model that reads further
can do better. Documents run 3-10x `seq_length` tokens (of the given vocabulary's tokenizer).
Train and dev documents are made of disjoint paragraphs (each article's paragraphs are split
2:1). The files are `label<TAB>text` (`--task=text_classification`).

    .venv/bin/python bench/long_documents.py --out /tmp/long_docs \\
        [--squad ../shared/data/squad_v1.1/dev-v1.1.json] [--vocab <minilm>/vocab.txt] \\
        [--seq_length 128] [--train 600] [--dev 300]
"""

import argparse
import json
import os
import sys

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
    import tensorflow as tf

    from keras_bert.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(vocab_file, lower_case=True)

    def count_tokens(texts):
        return tokenizer(tf.constant(texts)).row_lengths().numpy().tolist()

    os.makedirs(out_dir, exist_ok=True)
    sizes = {}
    for (split, n), pool in zip(
        (("train", n_train), ("dev", n_dev)), split_pools(paragraphs(squad_path))
    ):
        docs = make_documents(pool, n, count_tokens, seq_length, seed=len(split))
        with open(os.path.join(out_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in docs))
        sizes[split] = count_tokens([text for _, text in docs])
    return sizes


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests"))
    from real_data import minilm_dir, real_file

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--squad", default=real_file("squad_v1.1", "dev-v1.1.json"))
    parser.add_argument("--vocab", default=os.path.join(minilm_dir() or "", "vocab.txt"))
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--train", type=int, default=600)
    parser.add_argument("--dev", type=int, default=300)
    args = parser.parse_args()
    sizes = write_documents(args.squad, args.out, args.vocab, args.seq_length, args.train, args.dev)
    for split, lengths in sizes.items():
        lengths = np.array(lengths)
        print(
            f"{split}: {len(lengths)} documents, tokens median {int(np.median(lengths))} "
            f"(min {lengths.min()}, max {lengths.max()}; "
            f"{np.median(lengths) / args.seq_length:.1f}x seq_length {args.seq_length})"
        )


if __name__ == "__main__":
    main()
