"""The run's own log: everything the run prints (stdout and stderr) is also appended to
`<run dir>/run.log`, line by line, with the time, so a run dir says what happened without the terminal
that started it. Progress-bar redraws (carriage returns) stay on the terminal only."""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path


class _Tee:
    def __init__(self, stream, log, lock: threading.Lock):
        self._stream, self._log, self._lock = stream, log, lock
        self._partial = ""

    def write(self, text: str) -> int:
        n = self._stream.write(text)
        if "\r" not in text:
            with self._lock:
                self._partial += text
                *lines, self._partial = self._partial.split("\n")
                for line in lines:
                    self._log.write(f"{time.strftime('%H:%M:%S')} {line}\n")
                if lines:
                    self._log.flush()
        return n

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name):  # isatty, fileno, encoding ...: the terminal's
        return getattr(self._stream, name)


@contextmanager
def tee_output(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    with open(path, "a", encoding="utf-8", errors="replace") as log:
        out, err = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Tee(out, log, lock), _Tee(err, log, lock)
        try:
            yield
        finally:
            sys.stdout, sys.stderr = out, err
