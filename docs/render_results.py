"""Renders the results pages (Markdown tables and matplotlib plots) from the JSON files of
measurements under docs/results/data/.

    python docs/render_results.py [--data docs/results/data] [--out build/results]

Each JSON file is one measurement: what was run (`command`), when (`date`), where (`machine`),
with which library versions (`versions`), and its `tables` (columns and rows, as printed); a
`page` names the results page it belongs to (`PAGES`). Benchmarks write such files themselves
(`bench/common.py`'s `write_results`); the measurements made before that were transcribed from
README.md and CHANGELOG.md and say so (`transcribed`). A table with a `plot` (a label column and
a numeric column) also gets a bar chart. docs/hooks.py renders the pages into the site when it
is built; nothing rendered is committed.
"""

import argparse
import io
import json
import re
from pathlib import Path

DATA = Path(__file__).resolve().parent / "results" / "data"

# Page slug -> (title, introduction). The order is the site's.
PAGES = {
    "speed": (
        "Speed against peers",
        "Ratios against keras-hub, tf-models-official and Hugging Face tokenizers, each measured "
        "in the same run as ours (interleaved rounds, medians; `make bench`).",
    ),
    "pretraining": (
        "Pre-training on a budget",
        "Packed rows against the original format, and the objectives after BERT at equal wall "
        "time, each fine-tuned on the demo's task and SST-2 (a tiny encoder on 2 CPU cores).",
    ),
    "tasks": (
        "Task scores with a real model",
        "all-MiniLM-L6-v2 (6 layers, H 384) fine-tuned on 2 CPU cores on the data at hand: the "
        "tasks learn; these are not the paper's BERT-base scores.",
    ),
    "long-documents": (
        "Long documents",
        "Reading a whole document in windows against truncating it to one window.",
    ),
    "distillation": (
        "Distillation and LoRA",
        "Students of 3 of a fine-tuned teacher's 6 layers, and LoRA fine-tuning.",
    ),
    "tflite": (
        "TFLite and quantization",
        "Exports with the tokenizer inside, per quantization: answers kept against float32, "
        "speed against dynamic range, size.",
    ),
    "serving": (
        "Serving under load",
        "The SavedModel under concurrent clients against keras-hub, and the soak test.",
    ),
}

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def load(data_dir=DATA):
    """Every measurement file under `data_dir`, sorted by (page order, `order`, file name).

    Raises:
        ValueError: a file without one of the required keys, or naming an unknown page.
    """
    records = []
    for path in sorted(Path(data_dir).glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        missing = {"page", "title", "command", "date", "machine", "tables"} - set(record)
        if missing:
            raise ValueError(f"{path}: missing {sorted(missing)}")
        if record["page"] not in PAGES:
            raise ValueError(f"{path}: unknown page {record['page']!r}; pages: {list(PAGES)}")
        record["file"] = path.name
        records.append(record)
    pages = list(PAGES)
    return sorted(records, key=lambda r: (pages.index(r["page"]), r.get("order", 0), r["file"]))


def _cell(value):
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(table):
    """A Markdown table from {"columns": [...], "rows": [[...], ...]}.

    Raises:
        ValueError: a row whose length differs from the columns'.
    """
    columns = table["columns"]
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    for row in table["rows"]:
        if len(row) != len(columns):
            raise ValueError(f"row {row} has {len(row)} cells, columns {len(columns)}")
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines)


def first_number(value):
    """The first number in a cell ("1.08× keras-hub" -> 1.08), or None."""
    found = NUMBER.search(str(value).replace(",", ""))
    return float(found.group()) if found else None


def plot_png(table, spec):
    """PNG bytes: one bar per row, its `spec["label"]` column against its `spec["value"]` column
    (the first number of each cell; rows without one are left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = table["columns"]
    label_at, value_at = columns.index(spec["label"]), columns.index(spec["value"])
    points = [(str(r[label_at]), first_number(r[value_at])) for r in table["rows"]]
    points = [(label, value) for label, value in points if value is not None]
    figure, axes = plt.subplots(figsize=(8, 0.45 * len(points) + 1.2))
    labels = [label.replace("`", "").replace("**", "") for label, _ in points]
    labels = [label if len(label) <= 40 else label[:39] + "…" for label in labels]
    # Positions, not categories: rows whose shortened labels coincide stay separate bars.
    axes.barh(range(len(points)), [value for _, value in points])
    axes.set_yticks(range(len(points)), labels)
    if "reference" in spec:
        axes.axvline(spec["reference"], color="tab:red", linestyle="--")
    axes.invert_yaxis()
    axes.set_xlabel(spec.get("xlabel", spec["value"]))
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return buffer.getvalue()


def _provenance(record):
    versions = ", ".join(f"{k} {v}" for k, v in sorted(record.get("versions", {}).items()))
    machine = record["machine"]
    if isinstance(machine, dict):  # As bench/common.py records it.
        machine = ", ".join(f"{k} {v}" for k, v in machine.items())
    lines = [
        f"- command: `{record['command']}`",
        f"- date: {record['date']}; machine: {machine}",
    ]
    if versions:
        lines.append(f"- versions: {versions}")
    if record.get("transcribed"):
        lines.append(f"- transcribed: {record['transcribed']}")
    lines.append(f"- data: `docs/results/data/{record['file']}`")
    return lines


def render_page(slug, records):
    """(Markdown of one results page, {image file name: PNG bytes})."""
    title, intro = PAGES[slug]
    parts, images = [f"# {title}", "", intro, ""], {}
    for record in records:
        parts += [f"## {record['title']}", ""]
        if record.get("description"):
            parts += [record["description"], ""]
        for k, table in enumerate(record["tables"]):
            if table.get("title"):
                parts += [f"**{table['title']}**", ""]
            parts += [markdown_table(table), ""]
            if table.get("plot"):
                name = f"{Path(record['file']).stem}-{k}.png"
                images[name] = plot_png(table, table["plot"])
                parts += [f"![{_cell(table.get('title') or record['title'])}]({name})", ""]
        if record.get("notes"):
            parts += [record["notes"], ""]
        parts += _provenance(record) + [""]
    return "\n".join(parts), images


def render_all(data_dir=DATA):
    """{file name under results/: Markdown str or PNG bytes} for every page and its index."""
    records = load(data_dir)
    files = {}
    index = [
        "# Results",
        "",
        "Every number here is rendered from a JSON file under `docs/results/data/` "
        "(`docs/render_results.py`). Speed figures are ratios against peers measured in the same "
        "run; the machine was a 2-core CPU shared with other jobs unless a table says otherwise, "
        "so read ratios and their spread, not absolute times.",
        "",
    ]
    for slug in PAGES:
        mine = [r for r in records if r["page"] == slug]
        if not mine:
            continue
        page, images = render_page(slug, mine)
        files[f"{slug}.md"] = page
        files.update(images)
        index.append(f"- [{PAGES[slug][0]}]({slug}.md): " + "; ".join(r["title"] for r in mine))
    files["index.md"] = "\n".join(index) + "\n"
    return files


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--out", default="build/results")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in render_all(args.data).items():
        if isinstance(content, bytes):
            (out / name).write_bytes(content)
        else:
            (out / name).write_text(content, encoding="utf-8")
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
