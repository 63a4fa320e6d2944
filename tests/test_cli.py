"""Several command lines define flags in one process (as the tests do) without clashing."""

from absl import flags


def test_command_lines_share_one_process():
    import dataclasses

    from keras_bert import demo
    from keras_bert.pretraining import create_pretraining_data, run_pretraining
    from keras_bert.text import build_vocab

    build_vocab.define_flags()  # --vocab_size 30000
    create_pretraining_data._define_flags()  # --seed 12345
    run_pretraining.define_flags()  # --seed, --vocab_size, --model_dir of its own
    assert flags.FLAGS["vocab_size"].default is None
    demo.define_flags()  # --model_dir runs/demo
    assert flags.FLAGS["model_dir"].default == "runs/demo"
    run_pretraining.define_flags()  # Defining again takes its own defaults back.
    assert flags.FLAGS["model_dir"].default is None
    defaults = {f.name: f.default for f in dataclasses.fields(run_pretraining.PretrainingConfig)}
    assert flags.FLAGS["seed"].default == defaults["seed"]


def test_every_command_line_has_a_console_entry_point():
    """setup.cfg's console scripts resolve to each command line's `console_main` (installed or not)."""
    import configparser
    import importlib
    import os

    parser = configparser.ConfigParser()
    parser.read(os.path.join(os.path.dirname(__file__), "..", "setup.cfg"))
    scripts = dict(line.split(" = ") for line in parser["options.entry_points"]["console_scripts"].split("\n") if line)
    assert {"keras-bert-pretrain", "keras-bert-finetune", "keras-bert-export", "keras-bert-extract-features",
            "keras-bert-create-pretraining-data", "keras-bert-build-vocab", "keras-bert-demo"} <= set(scripts)
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target
