"""Extra SQuAD inputs for distillation (`keras-bert-distill --unlabeled_file`), built from
training articles only: the teacher labels them, so they need no answers.

    python -m keras_bert.tasks.squad.augment --train_file=train-v1.1.json \\
        --output=unlabeled.json --kinds=cloze,neighbours,noised --exclude_file=dev-v1.1.json

Kinds (each question keeps a real paragraph of the training articles as its context):

- `cloze`: sentences of each paragraph turned into pseudo-questions (Lewis et al. 2019's cloze
  questions, identity mapping): an answer-like span (a year, another number, or a run of
  capitalized words that does not open the sentence) is replaced by a wh-word ("when",
  "how many", "what") and at most `clause_words` words on each side of it are kept, ending
  with "?". Up to `cloze_per_paragraph` sentences per paragraph, one span each.
- `neighbours`: each training question paired with the next `neighbours` paragraphs of its
  article (wrapping around; none for a one-paragraph article): questions the teacher answers
  from a paragraph that was not written for them.
- `noised`: each training question `noised` times with its words (all but the first, the wh-word)
  replaced with probability `noise_rate` by words of its own paragraph, on that paragraph
  (TinyBERT's data augmentation, with the paragraph's words in place of GloVe / masked-LM
  neighbours, which this package does not ship).

`exclude_file` (e.g. the dev file) guards the split: a paragraph of the training articles that
is also in it is an error, and nothing is written. The output is SQuAD v1.1 JSON (questions
without answers), deterministic for a seed; ids are the source question's id with a suffix
(`-n1`, `-r1`) or `cloze-<article>-<paragraph>-<sentence>`.
"""

import dataclasses
import json
import random
import re

from keras_bert import io_utils
from keras_bert.tasks.squad.data import load_json

KINDS = ("cloze", "neighbours", "noised")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(A-Z0-9])")
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_NUMBER = re.compile(r"\b\d[\d,.]*\d\b|\b\d\b")
_NAME = re.compile(r"[A-Z][\w'-]*(?:\s+(?:(?:of|the|de|and)\s+)?[A-Z][\w'-]*)*")


@dataclasses.dataclass(frozen=True)
class AugmentOptions:
    """How many questions of each kind `augment_squad` writes.

    Args:
        kinds: the kinds to write, a subset of `KINDS`.
        cloze_per_paragraph: int >= 1, cloze questions per paragraph (at most one a sentence).
        clause_words: int >= 1, words kept on each side of a cloze question's blank.
        neighbours: int >= 1, other paragraphs each training question is paired with.
        noised: int >= 1, noised copies of each training question.
        noise_rate: float in (0, 1], the chance that a word of a question is replaced.
        seed: int, seeds every random choice.
    """

    kinds: tuple = KINDS
    cloze_per_paragraph: int = 2
    clause_words: int = 8
    neighbours: int = 1
    noised: int = 1
    noise_rate: float = 0.15
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {self.kinds}.")
        for name in ("cloze_per_paragraph", "clause_words", "neighbours", "noised"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if not 0 < self.noise_rate <= 1:
            raise ValueError(f"noise_rate must be in (0, 1], got {self.noise_rate}.")


def cloze_candidates(sentence: str, clause_words: int = 8) -> list[tuple[str, str]]:
    """[(question, answer)] for every answer-like span of `sentence`, in order of position.

    Years become "when", other numbers "how many", runs of capitalized words that do not open
    the sentence "what"; the question is the span's clause (at most `clause_words` words each
    side, within the sentence) with the span replaced by the wh-word, ending with "?".
    """
    sentence = sentence.strip().rstrip(".!?").strip()
    spans: dict[tuple[int, int], str] = {}
    for pattern, wh in ((_YEAR, "when"), (_NUMBER, "how many"), (_NAME, "what")):
        for m in pattern.finditer(sentence):
            overlaps = any(m.start() < end and start < m.end() for start, end in spans)
            if m.start() > 0 and not overlaps:
                spans[(m.start(), m.end())] = wh
    out = []
    for (start, end), wh in sorted(spans.items()):
        left = sentence[:start].split()[-clause_words:]
        right = sentence[end:].split()[:clause_words]
        out.append((" ".join([*left, wh, *right]) + "?", sentence[start:end]))
    return out


def sentences(paragraph: str) -> list[str]:
    """The paragraph's sentences (split after ., ! or ? followed by a space and a capital,
    digit, quote or bracket)."""
    return [s for s in _SENTENCE_END.split(paragraph.strip()) if s.strip()]


def augment_squad(
    data: dict, options: AugmentOptions | None = None, exclude: dict | None = None
) -> dict:
    """SQuAD v1.1 JSON of extra questions (no answers) on the paragraphs of `data`.

    Args:
        data: SQuAD JSON ({"data": [articles]}) of the training articles.
        options: `AugmentOptions` (default: every kind, one of each).
        exclude: SQuAD JSON whose paragraphs must not be among `data`'s (the dev file).

    Returns:
        {"version": "1.1", "data": [{"title", "paragraphs": [{"context", "qas"}]}]}, the
        articles and paragraphs of `data` that received questions, in its order.

    Raises:
        ValueError: a paragraph of `data` is in `exclude`, or `data` is not SQuAD JSON.
    """
    return _augment(data, options, exclude)[0]


def _augment(data, options, exclude):
    """(`augment_squad`'s JSON, {kind: number of questions written})."""
    options = options or AugmentOptions()
    articles = _articles(data, "data")
    if exclude is not None:
        _check_disjoint(articles, _articles(exclude, "exclude"))
    rng = random.Random(options.seed)
    counts = dict.fromkeys(KINDS, 0)
    out = []
    for a, article in enumerate(articles):
        paragraphs = article["paragraphs"]
        extra: list[list[dict]] = [[] for _ in paragraphs]
        for p, paragraph in enumerate(paragraphs):
            made = {}
            if "cloze" in options.kinds:
                made["cloze"] = _cloze(paragraph["context"], f"cloze-{a}-{p}", options, rng)
            if "noised" in options.kinds:
                made["noised"] = _noised(paragraph, options, rng)
            for kind, questions in made.items():
                extra[p] += questions
                counts[kind] += len(questions)
            if "neighbours" in options.kinds and len(paragraphs) > 1:
                for k in range(1, min(options.neighbours, len(paragraphs) - 1) + 1):
                    moved = [_qa(f"{q['id']}-n{k}", q["question"]) for q in paragraph["qas"]]
                    extra[(p + k) % len(paragraphs)] += moved
                    counts["neighbours"] += len(moved)
        kept = [
            {"context": paragraph["context"], "qas": qas}
            for paragraph, qas in zip(paragraphs, extra)
            if qas
        ]
        if kept:
            out.append({"title": article.get("title", f"#{a}"), "paragraphs": kept})
    return {"version": "1.1", "data": out}, counts


def _qa(qas_id, question):
    return {"id": qas_id, "question": question, "answers": []}


def _cloze(context, prefix, options, rng):
    """Up to cloze_per_paragraph cloze questions, from distinct sentences chosen at random."""
    found = []
    for s, sentence in enumerate(sentences(context)):
        candidates = cloze_candidates(sentence, options.clause_words)
        if candidates:
            found.append((s, rng.choice(candidates)[0]))
    chosen = sorted(rng.sample(found, min(options.cloze_per_paragraph, len(found))))
    return [_qa(f"{prefix}-{s}", question) for s, question in chosen]


def _noised(paragraph, options, rng):
    """`noised` copies of each question of the paragraph, words replaced by paragraph words."""
    words = paragraph["context"].split()
    out = []
    for qa in paragraph["qas"]:
        question = qa["question"].split()
        for k in range(1, options.noised + 1):
            noised = [question[0]] + [
                rng.choice(words) if rng.random() < options.noise_rate else word
                for word in question[1:]
            ]
            out.append(_qa(f"{qa['id']}-r{k}", " ".join(noised)))
    return out


def _articles(data, name):
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list) or not all(
        isinstance(a, dict) and isinstance(a.get("paragraphs"), list) for a in articles
    ):
        raise ValueError(f"{name} is not SQuAD JSON: expected {{'data': [{{'paragraphs': ...}}]}}.")
    return articles


def _check_disjoint(articles, excluded):
    contexts = {p.get("context") for a in excluded for p in a["paragraphs"]}
    shared = [
        a.get("title", "?") for a in articles for p in a["paragraphs"] if p["context"] in contexts
    ]
    if shared:
        raise ValueError(
            f"{len(shared)} paragraphs of the training articles are also in the exclude file "
            f"(articles {sorted(set(shared))[:5]}): extra inputs must not come from the "
            f"evaluation split."
        )


def write_augmented(
    train_file: str,
    output: str,
    options: AugmentOptions | None = None,
    exclude_file: str | None = None,
) -> dict[str, int]:
    """Reads `train_file` (and `exclude_file`), writes `augment_squad`'s JSON to `output`
    atomically (nothing on an error) and returns the number of questions of each kind."""
    data = load_json(train_file)
    exclude = load_json(exclude_file) if exclude_file else None
    out, counts = _augment(data, options, exclude)
    io_utils.write_atomic(output, json.dumps(out))
    return counts


def define_flags() -> None:
    """The command line's flags (`AugmentOptions`' fields and the files)."""
    from absl import flags

    defaults = AugmentOptions()
    flags.DEFINE_string("train_file", None, "SQuAD JSON of the training articles.")
    flags.DEFINE_string("output", None, "The SQuAD JSON to write (for --unlabeled_file).")
    flags.DEFINE_string("exclude_file", None, "SQuAD JSON none of whose paragraphs may be used.")
    flags.DEFINE_list("kinds", list(defaults.kinds), f"Kinds of questions, of {KINDS}.")
    flags.DEFINE_integer("cloze_per_paragraph", defaults.cloze_per_paragraph, "Cloze questions.")
    flags.DEFINE_integer("clause_words", defaults.clause_words, "Words each side of the blank.")
    flags.DEFINE_integer("neighbours", defaults.neighbours, "Next paragraphs per question.")
    flags.DEFINE_integer("noised", defaults.noised, "Noised copies per question.")
    flags.DEFINE_float("noise_rate", defaults.noise_rate, "Chance a question word is replaced.")
    flags.DEFINE_integer("seed", defaults.seed, "Seeds every random choice.")


def main(argv: list[str]) -> None:
    del argv
    from absl import flags

    f = flags.FLAGS
    options = AugmentOptions(
        tuple(f.kinds), f.cloze_per_paragraph, f.clause_words, f.neighbours, f.noised,
        f.noise_rate, f.seed,
    )  # fmt: skip
    counts = write_augmented(f.train_file, f.output, options, f.exclude_file)
    print(f"{f.output}: {sum(counts.values())} questions ({counts})")


def console_main() -> None:
    """Entry point (`python -m keras_bert.tasks.squad.augment`)."""
    from keras_bert import cli

    cli.run_command(__doc__, define_flags, ["train_file", "output"], main)


if __name__ == "__main__":
    console_main()
