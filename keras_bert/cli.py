"""Shared pieces of the absl command lines: flag definition, help, and errors in one line.

A command line module defines its flags and prints --help without importing TensorFlow or
Keras; its `main` imports the library. Mistakes a user can fix (a wrong path, a bad setting, a
vocabulary that does not fit the checkpoint, a batch too large for the device) are reported as
one line, `<prog>: error: <message>`, with exit status 2; anything else keeps its traceback
(which `--verbosity=1` also shows for the one-line errors).
"""

import contextlib
import os
import sys
import tempfile

from absl import flags

from keras_bert.errors import MissingExtraError

_HELP = {
    "-h": True,
    "-?": True,
    "-help": True,
    "--help": True,
    "--helpshort": True,
    "-helpfull": False,
    "--helpfull": False,
}  # Argument -> short help (main flags only)?
_DEFINED: list[str] = []  # The flags defined by the running command line (their help is --help's).
# Errors about a path: the message names it (always one line).
_PATH_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError)
# An optional dependency to install (the message says how).
_INSTALL_ERRORS = (MissingExtraError,)
# Errors raised by keras_bert's own checks (one line when raised in keras_bert code).
_CHECK_ERRORS = (ValueError, MemoryError)
# What TensorFlow's CUDA platform logs (as an error) on every start on a machine without an NVIDIA
# driver; nothing is wrong there, so the command lines drop it (see `start_tensorflow`).
NO_DRIVER_LINE = b"failed call to cuInit"


class UsageError(Exception):
    """A mistake in what was given to a command line, reported as one line (see the module)."""


def define(define_fn, name, *args, **kwargs):
    """Defines an absl flag with `define_fn` (e.g. `flags.DEFINE_integer`), replacing a flag
    of the same name that another command line defined in this process.

    Each command line module defines its own flags; when several run in one process
    (tests do), the last one defined wins instead of raising DuplicateFlagError.
    """
    if name in flags.FLAGS:
        delattr(flags.FLAGS, name)
    _DEFINED.append(name)
    return define_fn(name, *args, **kwargs)


def use_module_help(doc):
    """Shows `doc` (the command line module's docstring: what it does, with an example) on
    --help also when it runs as a console script, whose __main__ has no docstring of its own."""
    main = sys.modules.get("__main__")
    if main is not None and not main.__doc__:
        main.__doc__ = doc


def prog():
    """The command's name for messages: the console script, or the module run with -m."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return spec.name.removesuffix(".__main__")
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "keras_bert"


def run_command(doc, define_flags, required, main):
    """Runs a command line: its help text `doc` (see `use_module_help`), its flags, the flags it
    requires (marked here only: validators stay on the global flags, where other command lines
    run in the same process, as in tests, would trip over them) and `main` under absl.

    `--help` (also -h, --helpfull) prints the help and exits with status 0. TensorFlow's C++
    info lines are off unless TF_CPP_MIN_LOG_LEVEL is set, and its cuInit line on machines
    without a GPU driver is dropped (`start_tensorflow`). The Keras backend is TensorFlow unless
    KERAS_BACKEND says otherwise (`KERAS_BACKEND=jax keras-bert-finetune ...`).
    """
    from absl import app

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    use_module_help(doc)
    del _DEFINED[:]
    define_flags()
    for name in _DEFINED:  # --help lists them (absl lists the flags of the main module's file).
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS[name])
    flags.mark_flags_as_required(required)
    app.run(_reporting_errors(main), flags_parser=_parse_flags)


def has_nvidia_driver():
    """True if an NVIDIA driver is loaded or its library (libcuda) can be found."""
    import ctypes.util

    return (
        os.path.exists("/proc/driver/nvidia/version")
        or ctypes.util.find_library("cuda") is not None
    )


@contextlib.contextmanager
def stderr_descriptor_to(file):
    """Points file descriptor 2 at `file` (an open binary file) inside the block: what C++ code
    writes there too (TF_CPP_MIN_LOG_LEVEL does not silence every native line)."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(file.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def dropping_stderr_lines(marker):
    """Captures what is written to file descriptor 2 (C++ logs included) inside the block, then
    writes it back to stderr without the lines that contain `marker` (bytes)."""
    with tempfile.TemporaryFile() as captured:
        try:
            with stderr_descriptor_to(captured):
                yield
        finally:
            captured.seek(0)
            kept = b"".join(line for line in captured if marker not in line)
            if kept:
                os.write(2, kept)


def start_tensorflow():
    """Imports TensorFlow and lists its devices. On a machine without an NVIDIA driver the CUDA
    platform's `failed call to cuInit` error line (logged by the C++ runtime whatever the log
    level, though nothing is wrong; under absl's `app.run` already while TensorFlow is imported)
    is dropped; everything else printed meanwhile, and every later error, still shows."""
    if has_nvidia_driver():
        import tensorflow as tf

        tf.config.list_physical_devices()
        return
    with dropping_stderr_lines(NO_DRIVER_LINE):
        import tensorflow as tf

        tf.config.list_physical_devices()


def _parse_flags(argv):
    """absl's parsing, but --help exits with status 0 (absl's with 1) and a flag error is one
    line with status 2, as the other usage errors."""
    from absl import app

    arguments = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
    for argument in arguments:
        if argument in _HELP:
            app.usage(shorthelp=_HELP[argument], writeto_stdout=True)
            try:
                if _HELP[argument]:
                    print("\nTry --helpfull to get a list of all flags.", flush=True)
            except BrokenPipeError:  # E.g. `--help | head`.
                pass
            sys.exit(0)
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        sys.stderr.write(f"{prog()}: error: {one_line(error)} (--help lists the flags)\n")
        sys.exit(2)


def _reporting_errors(main):
    def run(argv):
        try:
            start_tensorflow()
            return main(argv)
        except Exception as error:  # noqa: BLE001 (re-raised unless the user can fix it)
            if not is_user_error(error):
                raise
            from absl import logging

            logging.vlog(1, "The error's traceback:", exc_info=True)
            sys.stderr.write(f"{prog()}: error: {one_line(error)}\n")
            sys.exit(2)

    return run


def is_user_error(error):
    """True for errors reported in one line: `UsageError`, errors about a path, and
    ValueError / MemoryError raised by keras_bert's own checks (not by a library it calls)."""
    if isinstance(error, (UsageError,) + _PATH_ERRORS + _INSTALL_ERRORS):
        return True
    return isinstance(error, _CHECK_ERRORS) and bool(str(error)) and _raised_in_keras_bert(error)


def one_line(error):
    """The error's message on one line."""
    return " ".join(str(error).split())


def _raised_in_keras_bert(error):
    traceback = error.__traceback__
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    module = traceback.tb_frame.f_globals.get("__spec__")
    name = module.name if module is not None else traceback.tb_frame.f_globals.get("__name__", "")
    return name == "keras_bert" or name.startswith("keras_bert.")
