"""A one-line progress bar that log lines do not break into.

The bar is drawn on standard output and redrawn in place (`\\r`); log records go to their
handlers' streams (absl's handler writes to standard error). In a terminal both land on the
same screen line, so a record logged while the bar is drawn used to continue the bar's line.
While a `ProgressBar` is open (from its first `update` until it reaches its target or is
closed), every handler of every logger passes its records through a filter that first
takes the bar off its line, lets the handler write the whole record, then redraws the bar:
in a terminal the log lines scroll above the bar; in a file or pipe, the bar's line ends
before the record and every line holds either the bar or a log record, never both. Python
warnings (`warnings.showwarning`) are shown the same way. What native code writes to the
standard error descriptor directly (TensorFlow's C++ logs) is outside Python's reach.

>>> bar = ProgressBar(100)             # doctest: +SKIP
>>> bar.update(50, [("loss", 0.71)])   # doctest: +SKIP
 50/100 [==========>.........] ETA ? - loss 0.71
"""

import logging
import numbers
import shutil
import sys
import threading
import time
import warnings
from collections.abc import Callable

# The open bar (at most one) and the lock ordering bar updates and log records.
_LOCK = threading.RLock()
_OPEN: list["ProgressBar"] = []
_SHOW_WARNING: list[Callable[..., None]] = []  # warnings.showwarning as it was before a bar opened.
_CLEAR_LINE = "\x1b[K"  # ANSI: erase from the cursor to the end of the line.


class ProgressBar:
    """Progress towards `target` on one line of `stream`.

    Args:
        target: int. The count at which the bar is complete (and ends its line).
        width: int. Characters of the bar itself.
        stream: a text stream, or None for `sys.stdout` at the time of each write.
    """

    def __init__(self, target, width=20, stream=None):
        self.target = int(target)
        self.width = int(width)
        self.stream = stream
        self._text = None  # The bar's current text; drawn on screen when self._drawn.
        self._drawn = False
        self._started = time.perf_counter()
        self._rate_from = None  # (time, count) at the first update, where the ETA's rate starts.

    @property
    def is_open(self):
        """True between the first update and the last (or `close`)."""
        return self in _OPEN

    def update(self, current, values=()):
        """Shows `current` of `target` with `values`, a sequence of (name, number); at the
        target the line ends and the bar closes."""
        current = int(current)
        with _LOCK:
            now = time.perf_counter()
            if self._rate_from is None:
                self._rate_from = (now, current)
            self._text = self._render(current, values, now)
            if not self.is_open:
                _open(self)
            self._draw()
            if current >= self.target:
                self.close()

    def close(self):
        """Ends the bar's line (if drawn) and stops redrawing it around log records."""
        with _LOCK:
            if self._drawn:
                self._write("\n")
                self._drawn = False
            if self in _OPEN:
                _OPEN.remove(self)
                _remove_filters()

    def _render(self, current, values, now):
        digits = len(str(self.target))
        done = min(max(current / self.target, 0.0), 1.0) if self.target > 0 else 1.0
        filled = int(self.width * done)
        bar = (
            "=" * filled
            + (">" if filled < self.width else "")
            + "." * max(self.width - filled - 1, 0)
        )
        start_time, start_count = self._rate_from
        if current >= self.target:
            timing = f"{now - self._started:.0f}s"
        elif current > start_count:
            timing = "ETA " + _duration(
                (now - start_time) / (current - start_count) * (self.target - current)
            )
        else:
            timing = "ETA ?"
        shown = "".join(f" - {name} {_number(value)}" for name, value in values)
        return f"{current:>{digits}}/{self.target} [{bar}] {timing}{shown}"

    def _interactive(self):
        stream = self.stream or sys.stdout
        return bool(getattr(stream, "isatty", lambda: False)())

    def _write(self, text):
        stream = self.stream or sys.stdout
        stream.write(text)
        stream.flush()

    def _draw(self):
        if (
            self._interactive()
        ):  # Cut to the terminal's width: a wrapped line could not be redrawn in place.
            self._write("\r" + self._text[: shutil.get_terminal_size().columns - 1] + _CLEAR_LINE)
        else:
            self._write("\r" + self._text)
        self._drawn = True

    def _lift(self):
        """Takes the bar off its line before a log record: erased in a terminal, else its line
        ends."""
        if self._drawn:
            self._write("\r" + _CLEAR_LINE if self._interactive() else "\n")
            self._drawn = False

    def _restore(self):
        """Redraws the bar below a log record (in a terminal; a file gets it at the next update)."""
        if self._text is not None and self._interactive():
            self._draw()


def _duration(seconds):
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds}s"


def _number(value):
    return (
        f"{value:.4g}"
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
        else str(value)
    )


class _AboveTheBar(logging.Filter):
    """A handler filter: the handler writes each record with the open bar lifted off its line."""

    def __init__(self, handler):
        super().__init__()
        self.handler = handler
        self._inside = threading.local()

    def filter(self, record):
        if getattr(self._inside, "value", False):
            return True  # The record handled below: let it through.
        with _LOCK:
            bar = _OPEN[-1] if _OPEN else None
            if bar is None:
                return True
            self._inside.value = True
            try:
                bar._lift()
                self.handler.handle(record)  # Runs the filters again (this one passes) and emits.
                bar._restore()
            finally:
                self._inside.value = False
        return False  # Already written.


def _handlers():
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    return [handler for logger in loggers for handler in logger.handlers]


def _show_warning_above_the_bar(message, category, filename, lineno, file=None, line=None):
    with _LOCK:
        bar = _OPEN[-1] if _OPEN else None
        if bar is not None:
            bar._lift()
        _SHOW_WARNING[0](message, category, filename, lineno, file, line)
        if bar is not None:
            bar._restore()


def _open(bar):
    for other in list(_OPEN):
        other.close()
    _OPEN.append(bar)
    for handler in _handlers():
        if not any(isinstance(f, _AboveTheBar) for f in handler.filters):
            handler.addFilter(_AboveTheBar(handler))
    if warnings.showwarning is not _show_warning_above_the_bar:
        _SHOW_WARNING[:] = [warnings.showwarning]
        warnings.showwarning = _show_warning_above_the_bar


def _remove_filters():
    for handler in _handlers():
        for f in [f for f in handler.filters if isinstance(f, _AboveTheBar)]:
            handler.removeFilter(f)
    if warnings.showwarning is _show_warning_above_the_bar:  # Unless someone replaced it since.
        warnings.showwarning = _SHOW_WARNING[0]
