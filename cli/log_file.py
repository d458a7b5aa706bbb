"""The log file handler: rotates, and survives a full disk without flooding the terminal.

The standard handler answers a failed write by printing "--- Logging error ---" and a
traceback to stderr for every record; on a full disk that is every line the app logs, in
the terminal of the person who ran it. Here a write that fails for the file system (full,
read-only, removed) is said once, in one line; the records are still shown on the terminal
by the console handler at its own level, and the file is written again as soon as it can be.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys


class LogFileHandler(logging.handlers.RotatingFileHandler):
    def __init__(self, filename: str, max_bytes: int, backup_count: int) -> None:
        super().__init__(filename, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8")
        self._told = False  # the terminal was told the file cannot be written (and not since that it can)
        self._failed = False  # the record being written failed

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)  # a failure comes back through handleError
        if self._told and not self._failed:
            self._told = False
            sys.stderr.write(f"inglenook: writing the log file {self.baseFilename} again\n")

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 — logging's own name
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
            return
        self._failed = True
        if not self._told:
            self._told = True
            reason = error.strerror or str(error)
            sys.stderr.write(f"inglenook: cannot write the log file {self.baseFilename} ({reason}); "
                             "until it can be written, only warnings and errors show, here\n")
        # The failed write may have left part of a line in the buffer: drop the stream so the
        # next record opens the file afresh rather than flushing the fragment first.
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
