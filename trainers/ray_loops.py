"""The engine of `mode=async` and `mode=proxy`: the paper's four loops on Ray. Rollout workers, judges
and the trainer are Ray actors; the serving endpoints are processes they reach over HTTP; this
driver only schedules (no threads): none of the loops waits for another's round to end.

- Each rollout worker builds its part in its own process (`Roles.rollout`: its env pool, its HTTP
  policy) and produces a group of episodes per call, passing the gate (an actor) before each
  episode: the gate holds it while the trainer swaps the weights and tells it the policy version.
- Judges turn a finished group into samples, tagged with the version the group started on.
- The trainer gathers `batch_size` fresh samples (at most `max_staleness` versions behind), updates
  while rollouts go on, then closes the gate, publishes the weights to every server and opens it on
  the next version; the caller's `on_update` logs, and the trainer saves its checkpoint.

Rollouts run about one batch ahead of training: a worker gets a new group only while the samples
waiting, plus those the groups under way are expected to give, are fewer than `batch_size`.

Faults: an actor that dies (its node is lost, it is killed, Ray's memory monitor kills it) is
restarted by Ray, on any node with the resources it asks for. A rollout group or a judging it had in
flight is re-queued (the same group number, so no sample is trained twice and none is lost); a
trainer restarts from its last checkpoint and redoes the update under way. `max_restarts` bounds an
actor's deaths in a row (work it never finishes, such as a batch that never fits in memory), not
over the run: a run of days outlives a kill now and then. An exception raised by a role's own code
is the run's error: it stops every loop and is raised by `run`.
"""
from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import ray
from ray.exceptions import (
    ActorUnavailableError,
    GetTimeoutError,
    NodeDiedError,
    OutOfMemoryError,
    RayActorError,
    RayTaskError,
    WorkerCrashedError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from trainers.gate import GateActor, RemoteGate


@dataclass
class Versioned:
    """Work and the policy version it was sampled with (the oldest, for a group spanning a swap)."""
    version: int
    group_no: int
    item: Any


def within_staleness(pending: list[Versioned], version: int, max_staleness: int) -> tuple[list[Versioned], int]:
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
    restarts: dict = field(default_factory=dict)  # actors restarted since the last update, by role


@dataclass
class Roles:
    """How each actor builds its part, in its own process (picklable callables returning objects):
    rollout: `.produce(group_no, gate) -> (version, group)`; judge: `.judge(group_no, group) ->
    (samples, counts)` (counts: anything, passed to `run`'s `on_judged`); trainer: `.update(samples,
    version) -> stats`, `.publish()`, `.save(state: dict)`. Each may have `.close()`, called when the loops end."""
    rollout: Callable[[], Any]
    judge: Callable[[], Any]
    trainer: Callable[[], Any]


@dataclass
class Placement:
    """Where actors may run: custom resources a node declares (`ray start --resources='{"docker": 8}'`)."""
    rollout_resource: str | None = None  # e.g. docker or chromium: rollout workers go to nodes with it
    trainer_gpus: float | None = None  # None: one where the cluster has a GPU (Ray hides GPUs from actors without)
    max_restarts: int = 3  # per actor; past that the run fails


class RoleActor:
    """One part of the loops in its own process; made a Ray actor by `RayLoops`."""

    def __init__(self, build: Callable[[], Any]):
        self.role = build()

    def call(self, method: str, *args):
        return getattr(self.role, method)(*args)

    def close(self) -> None:
        close = getattr(self.role, "close", None)
        if close:
            close()


ACTOR_DIED = object()  # what `RayLoops._result` gives for a call whose actor died

# How a call fails when its actor's process is gone: Ray says RayActorError, or, for the call that
# was running, why the process went (memory monitor, a crash, its node)
ACTOR_GONE = (RayActorError, OutOfMemoryError, WorkerCrashedError, NodeDiedError)


def _cause(e: RayTaskError) -> BaseException:
    """The role's own exception (an instance of its class, with Ray's traceback in its message)."""
    try:
        return e.as_instanceof_cause()
    except Exception:  # noqa: BLE001  (an exception class Ray cannot subclass)
        return e


class RayLoops:
    """Run rollout workers and judges until the trainer has made `updates` updates (`run`)."""

    def __init__(self, roles: Roles, *, workers: int, batch_size: int, max_staleness: int, version: int = 0,
                 next_group: int = 0, judges: int = 1, placement: Placement | None = None,
                 report_every_s: float = 60.0, rollout_options: dict | None = None,
                 check_group: Callable[[int, Any], None] | None = None):
        if batch_size < 1 or workers < 1 or judges < 1 or max_staleness < 0:
            raise ValueError("async loops need batch_size >= 1, workers >= 1, judges >= 1 and max_staleness >= 0")
        self.roles, self.placement = roles, placement or Placement()
        self.workers, self.judges, self.batch_size, self.max_staleness = workers, judges, batch_size, max_staleness
        self.version = version
        self._next_group = self._first_group = next_group
        self.groups_started = next_group
        self.report_every_s = report_every_s  # while the trainer waits that long, say why (stderr)
        self.restarts = {"rollout": 0, "judge": 0, "trainer": 0}
        self._deaths: dict[str, int] = {}  # per actor: deaths counted so far
        self._in_a_row: dict[str, int] = {}  # per actor: deaths since its last finished call
        self._call_epoch: dict = {}  # ref -> its actor's death count when the call was made
        self.gate_actor = self.trainer = None
        self.rollout_options = rollout_options or {}  # more Ray actor options for rollout workers
        self.check_group = check_group  # sees each group as it is rolled out; what it raises ends the run
        self.held_s = 0.0  # rollout time held at the gate during weight swaps (summed over workers)
        self.rollout_actors: list = []
        self.judge_actors: list = []
        self._backlog = 0  # samples judged and not yet trained on or dropped
        self._under_way = 0  # groups taken and not yet judged
        self._groups_judged = self._samples_judged = 0  # the expected yield of a group

    # -- actors ---------------------------------------------------------------------------------
    def _actor(self, build, **options):
        # Ray restarts it whenever it dies; the budget is ours (`_restarted`), in deaths in a row
        cls = ray.remote(RoleActor).options(num_cpus=0, max_restarts=-1, max_task_retries=0, **options)
        return cls.remote(build)

    def _start(self) -> None:
        p = self.placement
        rollout = {"resources": {p.rollout_resource: 0.001}} if p.rollout_resource else {}
        # the gate holds state no restart could rebuild: on the driver's node, which the run dies with anyway
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.gate_actor = ray.remote(GateActor).options(num_cpus=0, scheduling_strategy=here).remote(self.version)
        self.gate = RemoteGate(self.gate_actor)
        self.rollout_actors = [self._actor(self.roles.rollout, scheduling_strategy="SPREAD", **rollout,
                                           **self.rollout_options)
                               for _ in range(self.workers)]
        self.judge_actors = [self._actor(self.roles.judge) for _ in range(self.judges)]
        gpus = p.trainer_gpus
        if gpus is None:
            gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
        self.trainer = self._actor(self.roles.trainer, num_gpus=gpus)

    def _stop(self, interrupted: bool, rolling: dict) -> None:
        """Stop at the gate; let each worker finish its episode (not after a Ctrl-C); close; kill."""
        if self.gate_actor is None:
            return
        ray.get(self.gate_actor.stop.remote())
        self.held_s = ray.get(self.gate_actor.state.remote())[3]
        if rolling and not interrupted:
            ray.wait(list(rolling), num_returns=len(rolling), timeout=600)
        everyone = [a for a in [*self.rollout_actors, *self.judge_actors, self.trainer] if a is not None]
        ray.wait([a.close.remote() for a in everyone], num_returns=len(everyone), timeout=30 if interrupted else 300)
        for a in [*everyone, self.gate_actor]:
            ray.kill(a)

    def _call(self, actor, method: str, *args):
        """`actor.call(method, *args)`, remembering which of the actor's lives it was made in."""
        ref = actor.call.remote(method, *args)
        self._call_epoch[ref] = self._deaths.get(actor._actor_id.hex(), 0)
        return ref

    def _restarted(self, role: str, actor, ref, e: BaseException) -> None:
        """Count an actor's death (its work is then redone). A call made before a death already
        counted fails with it and is not another death; past `max_restarts` deaths in a row (no call
        finished in between) the run stops."""
        if getattr(e, "actor_init_failed", False):  # its role could not be built: no restart will help
            raise RuntimeError(f"a {role} actor could not start: {str(e).strip().splitlines()[-1]}") from e
        key = actor._actor_id.hex()
        if self._call_epoch.pop(ref, 0) < self._deaths.get(key, 0):
            time.sleep(0.05)  # the same death, seen by another call of that life
            return
        self._deaths[key] = self._deaths.get(key, 0) + 1
        self._in_a_row[key] = self._in_a_row.get(key, 0) + 1
        self.restarts[role] += 1
        why = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        if self._in_a_row[key] > self.placement.max_restarts:
            raise RuntimeError(f"a {role} actor died {self._in_a_row[key]} times in a row on the same work, "
                               f"past ray.max_restarts={self.placement.max_restarts} (if it was killed for "
                               f"memory: lower mode.micro_batch_tokens or mode.minibatch_size); last: {why}") from e
        print(f"[ray] a {role} actor died ({why}); Ray restarts it and its work is redone",
              file=sys.stderr, flush=True)
        self._await_restart(role, actor)

    def _await_restart(self, role: str, actor, within_s: float = 600.0) -> None:
        """Wait for a dead actor's next life: a call made while it restarts fails without running,
        and must not count as another death."""
        deadline = time.monotonic() + within_s
        while True:
            try:
                ray.get(actor.__ray_ready__.remote(), timeout=30)
                return
            except (ActorUnavailableError, GetTimeoutError):
                pass
            except RayActorError as e:
                if getattr(e, "actor_init_failed", False):
                    raise RuntimeError(f"a {role} actor could not start again: "
                                       f"{str(e).strip().splitlines()[-1]}") from e
            if time.monotonic() > deadline:
                raise RuntimeError(f"a {role} actor did not come back within {within_s:.0f} s of dying "
                                   "(no node with the resources it needs?)")
            time.sleep(0.2)

    # -- scheduling -----------------------------------------------------------------------------
    def _take_group(self) -> int:
        n = self._next_group
        self._next_group += 1
        self.groups_started = self._next_group
        return n

    def _expected(self) -> float:
        groups = self._groups_judged
        return self._backlog + self._under_way * (self._samples_judged / groups if groups else 1.0)

    def _note_waiting(self, pending: int, waited_s: float) -> None:
        """A long wait for samples is either slow rollouts or groups that give none (e.g. no hints)."""
        print(f"[async] update {self.version + 1} has waited {waited_s:.0f} s: {pending}/{self.batch_size} "
              f"samples; {self._groups_judged} groups judged so far gave {self._samples_judged}",
              file=sys.stderr, flush=True)

    def _result(self, ref, role: str, actor):
        """A finished call's value, or `ACTOR_DIED` when its actor died (counted; Ray restarts it and the
        caller redoes the work). The role's own exception is the run's."""
        try:
            value = ray.get(ref)
        except RayTaskError as e:
            raise _cause(e) from None
        except ACTOR_GONE as e:
            self._restarted(role, actor, ref, e)
            return ACTOR_DIED
        self._call_epoch.pop(ref, None)
        self._in_a_row[actor._actor_id.hex()] = 0
        return value

    def _start_update(self, batch: list[Versioned]) -> dict:
        """The trainer's update of `batch` under way (rollouts go on): what the loop follows it by."""
        return {"ref": self._call(self.trainer, "update", [t.item for t in batch], self.version + 1),
                "stage": "update", "batch": batch, "t": time.monotonic()}

    def _advance(self, training: dict) -> tuple[dict, float, float] | None:
        """The next stage once the current one is done: after the update, close the gate and publish;
        after publishing, open it on the next version and return (stats, update_s, publish_s). A
        trainer that dies restarts from its checkpoint (the last update's) and redoes this update."""
        out = self._result(training["ref"], "trainer", self.trainer)
        if out is ACTOR_DIED:
            if training["stage"] == "publish":
                ray.get(self.gate_actor.resume.remote(self.version))
            training.update(self._start_update(training["batch"]))
            return None
        now = time.monotonic()
        if training["stage"] == "update":
            ray.get(self.gate_actor.pause.remote())
            training.update(ref=self._call(self.trainer, "publish"), stage="publish", stats=out,
                            update_s=now - training["t"], t=now)
            return None
        self.version += 1
        ray.get(self.gate_actor.resume.remote(self.version))
        return training["stats"], training["update_s"], now - training["t"]

    def save(self, state: dict) -> None:
        """The trainer's checkpoint with the run's `state` (call from `on_update`)."""
        # a trainer that dies here restarts from the previous checkpoint: the next update redoes this one
        self._result(self._call(self.trainer, "save", state), "trainer", self.trainer)

    def run(self, updates: int, on_update: Callable[[UpdateReport], None] | None = None,
            on_judged: Callable[[Versioned, Any], None] | None = None) -> list[UpdateReport]:
        """`on_judged(group, counts)` gets each judged group (its episodes) and what its judge counted."""
        rolling: dict = {}  # ref -> (actor, group number)
        interrupted = True
        try:
            self._start()
            reports = self._loop(updates, on_update, on_judged, rolling)
            interrupted = False
            return reports
        finally:
            self._stop(interrupted, rolling)

    def _loop(self, updates: int, on_update, on_judged, rolling: dict) -> list[UpdateReport]:
        reports: list[UpdateReport] = []
        judging: dict = {}  # ref -> (actor, Versioned group)
        idle_workers, idle_judges = list(self.rollout_actors), list(self.judge_actors)
        redo: deque[int] = deque()  # groups whose worker died: rolled out again first
        to_judge: deque[Versioned] = deque()
        pending: list[Versioned] = []  # one Versioned per sample
        dropped, wait_s, restarts_seen = 0, 0.0, dict(self.restarts)
        training = None  # the update under way: its stage (update, then publish) and batch
        received, all_below = set(), self._first_group  # the groups whose samples reached the trainer
        t0 = last_note = time.monotonic()
        while len(reports) < updates:
            while idle_workers and (redo or self._expected() < self.batch_size):
                if redo:
                    n = redo.popleft()  # still counted under way
                else:
                    n = self._take_group()
                    self._under_way += 1
                w = idle_workers.pop(0)
                rolling[self._call(w, "produce", n, self.gate)] = (w, n)
            while idle_judges and to_judge:
                j, t = idle_judges.pop(0), to_judge.popleft()
                judging[self._call(j, "judge", t.group_no, t.item)] = (j, t)
            if training is None and len(pending) >= self.batch_size:
                wait_s += time.monotonic() - t0
                batch, pending = pending[: self.batch_size], pending[self.batch_size:]
                self._backlog -= len(batch)
                training = self._start_update(batch)
            busy = [*rolling, *judging, *([training["ref"]] if training else [])]
            done, _ = ray.wait(busy, num_returns=1, timeout=0.05)
            if training and training["ref"] in done:
                finished = self._advance(training)
                if finished:
                    stats, update_s, publish_s = finished
                    batch, training = training["batch"], None
                    report = UpdateReport(self.version, len(batch), [self.version - 1 - t.version for t in batch],
                                          dropped, round(wait_s, 3), round(update_s, 3), round(publish_s, 3), stats,
                                          min([t.group_no for t in pending] + [all_below]),
                                          {k: v - restarts_seen[k] for k, v in self.restarts.items()
                                           if v > restarts_seen[k]})
                    restarts_seen = dict(self.restarts)
                    reports.append(report)
                    if on_update:
                        on_update(report)
                    pending, dropped = within_staleness(pending, self.version, self.max_staleness)
                    self._backlog -= dropped
                    wait_s, t0 = 0.0, time.monotonic()
            for ref in done:
                if ref in rolling:
                    w, n = rolling.pop(ref)
                    idle_workers.append(w)
                    out = self._result(ref, "rollout", w)
                    if out is ACTOR_DIED:
                        redo.append(n)
                    else:
                        if self.check_group:
                            self.check_group(n, out[1])
                        to_judge.append(Versioned(out[0], n, out[1]))
                elif ref in judging:
                    j, t = judging.pop(ref)
                    idle_judges.append(j)
                    out = self._result(ref, "judge", j)
                    if out is ACTOR_DIED:
                        to_judge.appendleft(t)
                        continue
                    samples, counts = out
                    if on_judged:
                        on_judged(t, counts)
                    self._under_way -= 1
                    self._groups_judged += 1
                    self._samples_judged += len(samples)
                    self._backlog += len(samples)
                    pending += [Versioned(t.version, t.group_no, s) for s in samples]
                    received.add(t.group_no)
                    while all_below in received:
                        received.remove(all_below)
                        all_below += 1
                    pending, n_dropped = within_staleness(pending, self.version, self.max_staleness)
                    dropped += n_dropped
                    self._backlog -= n_dropped
            if not done and time.monotonic() - last_note > self.report_every_s:
                last_note = time.monotonic()
                self._note_waiting(len(pending), last_note - t0)
        return reports
