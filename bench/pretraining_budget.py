"""Pre-training on a budget: each objective, packed and unpacked, for the same wall time, then
fine-tuned; and packed against unpacked rows at sequence 512 (issue 44).

The corpus is real text every checkout has or the real data folder holds: the demo's standard
library docstrings (its pre-training modules; its held-out modules are the held-out records), plus
the real data folder's `sample_text.txt` and SQuAD v1.1 dev's Wikipedia paragraphs (one document
per article) when the folder is there. A WordPiece vocabulary is learned on it, and the original
writer (`create_pretraining_data`) makes the records of each objective: the paper's sentence pairs
(`mlm_nsp`; `electra` packed), ALBERT's order pairs (`mlm_sop`) and RoBERTa's full-sentence rows
(`mlm`, and `electra` unpacked: contiguous text, as ELECTRA's own data; full already, so never
packed), unpacked and packed (`--pack`, first-fit-decreasing).

1. **Throughput at --long_seq (512).** The same encoder pre-trains on the original rows and on
   packed rows (MLM + NSP) of the docstrings, interleaved rounds of `--timed_steps` steps each, a
   round's step time the median of the runner's logging loops after the first, a configuration's
   its fastest round's (the least disturbed on a shared machine): tokens per second over all
   positions and over real (non-padding) tokens, the share of real tokens read from the writer's
   statistics.
   The share of real tokens, original and packed, is also reported for each corpus alone: the
   docstrings (a module a document), sample_text.txt, SQuAD's articles, and SQuAD's paragraphs
   taken as documents (short documents, as tickets, reviews or abstracts are).
   **The loss per real token at --long_seq.** The same encoder pre-trains (MLM + NSP, each
   seed of --seeds) on every record of the whole corpus once, in the original rows and packed:
   the same instances with the same masks, so the same real tokens; packed batches hold as many
   instances as --long_batch original rows (fewer rows, as Krell et al. 2021). The training
   masked-LM loss of each format is compared at equal real tokens seen (each logging
   loop's mean, interpolated) at a quarter, half, three quarters and all of the pass, with the
   spread over seeds, and each format's held-out masked-LM loss after the pass (its own rows of
   the held-out modules).
2. **The budget.** Each configuration (`--configs`: objective, `+packed` for packed rows) is timed
   the same way at --seq (interleaved rounds), then gets the steps that fill `--seconds` of
   training at its own (fastest round's) step time: equal wall time; the estimated training FLOPs
   of each are reported beside it (`common.pretraining_step_flops`, `common.electra_step_flops`).
   Each configuration is pre-trained once per seed (`--seeds`), with checkpoints at each quarter.
   The control `none` is not pre-trained at all: a freshly initialized encoder of the same
   config (each seed's initialization) fine-tunes as the others do. A configuration helps only
   where it beats it.
3. **Fine-tuning.** Each quarter checkpoint fine-tunes on the demo's task (which of 8 standard
   library packages a docstring paragraph comes from; dev modules held out of pre-training), and
   the final one also on SST-2 (the real data folder's dev set, even rows train, odd rows measure,
   as `bench_preset_fit.py`), each with the checkpoint's seed.

Writes `<out>/results.json` (a finished run of a configuration and seed is kept: a later call
resumes the benchmark), `<out>/budget.png` (the package task's dev accuracy against pre-training
seconds, mean and range over seeds; the masked-LM loss against real tokens seen, packed and
unpacked; the masked-LM loss at --long_seq against real tokens, original and packed rows) and
`<out>/record.json` (the docs/results/data record of the tables).

    .venv/bin/python bench/pretraining_budget.py --out out/budget [--seconds 180] \\
        [--seeds 0,1,2] [--configs none,mlm_nsp,mlm_nsp+packed,mlm,mlm_sop+packed,electra,...]
"""

import functools
import json
import os
import shutil
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402  (bench/: the script's own folder)

CONFIGS = "none,mlm_nsp,mlm_nsp+packed,mlm,mlm_sop+packed,electra,electra+packed"
NO_PRETRAINING = "none"  # The control: a fresh encoder fine-tuned as the others.


def parse_args(argv=None):
    parser = common.argument_parser(__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="Data, runs, results.json, budget.png.")
    parser.add_argument("--configs", default=CONFIGS)
    parser.add_argument("--seconds", type=float, default=180.0, help="Training time per run.")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--long_seq", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--long_batch", type=int, default=8)
    parser.add_argument("--max_instances", type=int, default=4)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--generator_size", type=float, default=0.25, help="ELECTRA's.")
    parser.add_argument("--vocab_size", type=int, default=6000)
    parser.add_argument("--dupe_factor", type=int, default=3)
    parser.add_argument("--timed_steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sst2", default=common.data_file("sst2", "dev.tsv"))
    parser.add_argument("--squad", default=common.data_file("squad_v1.1", "dev-v1.1.json"))
    parser.add_argument("--sample_text", default=common.data_file("bert_sample", "sample_text.txt"))
    parser.add_argument("--finetune_epochs", type=int, default=6)
    parser.add_argument("--finetune_lr", type=float, default=3e-4, help="The package task's.")
    parser.add_argument("--sst2_lr", type=float, default=2e-4)
    parser.add_argument("--sst2_epochs", type=int, default=3)
    parser.add_argument(
        "--curve_points", type=int, default=2, help="Checkpoints fine-tuned per run (1, 2 or 4)."
    )
    parser.add_argument("--loop", type=int, default=25, help="Steps per logging loop.")
    parser.add_argument("--quick", action="store_true", help="A tiny run of every stage (tests).")
    args = parser.parse_args(argv)
    if args.quick:
        args.seq, args.long_seq, args.batch, args.long_batch = 32, 64, 8, 4
        args.vocab_size, args.dupe_factor, args.timed_steps, args.rounds = 600, 1, 6, 1
        args.loop, args.finetune_epochs, args.sst2_epochs = 2, 1, 1
    args.configs = args.configs.split(",")
    args.seeds = [int(s) for s in args.seeds.split(",")]
    return args


def split_config(name):
    """ "mlm_sop+packed" -> ("mlm_sop", True)."""
    objective, _, packed = name.partition("+")
    if packed not in ("", "packed"):
        raise ValueError(f"config {name!r}: the suffix is '+packed' or nothing")
    return objective, bool(packed)


# --- 1. The corpus, the vocabulary and the records -------------------------------------------


def write_corpus(args):
    """The demo's docstring corpus and package task, the real data folder's text; returns
    {"inputs": pre-training text files, "eval": held-out text, "vocab": vocab.txt, "tasks": {name:
    data_dir}}, made once under <out>/data."""
    from keras_bert.apps.demo import corpus
    from keras_bert.apps.demo.job import SETTINGS, Job

    data = os.path.join(args.out, "data")
    done = os.path.join(data, "corpus.json")
    if os.path.exists(done):
        return json.load(open(done))
    job = Job(data, dict(SETTINGS[args.quick], vocab_size=args.vocab_size))
    train_rows, dev_rows, _ = corpus.read_docstrings(job, args.quick)
    tasks = {"packages": job.task_dir}
    corpus.write_tsv(train_rows, os.path.join(job.task_dir, "train.tsv"))
    corpus.write_tsv(dev_rows, os.path.join(job.task_dir, "dev.tsv"))
    inputs = [os.path.join(job.data_dir, "train.txt")]
    extra = real_documents(args)
    if extra:
        inputs.append(os.path.join(data, "real_text.txt"))
        corpus.write_corpus(extra, inputs[-1])
    if os.path.exists(args.sst2):
        tasks["sst2"] = write_sst2(args.sst2, os.path.join(data, "sst2"), args.quick)
    else:
        print(f"no SST-2 ({args.sst2}): the package task only")
    from keras_bert.text.vocab import write_vocabulary
    from keras_bert.text.vocab_builder import build_vocabulary

    vocab_file = os.path.join(data, "vocab.txt")
    write_vocabulary(
        build_vocabulary(inputs, vocab_size=args.vocab_size, lower_case=True), vocab_file
    )
    made = {"inputs": inputs, "eval": os.path.join(job.data_dir, "eval.txt"), "vocab": vocab_file}
    made["tasks"] = tasks
    with open(done, "w") as f:
        json.dump(made, f, indent=1)
    return made


def real_documents(args, sample_text=True, squad=True, paragraphs=False):
    """(name, text) documents of the real data folder: sample_text.txt's (blank-line separated)
    and one per SQuAD dev article (its paragraphs; with `paragraphs`, one per paragraph); []
    without the folder."""
    documents = []
    if sample_text and os.path.exists(args.sample_text):
        with open(args.sample_text, encoding="utf-8") as f:
            parts = [p.strip() for p in f.read().split("\n\n") if p.strip()]
        documents += [(f"sample_text.{i}", p) for i, p in enumerate(parts)]
    if squad and os.path.exists(args.squad):
        with open(args.squad, encoding="utf-8") as f:
            articles = json.load(f)["data"][: 4 if args.quick else None]
        if paragraphs:
            return documents + [
                (f"{a['title']}.{i}", p["context"])
                for a in articles
                for i, p in enumerate(a["paragraphs"])
            ]
        documents += [
            (a["title"], "\n\n".join(p["context"] for p in a["paragraphs"])) for a in articles
        ]
    return documents


def corpus_shares(args, made):
    """{corpus: (original share, packed share)} of real tokens at --long_seq, per corpus alone
    (the writer's statistics, one duplicate)."""
    from keras_bert.apps.demo.corpus import write_corpus as write_documents
    from keras_bert.pretraining.static_records import create_pretraining_data

    folder = os.path.join(args.out, "data", "corpora")
    corpora = {"standard library docstrings (a module a document)": made["inputs"][0]}
    sources = {
        "sample_text.txt (the original repository's)": real_documents(args, squad=False),
        "SQuAD v1.1 dev articles": real_documents(args, sample_text=False),
        "SQuAD v1.1 dev paragraphs, each a document": real_documents(
            args, sample_text=False, paragraphs=True
        ),
    }
    for i, (name, documents) in enumerate(sources.items()):
        if documents:
            corpora[name] = os.path.join(folder, f"corpus{i}.txt")
            os.makedirs(folder, exist_ok=True)
            write_documents(documents, corpora[name])
    shares = {}
    for i, (name, path) in enumerate(corpora.items()):
        out = os.path.join(folder, f"records{i}")
        if not os.path.exists(os.path.join(out, "pretraining-stats.json")):
            create_pretraining_data(
                path,
                out,
                made["vocab"],
                lower_case=True,
                max_seq_length=args.long_seq,
                max_predictions_per_seq=common.default_predictions(args.long_seq),
                dupe_factor=1,
                num_workers=1,
                pack=True,
                max_instances=args.max_instances,
            )
        stats = json.load(open(os.path.join(out, "pretraining-stats.json")))
        shares[name] = (stats["unpacked_efficiency"], stats["packing_efficiency"])
    return shares


def write_sst2(path, out, quick):
    """SST-2 dev's even rows as train.tsv, its odd rows as dev.tsv (label<TAB>text)."""
    from keras_bert.apps.demo.corpus import write_tsv
    from keras_bert.testing.five_lines import sst2_dev

    texts, labels = sst2_dev(path)
    rows = [(str(label), text) for text, label in zip(texts, labels, strict=True)]
    if quick:
        rows = rows[:96]
    os.makedirs(out, exist_ok=True)
    write_tsv(rows[::2], os.path.join(out, "train.tsv"))
    write_tsv(rows[1::2], os.path.join(out, "dev.tsv"))
    return out


def records_kind(objective, packed=False):
    """The writer's objective for a pre-training objective's records. ELECTRA reads contiguous
    text as its paper's data (RoBERTa's full-sentence rows, `mlm`: no random second segments),
    or, packed, the paper's pairs (its NSP labels unused: the writer packs pairs); `mlm` reads
    full-sentence rows (already full: never packed)."""
    if objective == "electra":
        return "mlm_nsp" if packed else "mlm"
    return objective


def write_records(args, made, kind, packed, seq, docstrings_only=False):
    """Train and eval records of one kind and format; returns their files, masked predictions
    per row, max_instances and the share of real tokens."""
    from keras_bert.pretraining.static_records import create_pretraining_data

    name = f"{kind}-{seq}{'-packed' if packed else ''}{'-docstrings' if docstrings_only else ''}"
    train_inputs = made["inputs"][:1] if docstrings_only else made["inputs"]
    out = os.path.join(args.out, "data", name)
    predictions = common.default_predictions(seq)
    settings = dict(
        vocab_file=made["vocab"],
        lower_case=True,
        max_seq_length=seq,
        max_predictions_per_seq=predictions,
        num_workers=1 if args.quick else 2,
        pack=packed,
        max_instances=args.max_instances if packed else None,
    )
    if kind != "mlm_nsp":
        settings["objective"] = kind
    for split, inputs, dupe in (
        ("train", train_inputs, args.dupe_factor),
        ("eval", [made["eval"]], 1),
    ):
        if not os.path.exists(os.path.join(out, split, "pretraining-stats.json")):
            create_pretraining_data(
                inputs,
                os.path.join(out, split),
                dupe_factor=dupe,
                seed=7 * (split == "eval") + 1,
                **settings,
            )
    stats = json.load(open(os.path.join(out, "train", "pretraining-stats.json")))
    return {
        "train": os.path.join(out, "train", "*.tfrecord"),
        "eval": os.path.join(out, "eval", "*.tfrecord"),
        "predictions": stats["settings"]["packed_predictions"] if packed else predictions,
        "max_instances": args.max_instances if packed else None,
        "real_share": real_share(stats, seq, packed),
        "rows": stats.get("rows") if packed else stats.get("examples"),
        "instances": stats.get("examples"),
    }


def real_share(stats, seq, packed):
    """Real tokens / all positions of the written rows (the writer's statistics)."""
    if packed:
        return stats["packing_efficiency"]
    return stats.get("unpacked_efficiency") or stats["tokens"] / (stats["examples"] * seq)


# --- 2. Pre-training runs ----------------------------------------------------------------------


def bert_config(args, made):
    import keras_bert

    size = len(open(made["vocab"], encoding="utf-8").read().split())
    overrides = dict(num_hidden_layers=1, intermediate_size=256) if args.quick else {}
    return keras_bert.BertConfig.preset(
        "tiny", vocab_size=size, max_position_embeddings=max(args.seq, args.long_seq), **overrides
    )


def pretrain(args, made, config, name, records, steps, seed, model_dir, seq, batch, loop):
    """One `run_pretraining` of a configuration; returns its summary (no model)."""
    from keras_bert.pretraining.runner import run_pretraining

    objective, _ = split_config(name)
    summary = run_pretraining(
        bert_config=config,
        train_files=records["train"],
        eval_files=records["eval"],
        batch_size=batch,
        seq_length=seq,
        max_predictions_per_seq=records["predictions"],
        max_instances=records["max_instances"],
        objective=objective,
        generator_size=args.generator_size,
        num_train_steps=steps,
        num_warmup_steps=max(1, steps // 10),
        learning_rate=args.learning_rate,
        steps_per_loop=loop,
        checkpoint_every=max(loop, steps // 4 // loop * loop),
        keep_checkpoints=8,
        model_dir=model_dir,
        seed=seed,
        vocab_file=made["vocab"],
        lower_case=True,
        max_eval_steps=10 if args.quick else 50,
        plot=False,
    )
    summary.pop("model", None)
    return json.loads(json.dumps(summary, default=str))


def step_seconds(summary):
    """Median seconds per update step of the logging loops after the first (tracing)."""
    loops = [h for h in summary["history"] if h["step"] > summary["start_step"]]
    starts = [summary["start_step"]] + [h["step"] for h in loops[:-1]]
    per_step = [h["seconds"] / (h["step"] - a) for h, a in zip(loops, starts, strict=True)]
    return statistics.median(per_step[1:] or per_step)


def time_configs(args, made, config, runs, seq, batch):
    """{name: [seconds per step, one per round]}: each config's `--timed_steps` steps in
    interleaved rounds (fresh model and run directory each time)."""
    times = {name: [] for name in runs}
    loop = max(1, args.timed_steps // 3)
    for r in range(args.rounds):
        for name, records in runs.items():
            run_dir = os.path.join(args.out, "timing", f"{name}-{seq}-{r}")
            shutil.rmtree(run_dir, ignore_errors=True)
            summary = pretrain(
                args,
                made,
                config,
                name,
                dict(records, eval=None),
                loop * 3,
                r,
                run_dir,
                seq,
                batch,
                loop,
            )
            times[name].append(step_seconds(summary))
            shutil.rmtree(run_dir, ignore_errors=True)
            print(
                f"  timing {name} at {seq}, round {r + 1}: {times[name][-1] * 1e3:.0f} ms/step",
                flush=True,
            )
    return times


def time_new_configs(args, made, config, runs, missing, timing):
    """{name: seconds per step} of the `missing` configurations. Where others were timed
    before (a benchmark resumed with more configurations, perhaps on a machine now faster or
    slower), one of those, the reference, is timed again in the same interleaved rounds, and
    the new times are scaled by its stored / new fastest round: equal time stays equal to the
    runs already done."""
    reference = next((n for n in runs if n in timing), None)
    rounds = dict(missing, **({reference: runs[reference]} if reference else {}))
    times = time_configs(args, made, config, rounds, args.seq, args.batch)
    if reference is None:
        return times
    scale = min(timing[reference]) / min(times.pop(reference))
    print(f"  times scaled by {scale:.3f}, {reference}'s stored / new step time", flush=True)
    return {name: [t * scale for t in values] for name, values in times.items()}


def step_flops(config, name, batch, seq, predictions, generator_size=0.25):
    objective, _ = split_config(name)
    if objective == "electra":
        return common.electra_step_flops(config, batch, seq, predictions, generator_size)
    return common.pretraining_step_flops(
        config, batch, seq, predictions, next_sentence=objective in ("mlm_nsp", "mlm_sop")
    )


# --- 1b. The loss per real token at --long_seq ------------------------------------------------


def long_batch(args, records):
    """Rows per step of a --long_seq loss curve: --long_batch original rows, and packed rows
    holding as many instances (Krell et al. 2021 shrink the batch by the packing factor so that
    each update sees the same number of sequences: same updates, same curve per token)."""
    if records["max_instances"] is None:
        return args.long_batch
    return max(1, round(args.long_batch * records["rows"] / records["instances"]))


def long_curve_run(args, made, config, key, records, seed):
    """One pass over a format's --long_seq records (MLM + NSP); returns its steps, rows per
    step, real tokens per step, loss curve and held-out losses (the run directory is not
    kept)."""
    name = key.split("/")[0]
    batch = long_batch(args, records)
    steps = max(args.loop, records["rows"] // batch // args.loop * args.loop)
    run_dir = os.path.join(args.out, "long_curves", key.replace("/", "-"))
    shutil.rmtree(run_dir, ignore_errors=True)
    summary = pretrain(
        args,
        made,
        config,
        name,
        records,
        steps,
        seed,
        run_dir,
        args.long_seq,
        batch,
        args.loop,
    )
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f"  {key} at {args.long_seq}: {steps} steps, held-out {summary['eval']}", flush=True)
    return {
        "steps": summary["steps"],
        "batch": batch,
        "real_tokens_per_step": batch * args.long_seq * records["real_share"],
        "train_seconds": sum(h["seconds"] for h in summary["history"]),
        "eval": summary["eval"],
        "curve": [{"step": h["step"], "mlm_loss": h.get("mlm_loss")} for h in summary["history"]],
    }


def loss_by_tokens(run, tokens):
    """A run's training masked-LM loss interpolated at `tokens` real tokens seen (a loop's mean
    stands at the loop's last step)."""
    import numpy as np

    curve = [h for h in run["curve"] if h.get("mlm_loss") is not None]
    seen = [h["step"] * run["real_tokens_per_step"] for h in curve]
    return float(np.interp(tokens, seen, [h["mlm_loss"] for h in curve]))


def long_curve_table(args, results, fractions=(0.25, 0.5, 0.75, 1.0)):
    """Original against packed rows at --long_seq: the masked-LM loss at equal real tokens
    (fractions of the pass both made), the packed minus the original per seed, and the
    held-out losses after the pass."""
    curves = results.get("long_curves", {})
    pairs = [  # (original, packed) of each seed that has both.
        (run, curves[f"mlm_nsp+packed/seed{key.split('/seed')[1]}"])
        for key, run in sorted(curves.items())
        if key.startswith("mlm_nsp/") and f"mlm_nsp+packed/seed{key.split('/seed')[1]}" in curves
    ]
    rows = []

    def compare(label, measure):  # One row: measure(run) of each format, and their difference.
        original = [measure(a) for a, _ in pairs]
        packed = [measure(b) for _, b in pairs]
        difference = [b - a for a, b in zip(original, packed, strict=True)]
        rows.append([label, spread(original, "{:.3f}"), spread(packed, "{:.3f}")])
        rows[-1].append(spread(difference, "{:+.3f}"))

    if pairs:
        total = min(min(r["steps"] * r["real_tokens_per_step"] for r in p) for p in pairs)
        for fraction in fractions:
            tokens = fraction * total
            compare(
                f"{tokens / 1e6:.2f}M ({fraction:.0%} of the pass)",
                lambda run, tokens=tokens: loss_by_tokens(run, tokens),
            )
        for metric in ("mlm_loss", "mlm_accuracy"):
            compare(
                f"held-out {metric.replace('_', ' ')} after the pass",
                lambda run, metric=metric: run["eval"][metric],
            )
        steps = [f"{statistics.median(p[i]['steps'] for p in pairs):.0f}" for i in (0, 1)]
        rows.append(["steps for the pass", *steps, "-"])
    columns = [f"real tokens seen ({args.long_seq} tokens a row)", "original rows: MLM loss"]
    columns += ["packed rows: MLM loss", "packed - original"]
    return {"columns": columns, "rows": rows}


# --- 3. Fine-tuning ------------------------------------------------------------------------------


def finetune(args, init, task_dir, model_dir, seed, epochs, learning_rate):
    """Dev accuracy of one `run_finetuning` (text_classification) from a checkpoint."""
    from keras_bert.tasks.finetuning import run_finetuning

    summary = run_finetuning(
        task="text_classification",
        data_dir=task_dir,
        init_checkpoint=init,
        model_dir=model_dir,
        do_train=True,
        do_eval=True,
        seq_length=args.seq,
        batch_size=32,
        learning_rate=learning_rate,
        num_train_epochs=epochs,
        seed=seed,
        plot=False,
    )
    shutil.rmtree(model_dir, ignore_errors=True)  # Only the number is kept.
    return summary["eval"]["accuracy"]


def checkpoints(run_dir):
    """[(step, checkpoint prefix)] of a pre-training run, by step."""
    import tensorflow as tf

    state = tf.train.get_checkpoint_state(run_dir)
    paths = list(state.all_model_checkpoint_paths) if state else []
    found = [(int(p.rsplit("-", 1)[1]), p) for p in paths]
    return sorted(found)


def budget_run(args, made, config, name, records, steps, seed):
    """Pre-trains one configuration and seed, fine-tunes its quarter checkpoints; returns the
    result dict."""
    run_dir = os.path.join(args.out, "runs", f"{name}-seed{seed}")
    if name == NO_PRETRAINING:
        return control_run(args, made, config, run_dir, seed)
    summary = pretrain(
        args, made, config, name, records, steps, seed, run_dir, args.seq, args.batch, args.loop
    )
    result = {
        "steps": summary["steps"],
        "train_seconds": sum(h["seconds"] for h in summary["history"]),
        "eval": summary["eval"],
        "curve": [
            {k: h.get(k) for k in ("step", "seconds", "loss", "mlm_loss")}
            for h in summary["history"]
        ],
        "finetuned": [],
    }
    seconds_per_step = result["train_seconds"] / max(1, summary["steps"])
    found = checkpoints(run_dir)[-4:]
    every = max(1, len(found) // args.curve_points)
    found = found[every - 1 :: every]
    result["finetuned"] = finetune_checkpoints(args, made, name, seed, run_dir, found)
    result["representation"] = representation(args, made, found[-1][1])
    for row in result["finetuned"]:
        row["seconds"] = row["step"] * seconds_per_step
    return result


def final_checkpoint(args, name, seed):
    """The checkpoint a run's last fine-tuning started from (None if its files are gone)."""
    run_dir = os.path.join(args.out, "runs", f"{name}-seed{seed}")
    if name == NO_PRETRAINING:
        path = os.path.join(run_dir, "init")
        return path if os.path.exists(path) else None
    found = checkpoints(run_dir) if os.path.isdir(run_dir) else []
    return found[-1][1] if found else None


def control_run(args, made, config, run_dir, seed):
    """The control: no pre-training. A freshly initialized encoder (the same config, the seed's
    initialization) written as a checkpoint and fine-tuned as every other; without it the table
    cannot say whether a budget's pre-training helped at all."""
    import keras

    import keras_bert
    from keras_bert import checkpoints as formats

    keras.utils.set_random_seed(seed)
    path = os.path.join(run_dir, "init")
    if not os.path.exists(path):
        formats.save(keras_bert.BertEncoder(config), path, vocab=made["vocab"])
    result = {"steps": 0, "train_seconds": 0.0, "eval": {}, "curve": []}
    result["finetuned"] = finetune_checkpoints(
        args, made, NO_PRETRAINING, seed, run_dir, [(0, path)]
    )
    result["finetuned"][0]["seconds"] = 0.0
    result["representation"] = representation(args, made, path)
    return result


def finetune_checkpoints(args, made, name, seed, run_dir, found):
    """[{step, packages, sst2 (the last one)}] of fine-tuning each (step, checkpoint)."""
    rows = []
    for step, path in found:
        row = {"step": step}
        row["packages"] = finetune(
            args,
            path,
            made["tasks"]["packages"],
            run_dir + "-ft",
            seed,
            args.finetune_epochs,
            args.finetune_lr,
        )
        if step == found[-1][0] and "sst2" in made["tasks"]:
            row["sst2"] = finetune(
                args,
                path,
                made["tasks"]["sst2"],
                run_dir + "-ft",
                seed,
                args.sst2_epochs,
                args.sst2_lr,
            )
        rows.append(row)
        print(f"  {name} seed {seed} step {step}: {row}", flush=True)
    return rows


@functools.lru_cache(maxsize=4)
def held_out_inputs(vocab, task_dir, seq, texts):
    """The encoder inputs of the task's first `texts` dev texts (read and tokenized once for
    every run `representation` measures)."""
    import tensorflow as tf

    import keras_bert

    with open(os.path.join(task_dir, "dev.tsv"), encoding="utf-8") as f:
        rows = [line.split("\t", 1)[1] for line in f.read().splitlines()[:texts]]
    tokenizer = keras_bert.BertTokenizer(vocab, lower_case=True)
    return keras_bert.BertPreprocessor(tokenizer, seq_length=seq)(tf.constant(rows))


def representation(args, made, checkpoint, texts=64):
    """{token_cosine, effective_rank} of an encoder's token outputs on the package task's first
    dev texts: the mean cosine similarity between real tokens' final hidden states and the
    effective rank (exp of the entropy of the normalized singular values, Roy and Vetterli 2007)
    of the centred states. A collapsed encoder (every token the same vector) has cosine near 1
    and a rank near 1, a fresh one a low cosine and a rank near its width."""
    import numpy as np

    from keras_bert import checkpoints as formats

    inputs = held_out_inputs(made["vocab"], made["tasks"]["packages"], args.seq, texts)
    encoder = formats.load_encoder(checkpoint)
    states = np.asarray(encoder(inputs)["sequence_output"], np.float64)
    states = states[np.asarray(inputs["input_mask"]) > 0]
    unit = states / np.linalg.norm(states, axis=1, keepdims=True)
    n = len(unit)
    cosine = (np.square(unit.sum(0)).sum() - n) / (n * (n - 1))  # Mean over pairs i != j.
    singular = np.linalg.svd(states - states.mean(0), compute_uv=False)
    p = singular / max(singular.sum(), 1e-30)  # All states the same vector: rank 0.
    rank = float(np.exp(-(p[p > 0] * np.log(p[p > 0])).sum())) if singular.sum() > 0 else 0.0
    return {"token_cosine": float(cosine), "effective_rank": rank}


# --- The benchmark -------------------------------------------------------------------------------


def supported(name, records):
    """Whether the runner trains this configuration (ELECTRA on packed rows may not)."""
    from keras_bert.pretraining.config import PretrainingConfig

    objective, _ = split_config(name)
    try:
        PretrainingConfig(
            objective=objective,
            max_instances=records["max_instances"],
            train_files="x",
            model_dir="x",
        )
    except ValueError as e:
        print(f"skipping {name}: {e}")
        return False
    return True


def budget_steps(args, seconds_per_step):
    """The steps (a multiple of 4 logging loops) that fill --seconds at this step time."""
    unit = 4 * args.loop
    return max(unit, int(args.seconds / seconds_per_step / unit) * unit)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    results = json.load(open(path)) if os.path.exists(path) else {}
    results.setdefault("runs", {})

    def save():
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, path)

    made = write_corpus(args)
    config = bert_config(args, made)
    long_runs = {
        name: write_records(args, made, "mlm_nsp", packed, args.long_seq, docstrings_only=True)
        for name, packed in (("mlm_nsp", False), ("mlm_nsp+packed", True))
    }
    if "throughput" not in results:
        print(f"1. Throughput at {args.long_seq} tokens ...", flush=True)
        times = time_configs(args, made, config, long_runs, args.long_seq, args.long_batch)
        results["throughput"] = {
            name: {"step_seconds": times[name], "real_share": long_runs[name]["real_share"]}
            for name in long_runs
        }
        save()
    if "corpora" not in results:
        results["corpora"] = corpus_shares(args, made)
        save()
    print(f"1b. The loss per real token at {args.long_seq} tokens ...", flush=True)
    curves = results.setdefault("long_curves", {})
    formats = {p: write_records(args, made, "mlm_nsp", p, args.long_seq) for p in (False, True)}
    for seed in args.seeds:
        for packed, records in formats.items():
            key = f"mlm_nsp{'+packed' if packed else ''}/seed{seed}"
            if curves.get(key, {}).get("batch") != long_batch(args, records):
                curves[key] = long_curve_run(args, made, config, key, records, seed)
                save()
    runs = {}
    for name in args.configs:
        if name == NO_PRETRAINING:
            runs[name] = {}
            continue
        objective, packed = split_config(name)
        kind = records_kind(objective, packed)
        records = write_records(args, made, kind, packed, args.seq)
        if supported(name, records):
            runs[name] = dict(records, kind=kind)
    timing = results.setdefault("timing", {})
    missing = {n: r for n, r in runs.items() if n not in timing and n != NO_PRETRAINING}
    if missing:
        print(f"2. Step times at {args.seq} tokens ...", flush=True)
        timing.update(time_new_configs(args, made, config, runs, missing, timing))
        save()
    print(f"3. Pre-training for {args.seconds:.0f} s each, then fine-tuning ...", flush=True)
    for seed in args.seeds:
        for name, records in runs.items():
            key = f"{name}/seed{seed}"
            if key not in results["runs"]:
                steps = budget_steps(args, min(timing[name])) if name in timing else 0
                results["runs"][key] = budget_run(args, made, config, name, records, steps, seed)
                save()
    for key, run in results["runs"].items():  # Runs of a version without the measure.
        final = "representation" not in run and final_checkpoint(args, *key.split("/seed"))
        if final:
            run["representation"] = representation(args, made, final)
            save()
    record = report(args, results, config, runs, long_runs)
    with open(os.path.join(args.out, "record.json"), "w") as f:
        json.dump(record, f, indent=1)
    plot(results, runs, args.batch * args.seq, os.path.join(args.out, "budget.png"), args.long_seq)
    return record


def spread(values, fmt="{:.1%}"):
    """ "mean (min-max)" of a list of numbers."""
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return fmt.format(mean)
    to = " to " if "+" in fmt or min(values) < 0 else "-"  # Signs: "(-0.1 to +0.2)".
    return f"{fmt.format(mean)} ({fmt.format(min(values))}{to}{fmt.format(max(values))})"


def throughput_table(args, results):
    rows, base = [], None
    for name, r in results["throughput"].items():
        seconds = min(r["step_seconds"])
        tokens = args.long_batch * args.long_seq / seconds
        real = tokens * r["real_share"]
        base = base or real
        rows.append(
            [
                "original rows"
                if name == "mlm_nsp"
                else f"packed (max_instances {args.max_instances})",
                f"{r['real_share']:.1%}",
                spread([t * 1e3 for t in r["step_seconds"]], "{:.0f}"),
                f"{tokens:,.0f}",
                f"{real:,.0f}",
                f"{real / base:.2f}x",
            ]
        )
    columns = ["rows", "real tokens", "ms per step (fastest round; mean, range)"]
    columns += ["tokens/s", "real tokens/s"]
    return {"columns": columns + ["real tokens/s vs original"], "rows": rows}


def corpora_table(args, results):
    """Real tokens per corpus; real tokens per second with this run's step times at 512."""
    times = {name: min(r["step_seconds"]) for name, r in results["throughput"].items()}
    speed = times["mlm_nsp"] / times["mlm_nsp+packed"]
    rows = [
        [name, f"{original:.1%}", f"{packed:.1%}", f"{packed / original * speed:.2f}x"]
        for name, (original, packed) in results["corpora"].items()
    ]
    columns = [f"corpus ({args.long_seq} tokens)", "real tokens, original rows", "packed"]
    return {"columns": columns + ["real tokens/s, packed / original"], "rows": rows}


def seed_runs(results, name):
    return [r for key, r in results["runs"].items() if key.split("/")[0] == name]


def loss_at_tokens(run, records, batch, seq, tokens):
    """The masked-LM loss of a run's logging loop nearest `tokens` real tokens seen."""
    per_step = batch * seq * records["real_share"]
    curve = [h for h in run["curve"] if h.get("mlm_loss") is not None]
    nearest = min(curve, key=lambda h: abs(h["step"] * per_step - tokens))
    return nearest["mlm_loss"]


def objectives_table(args, results, config, runs):
    rows = []
    unpacked = runs.get("mlm_nsp")
    matched = None
    if unpacked and seed_runs(results, "mlm_nsp"):  # Real tokens the unpacked runs saw.
        steps = statistics.median(r["steps"] for r in seed_runs(results, "mlm_nsp"))
        matched = steps * args.batch * args.seq * unpacked["real_share"]
    for name, records in runs.items():
        done = seed_runs(results, name)
        if not done:
            continue
        finals = [r["finetuned"][-1] for r in done]
        shape = [r["representation"] for r in done if "representation" in r]
        downstream = [  # The last three columns, every configuration's.
            spread([f["packages"] for f in finals]),
            spread([f["sst2"] for f in finals if "sst2" in f]),
            spread([x["token_cosine"] for x in shape], "{:.2f}")
            + " / "
            + spread([x["effective_rank"] for x in shape], "{:.0f}"),
        ]
        if name == NO_PRETRAINING:
            label = "none (no pre-training: a fresh encoder)"
            rows.append([label, "0", "0", "0", "0", "-", "-", "-", *downstream])
            continue
        flops = step_flops(
            config, name, args.batch, args.seq, records["predictions"], args.generator_size
        )
        steps = statistics.median(r["steps"] for r in done)
        mlm = [
            r["eval"].get("mlm_accuracy") for r in done if r["eval"].get("mlm_accuracy") is not None
        ]
        loss = (
            spread(
                [loss_at_tokens(r, records, args.batch, args.seq, matched) for r in done], "{:.3f}"
            )
            if matched and split_config(name)[0] != "electra"
            else "-"
        )
        rows.append(
            [
                name,
                f"{steps:.0f}",
                f"{steps * min(results['timing'][name]):.0f}",
                spread([r["train_seconds"] for r in done], "{:.0f}"),
                f"{flops * steps / 1e12:.1f}",
                f"{records['real_share']:.1%}",
                spread(mlm, "{:.3f}"),
                loss,
                *downstream,
            ]
        )
    columns = ["configuration", "steps", "budgeted s (steps x timed step)"]
    columns += ["pre-training s (as run)", "est. TFLOPs", "real tokens"]
    columns += ["held-out MLM acc (ELECTRA: its generator's)"]
    columns += ["MLM loss at the original rows' real tokens"]
    columns += ["package task dev acc", "SST-2 dev acc"]
    columns += ["token outputs: mean cosine / effective rank (collapse: 1 / 1)"]
    return {
        "columns": columns,
        "rows": rows,
        "plot": {
            "label": "configuration",
            "value": "package task dev acc",
            "xlabel": "package task dev accuracy (mean over seeds)",
        },
    }


def report(args, results, config, runs, long_runs):
    throughput = throughput_table(args, results)
    corpora = corpora_table(args, results)
    curves = long_curve_table(args, results)
    objectives = objectives_table(args, results, config, runs)
    for table in (throughput, corpora, curves, objectives):
        print(common.format_table(table["columns"], table["rows"]))
    record = {
        "script": "bench/pretraining_budget.py",
        "page": "pretraining",
        "order": 1,
        "title": "Pre-training on a budget: packed rows, and each objective at equal wall time",
        "command": "python bench/pretraining_budget.py "
        + " ".join(
            f"--{k} {v}"
            for k, v in (("seconds", args.seconds), ("seeds", ",".join(map(str, args.seeds))))
        ),
        "machine": common.machine(),
        "versions": common.versions(),
        "tables": [throughput, corpora, curves, objectives],
        "settings": {k: v for k, v in vars(args).items() if not k.startswith("_")},
    }
    import datetime

    record["date"] = datetime.date.today().isoformat()
    return record


def plot(results, runs, row_tokens, path, long_seq=512):
    """The package task's dev accuracy against pre-training seconds per configuration (mean over
    seeds, the range shaded); the masked-LM loss against steps x real tokens per step; at
    `long_seq`, the original and packed rows' masked-LM loss against real tokens (mean over
    seeds, the range shaded)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, (left, right, long) = plt.subplots(1, 3, figsize=(17, 4.5))
    for name in runs:
        done = seed_runs(results, name)
        if not done:
            continue
        if name == NO_PRETRAINING:  # A band: what fine-tuning reaches without pre-training.
            finals = [r["finetuned"][-1]["packages"] for r in done]
            left.axhline(statistics.fmean(finals), color="gray", linestyle="--", label=name)
            left.axhspan(min(finals), max(finals), color="gray", alpha=0.1)
            continue
        points = min(len(r["finetuned"]) for r in done)
        per_step = min(results["timing"][name])  # The budget's time, not a loaded run's.
        steps = np.array([[r["finetuned"][i]["step"] for i in range(points)] for r in done])
        seconds = steps * per_step
        accuracy = np.array([[r["finetuned"][i]["packages"] for i in range(points)] for r in done])
        x = seconds.mean(0)
        left.plot(x, accuracy.mean(0), marker="o", label=name)
        left.fill_between(x, accuracy.min(0), accuracy.max(0), alpha=0.15)
        if split_config(name)[0] in ("mlm_nsp", "mlm", "mlm_sop"):
            curve = [h for h in done[0]["curve"] if h.get("mlm_loss") is not None]
            per_step = runs[name]["real_share"] * row_tokens
            right.plot(
                [h["step"] * per_step / 1e6 for h in curve],
                [h["mlm_loss"] for h in curve],
                label=name,
            )
    left.set_xlabel("pre-training seconds (steps x the timed step)")
    left.set_ylabel("package task dev accuracy")
    left.legend()
    right.set_xlabel("real tokens seen (millions), seed 0")
    right.set_ylabel("masked-LM loss")
    right.legend()
    curves = results.get("long_curves", {})
    for name, label in (("mlm_nsp", "original rows"), ("mlm_nsp+packed", "packed rows")):
        done = [r for k, r in curves.items() if k.split("/")[0] == name]
        if not done:
            continue
        end = min(r["steps"] * r["real_tokens_per_step"] for r in done)
        grid = np.linspace(end / 20, end, 40)
        losses = np.array([[loss_by_tokens(r, t) for t in grid] for r in done])
        long.plot(grid / 1e6, losses.mean(0), label=f"{label} ({len(done)} seeds)")
        long.fill_between(grid / 1e6, losses.min(0), losses.max(0), alpha=0.2)
    long.set_xlabel(f"real tokens seen (millions), rows of {long_seq}")
    long.set_ylabel("masked-LM loss (training)")
    if curves:
        long.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
