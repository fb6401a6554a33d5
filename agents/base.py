"""Who acts: the `Agent` and `Policy` protocols, and the scripted baselines (oracle, noop)."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from nextstate.types import Generation, Task


@runtime_checkable
class Policy(Protocol):
    """A language model behind any backend: samples replies with their token ids and logprobs, and
    scores a given response under a given prompt (what the judge's teacher needs)."""

    name: str

    def generate(self, conversations: list[list[dict[str, str]]], *, tools=None) -> list[Generation]: ...

    def score(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]: ...


class Agent(Protocol):
    """Acts in one episode at a time. `begin` tells it the task (scripted agents need it)."""

    name: str

    def begin(self, task: Task, reference_actions: list[str]) -> None: ...

    def act(self, messages: list[dict[str, str]], tools=None) -> Generation: ...


def _scripted(text: str) -> Generation:
    return Generation(text=text, token_ids=[], logprobs=[])


class OracleAgent:
    """Replays the task's reference solution through the env's own action path: if the oracle
    cannot solve a task, the task (or the env) is broken."""

    name = "oracle"

    def __init__(self, **_):
        self._queue: list[str] = []

    def begin(self, task: Task, reference_actions: list[str]) -> None:
        self._queue = list(reference_actions)

    def act(self, messages, tools=None):
        return _scripted(self._queue.pop(0) if self._queue else "DONE")


class ReplayAgent:
    """Sends the given replies in order, then `then` (or fails once they run out): for driving an env
    through a chosen path, e.g. a bad action followed by the reference solution."""

    name = "scripted"

    def __init__(self, replies: list[str], then: str | None = None):
        self.replies, self.then = list(replies), then

    def begin(self, task: Task, reference_actions: list[str]) -> None:
        pass

    def act(self, messages, tools=None):
        if not self.replies and self.then is not None:
            return _scripted(self.then)
        return _scripted(self.replies.pop(0))


class NoopAgent:
    """Finishes at once without acting: a task it solves is a task that tests nothing."""

    name = "noop"

    def __init__(self, **_):
        pass

    def begin(self, task: Task, reference_actions: list[str]) -> None:
        pass

    def act(self, messages, tools=None):
        return _scripted("DONE")


class ModelAgent:
    """A policy acting one conversation at a time. With a seed, step k of the episode samples with
    seed + k, so an episode replays exactly (a resumed training run takes the same next step)."""

    name = "model"

    def __init__(self, policy: Policy, sampling=None, seed: int | None = None):
        self.policy = policy
        self.sampling = sampling
        self.seed = seed
        self._step = 0

    def begin(self, task: Task, reference_actions: list[str]) -> None:
        self._step = 0

    def act(self, messages, tools=None):
        kwargs = {}
        if self.sampling is not None:
            kwargs["sampling"] = self.sampling
        if self.seed is not None:
            kwargs["seeds"] = [self.seed + self._step]
        self._step += 1
        return self.policy.generate([messages], tools=tools, **kwargs)[0]
