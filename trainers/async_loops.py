"""The plumbing of `mode=async`: environments, judge and trainer as independent workers joined by
queues, beside the serving endpoint (its own process). None of them waits for another's round to end:
rollout workers keep sampling while the judge scores and the trainer updates (the paper's four loops).

- Rollout workers (`workers` threads) each take the next group number and produce a group of
  episodes. Before every episode they pass the `Gate`, which holds them while the trainer swaps the
  weights (the paper's proxy answers 503 then) and tells them the policy version they sample from.
- The judges (`judges` threads, one by default) turn each finished group into samples, tagged with
  the version the group started on. With several, groups may reach the trainer out of order; each
  update's `open_from` still names the first group not yet trained on.
- The trainer (the caller's thread, `run`) gathers samples until a batch is full, drops those more
  than `max_staleness` versions behind and trains on them while rollouts go on; only the swap of
  the served weights (`publish`) closes the gate, which then opens on the next version.

Rollouts run about one batch ahead of training: a worker starts a new group only while the samples
waiting to be trained on, plus those the groups under way are expected to give (the mean so far),
are fewer than `batch_size`. So a batch leaves few samples behind, and those are still fresh at the
next update instead of piling up to be dropped. An error in any worker
stops all of them and is raised by `run`; a stop lets each worker finish its current episode only.
"""
from __future__ import annotations

import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable


class Stopped(Exception):
    """Raised in a worker at its next episode once the loops are stopping."""


class Gate:
    """The policy version rollouts sample from, and the pause around a weight swap."""

    def __init__(self, version: int):
        self.version = version
        self._open = threading.Event()
        self._open.set()
        self._stopping = threading.Event()
        self.waited_s = 0.0  # rollout time spent held at the gate (summed over workers)
        self._lock = threading.Lock()

    def wait_open(self) -> int:
        """The current version, once no swap is under way; `Stopped` once the loops are stopping."""
        t0 = time.monotonic()
        while not self._open.wait(0.05):
            if self._stopping.is_set():
                raise Stopped
        if self._stopping.is_set():
            raise Stopped
        waited = time.monotonic() - t0
        if waited > 0.001:
            with self._lock:
                self.waited_s += waited
        return self.version

    def pause(self) -> None:
        self._open.clear()

    def resume(self, version: int) -> None:
        self.version = version
        self._open.set()

    def stop(self) -> None:
        self._stopping.set()
        self._open.set()

    @property
    def is_open(self) -> bool:
        """False while the served weights are being swapped (the proxy answers 503 then)."""
        return self._open.is_set() and not self._stopping.is_set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()


@dataclass
class Tagged:
    """Work and the policy version it was sampled with (the oldest, for a group spanning a swap)."""
    version: int
    group_no: int
    item: Any


def fresh(pending: list[Tagged], version: int, max_staleness: int) -> tuple[list[Tagged], int]:
    """The samples at most `max_staleness` versions behind `version`, and how many were dropped."""
    kept = [t for t in pending if version - t.version <= max_staleness]
    return kept, len(pending) - len(kept)


@dataclass
class UpdateReport:
    """What one trainer step saw: for the run's log."""
    version: int  # the version the update produced
    samples: int
    staleness: list[int]  # per sample: versions behind at update time
    dropped_stale: int
    wait_s: float  # trainer time waiting for samples before this update
    update_s: float  # the PPO update (rollouts running)
    publish_s: float  # the weight swap (rollouts held)
    stats: dict = field(default_factory=dict)
    open_from: int = 0  # every group before this one is trained on or dropped: a resume starts here


class AsyncLoops:
    """Run rollout workers and a judge thread until the trainer has made `updates` updates.

    `produce(group_no, gate)` runs a group's episodes, calling `gate.wait_open()` before each, and
    returns `(version, group)`; `judge(group_no, group)` returns the group's samples (may be none);
    `update(samples)` trains on a batch and returns stats; `publish()` swaps the served weights."""

    def __init__(self, *, produce: Callable[[int, Gate], tuple[int, Any]], judge: Callable[[int, Any], list],
                 update: Callable[[list], dict], publish: Callable[[], None], workers: int, batch_size: int,
                 max_staleness: int, version: int = 0, next_group: int = 0, queue_groups: int | None = None,
                 report_every_s: float = 60.0, judges: int = 1):
        if batch_size < 1 or workers < 1 or judges < 1 or max_staleness < 0:
            raise ValueError("async loops need batch_size >= 1, workers >= 1, judges >= 1 and max_staleness >= 0")
        self.produce, self.judge, self.update, self.publish = produce, judge, update, publish
        self.workers, self.batch_size, self.max_staleness = workers, batch_size, max_staleness
        self.judges = judges
        self.gate = Gate(version)
        self._next_group = self._first_group = next_group
        self._group_lock = threading.Lock()
        bound = queue_groups or 2 * workers
        self._groups: queue.Queue[Tagged] = queue.Queue(maxsize=bound)
        self._samples: queue.Queue[Tagged] = queue.Queue(maxsize=bound)
        self._backlog = 0  # samples judged and not yet trained on or dropped
        self._under_way = 0  # groups taken and not yet judged
        self._groups_judged = 0  # with the samples they gave: the expected yield of a group
        self._samples_judged = 0
        self._room = threading.Condition()
        self._errors: list[BaseException] = []
        self.groups_started = next_group
        self.report_every_s = report_every_s  # while the trainer waits that long, say why (stderr)

    # -- workers --------------------------------------------------------------------------------
    def _take_group(self) -> int:
        with self._group_lock:
            n = self._next_group
            self._next_group += 1
            self.groups_started = self._next_group
            return n

    def _put(self, q: queue.Queue, item: Tagged) -> None:
        while True:  # bounded: wait for room, but notice a stop
            if self.gate.stopping:
                raise Stopped
            try:
                q.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def _expected(self) -> float:
        groups = self._groups_judged
        return self._backlog + self._under_way * (self._samples_judged / groups if groups else 1.0)

    def _wait_for_room(self) -> None:
        """Hold a worker while enough samples are waiting or on their way; then count its group in."""
        with self._room:
            while self._expected() >= self.batch_size:
                if self.gate.stopping:
                    raise Stopped
                self._room.wait(0.05)
            self._under_way += 1

    def _settle(self, n: int, judged_group: bool = False) -> None:
        """`n` samples judged (with `judged_group`), or trained on or dropped (n < 0)."""
        with self._room:
            self._backlog += n
            if judged_group:
                self._under_way -= 1
                self._groups_judged += 1
                self._samples_judged += n
            self._room.notify_all()

    def _rollout_worker(self) -> None:
        try:
            while not self.gate.stopping:
                self._wait_for_room()
                n = self._take_group()
                version, group = self.produce(n, self.gate)
                self._put(self._groups, Tagged(version, n, group))
        except Stopped:
            pass
        except BaseException as e:  # noqa: BLE001  (surfaced by run)
            self._fail(e)

    def _judge_worker(self) -> None:
        try:
            while not self.gate.stopping:
                try:
                    t = self._groups.get(timeout=0.05)
                except queue.Empty:
                    continue
                samples = self.judge(t.group_no, t.item)
                self._settle(len(samples), judged_group=True)
                self._put(self._samples, Tagged(t.version, t.group_no, samples))
        except Stopped:
            pass
        except BaseException as e:  # noqa: BLE001
            self._fail(e)

    def _fail(self, e: BaseException) -> None:
        if not self.gate.stopping:
            self._errors.append(e)
            self.gate.stop()

    # -- the trainer ----------------------------------------------------------------------------
    def _note_waiting(self, pending: int, waited_s: float) -> None:
        """A long wait for samples is either slow rollouts or groups that give none (e.g. no hints)."""
        with self._room:
            groups, samples = self._groups_judged, self._samples_judged
        print(f"[async] update {self.gate.version + 1} has waited {waited_s:.0f} s: {pending}/{self.batch_size} "
              f"samples; {groups} groups judged so far gave {samples}", file=sys.stderr, flush=True)

    def run(self, updates: int, on_update: Callable[[UpdateReport], None] | None = None) -> list[UpdateReport]:
        threads = [threading.Thread(target=self._rollout_worker, name=f"rollout-{i}", daemon=True)
                   for i in range(self.workers)]
        threads += [threading.Thread(target=self._judge_worker, name=f"judge-{i}", daemon=True)
                    for i in range(self.judges)]
        for th in threads:
            th.start()
        reports: list[UpdateReport] = []
        pending: list[Tagged] = []  # one Tagged per sample
        dropped, wait_s = 0, 0.0
        received, all_below = set(), self._first_group  # the groups whose samples reached the trainer
        try:
            while len(reports) < updates:
                t0 = last_note = time.monotonic()
                while len(pending) < self.batch_size:
                    if self._errors:
                        raise self._errors[0]
                    try:
                        t = self._samples.get(timeout=0.05)
                    except queue.Empty:
                        if time.monotonic() - last_note > self.report_every_s:
                            last_note = time.monotonic()
                            self._note_waiting(len(pending), last_note - t0)
                        continue
                    pending += [Tagged(t.version, t.group_no, s) for s in t.item]
                    received.add(t.group_no)
                    while all_below in received:
                        received.remove(all_below)
                        all_below += 1
                    pending, n = fresh(pending, self.gate.version, self.max_staleness)
                    dropped += n
                    self._settle(-n)
                wait_s += time.monotonic() - t0
                batch, pending = pending[: self.batch_size], pending[self.batch_size:]
                self._settle(-len(batch))
                version = self.gate.version
                t1 = time.monotonic()
                stats = self.update([t.item for t in batch])  # rollouts go on meanwhile
                t2 = time.monotonic()
                self.gate.pause()
                try:
                    self.publish()
                finally:
                    self.gate.resume(version + 1)
                report = UpdateReport(version + 1, len(batch), [version - t.version for t in batch], dropped,
                                      round(wait_s, 3),
                                      round(t2 - t1, 3), round(time.monotonic() - t2, 3), stats,
                                      min([t.group_no for t in pending] + [all_below]))
                reports.append(report)
                if on_update:
                    on_update(report)
                pending, n = fresh(pending, self.gate.version, self.max_staleness)
                self._settle(-n)
                dropped, wait_s = n, 0.0
        except BaseException:
            interrupted = True  # Ctrl-C / SIGTERM or a failed update: do not wait out long episodes
            raise
        else:
            interrupted = False
        finally:
            self.gate.stop()
            for th in threads:  # each finishes its current episode; the caller then closes the envs
                th.join(timeout=5.0 if interrupted else None)
        if self._errors:
            raise self._errors[0]
        return reports
