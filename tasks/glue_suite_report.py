"""The GLUE suite's report (`keras_bert.tasks.glue_suite`): results.json with the averages and
the paper's Table 1 numbers beside ours, results.md (`render_markdown`) and results.png."""

import dataclasses
import json
import os
import statistics
from typing import Any

from keras_bert.tasks import sweep

RESULTS_JSON, RESULTS_MD, RESULTS_PNG = "results.json", "results.md", "results.png"

# The paper's Table 1 columns: (column, task, our metric key), and its GLUE test numbers
# (BERT-base, BERT-large). WNLI: the majority class, 65.1, left out of the average.
COLUMNS = (
    ("MNLI-m", "mnli", "accuracy_matched"),
    ("MNLI-mm", "mnli", "accuracy_mismatched"),
    ("QQP", "qqp", "f1"),
    ("QNLI", "qnli", "accuracy"),
    ("SST-2", "sst2", "accuracy"),
    ("CoLA", "cola", "matthews_correlation"),
    ("STS-B", "stsb", "spearman"),
    ("MRPC", "mrpc", "f1"),
    ("RTE", "rte", "accuracy"),
    ("WNLI", "wnli", "accuracy"),
)
PAPER_TEST = {
    "MNLI-m": (84.6, 86.7),
    "MNLI-mm": (83.4, 85.9),
    "QQP": (71.2, 72.1),
    "QNLI": (90.5, 92.7),
    "SST-2": (93.5, 94.9),
    "CoLA": (52.1, 60.5),
    "STS-B": (85.8, 86.5),
    "MRPC": (88.9, 89.3),
    "RTE": (66.4, 70.1),
    "WNLI": (65.1, 65.1),
}


def write_report(plan, results):
    """Adds the averages and the paper's numbers to `results`, writes results.json, .md, .png."""
    results = dict(results)
    results["columns"] = _columns(results["tasks"])
    results["average_without_wnli"] = _average(results["columns"])
    results["settings"] = {
        "data_dir": plan.data_dir,
        "tasks": list(plan.tasks),
        "wnli": plan.wnli,
        "grids": {t: dataclasses.asdict(g) for t, g in plan.grids.items()},
    }
    sweep.write_file(os.path.join(plan.model_dir, RESULTS_JSON), json.dumps(results, indent=1))
    sweep.write_file(os.path.join(plan.model_dir, RESULTS_MD), render_markdown(results))
    _plot(plan, results)
    return results


def _columns(tasks):
    """The paper's Table 1 columns of the tasks run: ours (dev, x100) beside the paper's test."""
    columns = []
    for column, task, key in COLUMNS:
        if task in tasks:
            base, large = PAPER_TEST[column]
            score = tasks[task]["dev"].get(key)
            columns.append(
                {
                    "column": column,
                    "task": task,
                    "metric": key,
                    "dev": None if score is None else 100 * score,
                    "paper_base_test": base,
                    "paper_large_test": large,
                }
            )
    return columns


def _average(columns):
    """Our dev average and the paper's test averages over the same columns, WNLI left out (as the
    paper's Table 1 "Average": 79.6 base, 82.1 large over all nine columns)."""
    kept = [c for c in columns if c["task"] != "wnli" and c["dev"] is not None]
    if not kept:
        return None
    return {
        "columns": [c["column"] for c in kept],
        "dev": statistics.fmean(c["dev"] for c in kept),
        "paper_base_test": statistics.fmean(c["paper_base_test"] for c in kept),
        "paper_large_test": statistics.fmean(c["paper_large_test"] for c in kept),
    }


def render_markdown(results: dict[str, Any]) -> str:
    """results.md: one row per paper column (ours on dev, the best run's setting, the spread of its
    setting across seeds, the paper's BERT-base and -large test numbers), then the averages."""
    lines = [
        "| task | metric | ours (dev) | best lr | batch | epochs | optimizer | best seed | "
        "seeds: mean ± std (min-max) | runs | paper BERT-base (test) | paper BERT-large (test) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results["columns"]:
        record = results["tasks"][c["task"]]
        setting = record["best_setting"]
        seeds = record["seeds"]
        named = f"{record['metric']} " if record["metric"] != c["metric"] else ""
        spread = (
            f"{named}{100 * seeds['mean']:.2f} ± {100 * seeds['std']:.2f} "
            f"({100 * seeds['min']:.2f}-{100 * seeds['max']:.2f}, {seeds['count']} seeds)"
            if seeds
            else "-"
        )
        row = [
            c["column"],
            c["metric"],
            _cell(c["dev"]),
            *_setting_cells(setting),
            spread,
            str(len(record["runs"])),
            _cell(c["paper_base_test"]),
            _cell(c["paper_large_test"]),
        ]
        lines.append("| " + " | ".join(row) + " |")
    average = results.get("average_without_wnli")
    if average:
        lines += [
            "",
            f"GLUE average without WNLI over {', '.join(average['columns'])}: ours (dev) "
            f"{average['dev']:.2f}; paper BERT-base (test) {average['paper_base_test']:.2f}, "
            f"BERT-large (test) {average['paper_large_test']:.2f}.",
        ]
    capped = [
        f"{t} {r['train_examples_used']:,} of {r['train_examples']:,}"
        for t, r in results["tasks"].items()
        if r["train_examples_used"] < r["train_examples"]
    ]
    if capped:
        lines += ["", f"Training sets capped (max_train_examples): {', '.join(capped)}."]
    lines += [
        "",
        "Each task's best run is chosen on dev by its main metric (STS-B: Pearson; MNLI: matched "
        "accuracy); the spread is that metric across the seeds of the best setting. The paper's "
        "numbers are GLUE test scores (Table 1).",
    ]
    return "\n".join(lines) + "\n"


def _setting_cells(setting):
    """The best lr, batch, epochs, optimizer and seed cells (WNLI majority: "majority class 0")."""
    if "majority_class" in setting:
        return [f"majority class {setting['majority_class']}", "-", "-", "-", "-"]
    return [
        f"{setting['learning_rate']:g}",
        *(str(setting[k]) for k in ("batch_size", "num_train_epochs", "optimizer", "seed")),
    ]


def _cell(value):
    return "-" if value is None else f"{value:.2f}"


def _plot(plan, results):
    from keras_bert.training import plots

    panels = []
    for task in plan.tasks:
        record = results["tasks"].get(task)
        if record and record["runs"]:
            points = [
                (
                    r["setting"]["learning_rate"],
                    r["setting"]["seed"],
                    100 * r["score"],
                    _others(r["setting"]),
                )
                for r in record["runs"]
            ]
            panels.append((task, record["metric"], points))
    if panels:
        plots.plot_sweeps(panels, os.path.join(plan.model_dir, RESULTS_PNG), title="GLUE dev")


def _others(setting):
    """The non-lr, non-seed part of a setting, as a short label ("" when the grid has one)."""
    return f"bs{setting['batch_size']} ep{setting['num_train_epochs']} {setting['optimizer']}"
