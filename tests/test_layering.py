"""The package's import graph: no cycles, no layer importing a higher one, and every checkpoint
format read or written only under keras_bert/checkpoints/.

Every module of keras_bert/, tasks/ (installed as keras_bert.tasks), export/ (keras_bert.export)
and apps/ (keras_bert.apps) is parsed, function-local imports included
(`keras_bert.apps.source_graph`). The layers, lowest first:

0. base: the package root (its names load lazily, by strings), _lazy, _saving, _deprecated
   (renamed modules' old names), errors, paths, io_utils, inputs (the encoder's input names),
   backend, extras, cli (flag helpers)
1. layers; and two leaves the checkpoint formats read: text.vocab (the vocabulary file) and
   models.lora (Keras' LoRA in an encoder's dense layers: the adapters format)
2. config, presets (the table of released checkpoints)
3. checkpoints: the formats (Google, Hugging Face, pre-training runs, fine-tuned task model
   directories, adapters) read files into a config, named arrays and a vocabulary, and are
   handed the classes to build; the preset loader behind every `from_preset` (`cls` passed
   down). They import no model.
4. text (tokenizer, preprocessor, packing, raw text as tf.data for the task models)
5. training.optimizers (with training.choices, their names): the paper's optimizers and
   schedule, which the task models compile with
6. models
7. rewrites (the deployment rewrites: integer, channel-group and fake-quantized copies of the
   encoder, which export/ and quantization-aware fine-tuning build)
8. training (strategies, distribution, callbacks, settings: no model or checkpoint code)
9. the checkpoints that build our models (init_checkpoint: load_encoder, load_pretrainer,
   load_init_checkpoint) or hold training state (checkpoints.training)
10. training.run_skeleton (the run skeleton both runners share: it compiles and restores through
    checkpoints)
11. pretraining
12. tasks
13. export (of tasks/, only the task registry: the rewrites it needs are below it)
14. apps (the demo): installed as keras_bert.apps from apps/; nothing below imports it
15. testing (support shared by the tests and the benchmarks: nothing else imports it)
A module may import its own layer (without a cycle) and any lower one; there is no exception. A
package's `__init__` imports, at its top level, nothing above its lowest module: importing any
module of the package runs it.
"""

import ast
import collections
import os

import pytest

from keras_bert.apps import source_graph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = {
    "keras_bert": "keras_bert",
    "tasks": "keras_bert.tasks",
    "export": "keras_bert.export",
    "apps": "keras_bert.apps",
}
LAYERS = (
    (
        "keras_bert",
        "keras_bert._lazy",
        "keras_bert._saving",
        "keras_bert._deprecated",
        "keras_bert.errors",
        "keras_bert.paths",
        "keras_bert.io_utils",
        "keras_bert.inputs",
        "keras_bert.backend",
        "keras_bert.extras",
        "keras_bert.cli",
    ),
    ("keras_bert.layers", "keras_bert.text.vocab", "keras_bert.models.lora"),
    ("keras_bert.config", "keras_bert.presets"),
    ("keras_bert.checkpoints",),
    ("keras_bert.text",),
    ("keras_bert.training.optimizers", "keras_bert.training.choices"),
    ("keras_bert.models",),
    ("keras_bert.rewrites",),
    ("keras_bert.training",),
    ("keras_bert.checkpoints.init_checkpoint", "keras_bert.checkpoints.training"),
    ("keras_bert.training.run_skeleton",),
    ("keras_bert.pretraining",),
    ("keras_bert.tasks",),
    ("keras_bert.export",),
    ("keras_bert.apps",),
    ("keras_bert.testing",),
)
CHECKPOINTS = "keras_bert.checkpoints"
# Attribute chains (their last parts) that read or write a checkpoint format.
CHECKPOINT_CALLS = (
    "train.Checkpoint",
    "train.CheckpointManager",
    "train.load_checkpoint",
    "train.list_variables",
    "train.latest_checkpoint",
    "raw_ops.SaveV2",
    "saving.load_model",
    "models.load_model",
    "saving.save_model",
)
CHECKPOINT_MODULES = ("safetensors", "torch")
# Keras models saved or loaded by method: `model.save(...)`, `x.save_weights(...)`,
# `x.load_weights(...)`.
MODEL_NAMES = ("model", "encoder", "pretrainer", "trainer")


MODULES = source_graph.parse_modules(ROOT, SOURCES)


def _imports(module):
    """The package's modules that `module` imports anywhere in its file."""
    return source_graph.imports(module, MODULES)


def _module_level_imports(module):
    """The package's modules imported at the top level of `module` (outside functions)."""
    return source_graph.module_level_imports(module, MODULES)


GRAPH = {module: _imports(module) for module in MODULES}


def _layer(module):
    best = max(
        (
            (len(prefix), index)
            for index, prefixes in enumerate(LAYERS)
            for prefix in prefixes
            if module == prefix or module.startswith(prefix + ".")
        ),
        default=None,
    )
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}.")
    return best[1]


def _cycles():
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return components


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _checkpoint_uses(module):
    """(line, what) for every checkpoint-format read or write in the module."""
    path, tree = MODULES[module]
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if any(dotted == c or dotted.endswith("." + c) for c in CHECKPOINT_CALLS):
                uses.append((node.lineno, dotted))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if node.func.attr in ("save_weights", "load_weights") or (
                node.func.attr == "save"
                and isinstance(receiver, ast.Name)
                and receiver.id in MODEL_NAMES
            ):
                uses.append((node.lineno, _dotted(node.func)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            uses.extend((node.lineno, n) for n in names if n.split(".")[0] in CHECKPOINT_MODULES)
    return sorted(set(uses))


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_import_cycle():
    assert _cycles() == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_higher_layer(module):
    higher = sorted(m for m in GRAPH[module] if _layer(m) > _layer(module))
    assert not higher, f"{module} (layer {_layer(module)}) imports higher layers: {higher}"


def test_nothing_below_the_applications_imports_them():
    """keras_bert/, tasks/ and export/ never import apps/, function-local imports included, with no
    exemption."""
    apps, testing = "keras_bert.apps", "keras_bert.testing"  # testing sits above apps.
    assert (apps,) in LAYERS and LAYERS.index((apps,)) < LAYERS.index((testing,))
    below = [
        m for m in MODULES if not any(m == p or m.startswith(p + ".") for p in (apps, testing))
    ]
    importers = sorted(
        m for m in below if any(t == apps or t.startswith(apps + ".") for t in _imports(m))
    )
    assert importers == [], f"modules below {apps} import it: {importers}"
    assert "keras_bert.apps.demo.__main__" in MODULES  # The walk saw the applications.


EXPORT = "keras_bert.export"
TASKS = "keras_bert.tasks"
# What export/ may take from tasks/: the registry (a task's facts by its name).
EXPORT_TASK_IMPORTS = {"keras_bert.tasks.registry"}


def _within(module, package):
    return module == package or module.startswith(package + ".")


def test_export_imports_no_task_module_but_the_registry():
    found = {
        (module, target)
        for module in MODULES
        if _within(module, EXPORT)
        for target in _imports(module)
        if _within(target, TASKS) and target not in EXPORT_TASK_IMPORTS
    }
    assert found == set(), "export/ imports task modules: build on keras_bert.rewrites (or below)"


def test_checkpoint_formats_are_read_and_written_only_in_checkpoints():
    outside = {
        MODULES[m][0]: _checkpoint_uses(m)
        for m in MODULES
        if not (m == CHECKPOINTS or m.startswith(CHECKPOINTS + "."))
    }
    outside = {os.path.relpath(path, ROOT): uses for path, uses in outside.items() if uses}
    assert outside == {}, "checkpoint formats handled outside keras_bert/checkpoints/"


def _packages():
    return sorted(m for m in MODULES if MODULES[m][0].endswith("__init__.py"))


@pytest.mark.parametrize("package", _packages())
def test_package_inits_import_nothing_above_their_lowest_module(package):
    """Importing a module runs its package's `__init__` first: its top-level imports stay within
    the lowest layer of the package's modules (higher names load lazily, by strings)."""
    lowest = min(_layer(m) for m in MODULES if m.startswith(package + "."))
    above = sorted(m for m in _module_level_imports(package) if m and _layer(m) > lowest)
    assert not above, (
        f"{package}/__init__.py imports {above} above its lowest module (layer {lowest})"
    )


def test_the_layering_check_sees_imports():
    """The graph is not empty by mistake: known edges are found, function-local ones included;
    the core's `from_preset` reaches the preset loader, which is below it."""
    assert "keras_bert.models.encoder" in GRAPH["keras_bert.models.pretrainer"]
    assert "keras_bert.checkpoints.from_preset" in GRAPH["keras_bert.models.encoder"]
    assert "keras_bert.checkpoints.from_preset" in GRAPH["keras_bert.text.tokenizer"]
    # export/ and quantization-aware fine-tuning build the same rewrites.
    assert "keras_bert.rewrites.channel_groups" in GRAPH["keras_bert.export.tflite"]
    assert "keras_bert.rewrites.encoder" in GRAPH["keras_bert.tasks.quantization_aware"]
    assert collections.Counter(_layer(m) for m in MODULES)[len(LAYERS) - 1] >= 1


CORE = ("keras_bert.layers", "keras_bert.models")
# Backend-specific libraries: the core imports none of them (keras_bert.backend does, by backend).
BACKEND_MODULES = ("tensorflow", "tf_keras", "jax", "torch")
# Names of the deployment rewrites (keras_bert/rewrites/) and of the switches they once were.
DEPLOYMENT_NAMES = (
    "fake_quant",
    "channel_groups",
    "integer_friendly",
    "quantization_aware",
    "XlaContext",
)


def _core_modules():
    return sorted(m for m in MODULES if any(m == c or m.startswith(c + ".") for c in CORE))


@pytest.mark.parametrize("module", _core_modules())
def test_core_imports_no_backend_and_has_no_deployment_mode(module):
    """Layers and models are keras.ops only: no TensorFlow (or other backend) import, and nothing of
    the export- and training-time rewrites, which build their own copies of the model."""
    path, tree = MODULES[module]
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            imported.add((node.module or "").split(".")[0])
    assert not imported & set(BACKEND_MODULES), (
        f"{module} imports {imported & set(BACKEND_MODULES)}"
    )
    with open(path, encoding="utf-8") as f:
        source = f.read()
    found = [name for name in DEPLOYMENT_NAMES if name in source]
    assert not found, f"{module} mentions deployment rewrites: {found}"


def test_the_core_check_sees_the_core():
    assert "keras_bert.layers.transformer" in _core_modules()
    assert "keras_bert.models.encoder" in _core_modules()


DEVELOPMENT = os.path.join(ROOT, "docs", "development.md")


def test_the_picture_in_development_md_is_these_layers():
    """docs/development.md draws the layers this test enforces: its picture (between the
    `layers:begin` / `layers:end` markers, highest layer first) names each layer's modules in
    this order."""
    with open(DEVELOPMENT, encoding="utf-8") as f:
        text = f.read()
    picture = text.split("<!-- layers:begin -->")[1].split("<!-- layers:end -->")[0]
    drawn = []
    for line in picture.splitlines():
        if "|" not in line:
            continue
        names = line.split("|")[1]
        drawn.append(tuple(n.strip() for n in names.split(",") if n.strip()))
    want = [tuple(m.removeprefix("keras_bert.") or "keras_bert" for m in layer) for layer in LAYERS]
    assert drawn[::-1] == want, "docs/development.md's picture of the layers differs from LAYERS"
