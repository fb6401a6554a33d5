"""CPU seconds of this process and its finished children (the model servers it started and waited
for): what a run cost, independent of how loaded the machine was. A resumed run counts only its
last leg; Docker containers run under the daemon and are not included."""
from __future__ import annotations

import resource


def cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
