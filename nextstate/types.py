"""The types every env, agent and trainer speaks.

They are small dataclasses so that nothing of unknown shape crosses a package boundary; they turn
into plain dicts only at the JSON boundary (`to_dict`), and back with `from_dict`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

NextStateKind = Literal["terminal", "tool", "page", "user", "test", "error"]


@dataclass(frozen=True)
class Task:
    """One task of a suite: what the agent is asked, and where its environment and grader live."""

    task_id: str
    env: str
    instruction: str
    split: Literal["train", "test"] = "train"
    difficulty: str = "medium"
    tags: tuple[str, ...] = ()
    path: Path | None = None  # task directory, when the suite is on disk
    data: dict[str, Any] = field(default_factory=dict)  # format-specific fields, read by the env's loader


@dataclass(frozen=True)
class NextState:
    """What came back after an action: the signal NextState learns from.

    `kind` names the role of whoever answered (a terminal, a tool, a page, a user, a test run) or
    `error` when the action itself could not be carried out (no command, malformed call ...).
    Frozen, so one next state may be shared (a grader's memo hands the same one to every repeat of
    a reply); treat `fields` as read-only too.
    """

    kind: NextStateKind
    text: str
    exit_code: int | None = None
    cwd: str | None = None
    timed_out: bool = False
    truncated_bytes: int = 0
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "NextState":
        return cls(**d)


@dataclass
class Step:
    """One action and its next state, with everything a trainer needs to learn from it."""

    index: int
    prompt_messages: list[dict[str, str]]
    action_text: str
    next_state: NextState
    action_token_ids: list[int] = field(default_factory=list)
    rollout_logprobs: list[float] = field(default_factory=list)
    prompt_token_ids: list[int] = field(default_factory=list)
    reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)  # e.g. verifiable step labels
    timings: dict[str, float] = field(default_factory=dict)  # seconds: generate, env

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["next_state"] = self.next_state.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Step":
        d = dict(d)
        d["next_state"] = NextState.from_dict(d["next_state"])
        return cls(**d)


@dataclass
class Trajectory:
    """One episode. `outcome` is the task's final score; an infra failure is never scored as 0."""

    task_id: str
    env_id: str
    steps: list[Step] = field(default_factory=list)
    outcome: float = 0.0
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    infra_failure: bool = False
    infra_reason: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # setup, agent, verify
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_tokens(self) -> int:
        return sum(len(s.action_token_ids) or s.info.get("usage", {}).get("completion_tokens", 0)
                   for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["steps"] = [s.to_dict() for s in self.steps]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        d = dict(d)
        d["steps"] = [Step.from_dict(s) for s in d.get("steps", [])]
        return cls(**d)


@dataclass(frozen=True)
class Generation:
    """A policy's reply: the text and the exact tokens (and their logprobs) that produced it."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    prompt_token_ids: list[int] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, int] = field(default_factory=dict)  # an API's token counts, where no token ids come back


@dataclass(frozen=True)
class Judgement:
    """The judge's reading of one step: its m votes (+1/-1/0, None = unparsable), the step score,
    and the hindsight hint for OPD (None = no usable hint)."""

    votes: tuple[int | None, ...] = ()
    score: float = 0.0
    hint: str | None = None
    raw: tuple[str, ...] = ()


@dataclass
class Sample:
    """One training example: a step's exact prompt and response tokens with per-token advantages.
    The trainer sees only these; it never knows which env produced them."""

    prompt_ids: list[int]
    response_ids: list[int]
    old_logprobs: list[float]
    advantages: list[float]
    group: str = ""
    step_index: int = 0
    ref_logprobs: list[float] | None = None
    # top-K OPD: per response token, the hinted teacher's K most likely (logprob, token id); the update
    # then adds w_opd * reverse KL to that distribution (trainers/losses.topk_reverse_kl)
    teacher_top: list[list[tuple[float, int]]] | None = None
    opd_weight: float = 0.0
