"""The demo's text: the standard library's docstrings as a pre-training corpus, and paragraphs
labelled with their package for fine-tuning (stage 1 of the job). Reads source files with `ast`;
nothing is imported or executed."""

import ast
import collections
import os
import random
import re
import sysconfig
import zlib

SKIP_DIRS = {
    "test",
    "tests",
    "idlelib",
    "site-packages",
    "dist-packages",
    "lib2to3",
    "turtledemo",
    "__pycache__",
}
# The fine-tuning classes: packages with several modules and at least ~100 docstring paragraphs.
PACKAGES = ("asyncio", "email", "http", "logging", "multiprocessing", "unittest", "urllib", "xml")
QUICK_PACKAGES = ("email", "http", "logging", "xml")
PRETRAINING_HOLDOUT_EVERY = 20  # Every 20th module (by name) is held out of pre-training.
DEV_FRACTION = 0.25  # Of each package's paragraphs, in whole modules.
MIN_PARAGRAPH_WORDS = 8


def stdlib_documents(max_modules=None, min_chars=200, packages=None):
    """(module name, docstring text) for the standard library's modules, in name order.

    The text of a module is its own docstring followed by those of its public classes,
    functions and methods, read with `ast` from the source (no module is imported).
    `packages`: only the modules of these top-level packages (None: all modules).
    """
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS and not d.startswith("."))
        paths.extend(os.path.join(directory, f) for f in sorted(files) if f.endswith(".py"))
    documents = []
    for path in sorted(paths):
        name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
        if any(part.startswith("_") and part != "__init__" for part in name.split(".")):
            continue
        if packages is not None and (name.split(".")[0] not in packages or "." not in name):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        docs = [ast.get_docstring(tree)] + [
            ast.get_docstring(node)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not node.name.startswith("_")
        ]
        text = "\n\n".join(d for d in docs if d)
        if len(text) >= min_chars:
            documents.append((name, text))
        if max_modules and len(documents) >= max_modules:
            break
    return documents


def write_corpus(documents, path):
    """Write documents in the original format (a sentence per line, blank line between
    documents)."""
    from keras_bert.io_utils import write_atomic
    from keras_bert.pretraining.corpus import split_document

    kept = [
        sentences
        for sentences in (split_document(text, hard_wrapped=True) for _, text in documents)
        if len(sentences) >= 2
    ]
    write_atomic(path, "".join("\n".join(sentences) + "\n\n" for sentences in kept))
    return len(kept)


def paragraphs(text, min_words=MIN_PARAGRAPH_WORDS):
    """The prose paragraphs of a docstring text: blank-line separated, whitespace joined, at
    least `min_words` words, no doctest (`>>>`) blocks."""
    found = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return [p for p in found if len(p.split()) >= min_words and ">>>" not in p]


def package_examples(
    documents, packages, dev_fraction=DEV_FRACTION, train_cap=None, dev_cap=None, seed=0
):
    """Labelled paragraphs for "which package is this paragraph from?", split by module.

    The label of a paragraph is the top-level package of its module (`email.message` ->
    "email"); single-file modules are no class. In each package, whole modules go to dev
    (in a fixed pseudo-random order, skipping any module with more than half the package's
    paragraphs) until dev holds `dev_fraction` of its paragraphs. A paragraph text occurs
    once: repeats (also across modules) are dropped, and a dev paragraph that also occurs in
    a training module is dropped from dev. Each package then keeps at most `train_cap`
    training and `dev_cap` dev paragraphs (a seeded sample), so that classes are balanced.

    Returns:
        (train, dev, dev_modules): lists of (label, paragraph, module) in a seeded shuffled
        order, and the sorted names of the dev modules.
    """
    by_package = collections.defaultdict(dict)  # package -> module -> paragraphs
    for name, text in documents:
        package = name.split(".")[0]
        if package in packages and "." in name:
            by_package[package][name] = paragraphs(text)
    rng = random.Random(seed)
    train, dev, dev_modules = [], [], []
    for package in packages:
        modules = by_package.get(package, {})
        total = sum(len(p) for p in modules.values())
        held, held_count = [], 0
        for name in sorted(modules, key=lambda n: zlib.crc32(n.encode())):
            if held_count >= dev_fraction * total:
                break
            if (
                0 < len(modules[name]) <= total / 2
                and held_count + len(modules[name]) <= 2 * dev_fraction * total
            ):
                held.append(name)
                held_count += len(modules[name])
        if not held or len(held) == len(modules):
            raise ValueError(
                f"Package {package!r} has no modules to split into training and dev "
                f"({sorted(modules)})."
            )
        seen_train = {p for name in modules if name not in held for p in modules[name]}
        splits = {"train": [], "dev": []}
        seen = set()
        for name in sorted(modules):
            split = "dev" if name in held else "train"
            for p in modules[name]:
                if p in seen or (split == "dev" and p in seen_train):
                    continue
                seen.add(p)
                splits[split].append((package, p, name))
        for split, rows, cap in (("train", train, train_cap), ("dev", dev, dev_cap)):
            chosen = splits[split]
            if cap and len(chosen) > cap:
                chosen = rng.sample(chosen, cap)
            rows.extend(chosen)
        dev_modules.extend(held)
    rng.shuffle(train)
    rng.shuffle(dev)
    return train, dev, sorted(dev_modules)


def write_tsv(rows, path):
    """Writes (label, text, ...) rows as the `text_classification` task's `label<TAB>text` lines."""
    from keras_bert.io_utils import write_atomic

    write_atomic(path, "".join(f"{label}\t{text}\n" for label, text, *_ in rows))


def read_docstrings(job, quick):
    """Stage 1: the pre-training corpus files and the labelled paragraphs (train, dev, dev
    modules)."""
    job.start("Reading the standard library's docstrings")
    packages = job.settings["packages"]
    documents = stdlib_documents(packages=packages if quick else None)
    train_rows, dev_rows, dev_modules = package_examples(
        documents, packages, train_cap=job.settings["train_cap"], dev_cap=job.settings["dev_cap"]
    )
    held_out = set(dev_modules) | {name for name, _ in documents[::PRETRAINING_HOLDOUT_EVERY]}
    train_corpus = os.path.join(job.data_dir, "train.txt")
    n_train = write_corpus([d for d in documents if d[0] not in held_out], train_corpus)
    n_eval = write_corpus(
        [d for d in documents if d[0] in held_out], os.path.join(job.data_dir, "eval.txt")
    )
    job.result(
        f"{len(documents)} modules: pre-training on {n_train} "
        f"({os.path.getsize(train_corpus) / 1e6:.1f} MB of text), {n_eval} held out (every "
        f"{PRETRAINING_HOLDOUT_EVERY}th and the fine-tuning dev modules)"
    )
    return train_rows, dev_rows, dev_modules
