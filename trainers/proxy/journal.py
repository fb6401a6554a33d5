"""The proxy's conversations on disk, so that a killed proxy loses none of them.

Live conversations are `mode=proxy`'s training data, and nobody can replay them. So each reply that
still waits for its next state, and each completed step not yet trained on, is appended to
`<run_dir>/sessions.jsonl` as it happens (flushed and fsynced). A resumed run reads them back: a
user who answers after the restart still completes the step, and the steps that were queued or
being judged when the run died are trained on. After each update's checkpoint the file is rewritten
with only what is still open, so it stays small.

Replay is the exact inverse of the writes (tests/trainers/proxy/test_journal.py replays every prefix of
random interleavings): a step line also ends its session's waiting reply (the reply it completes), so
the rewrite puts the steps before the waiting replies, never after. The file holds what users wrote:
it is created 0600 (owner only) and the rewrite keeps that mode.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nextstate.atomic import append_jsonl, read_jsonl, write_text_atomic
from nextstate.types import Generation, Step


@dataclass
class PendingTurn:
    """A main reply waiting for its next state (with the tools its request offered)."""
    index: int
    messages: list[dict[str, str]]
    generation: Generation
    version: int
    tools: list[dict] | None = None
    token: str = ""  # the session's X-Session-Token: its owner's proof (trainers/proxy/sessions.py)
    shown: str = ""  # the reply as the client got it (before a stop string); "" = the generation's text

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PendingTurn":
        return cls(**{**d, "generation": Generation(**d["generation"])})


@dataclass
class JournaledStep:
    """A completed step, numbered in the order the trainer's loops take them."""
    no: int
    session: str
    version: int
    step: Step
    tools: list[dict] | None = None


@dataclass
class Replayed:
    pending: dict[str, PendingTurn] = field(default_factory=dict)  # session -> its waiting reply, oldest first
    steps: list[JournaledStep] = field(default_factory=list)


class SessionJournal:
    """Append-only record of waiting replies and completed steps; the caller serializes calls."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._steps: list[dict] = []  # step records still open, for the rewrite
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))  # never readable by others, even briefly
        os.chmod(self.path, 0o600)  # a journal left by an older version

    def pending(self, session: str, turn: PendingTurn) -> None:
        append_jsonl(self.path, {"pending": session, **turn.to_dict()})

    def step(self, s: JournaledStep) -> None:
        record = {"step": s.no, "session": s.session, "version": s.version, "tools": s.tools, "data": s.step.to_dict()}
        append_jsonl(self.path, record)  # (first: a write the disk refused leaves nothing half-noted)
        self._steps.append(record)

    def end(self, session: str) -> None:
        """The session's waiting reply will get no next state (forgotten, or the session is done)."""
        append_jsonl(self.path, {"end": session})

    def replay(self, first_step: int) -> Replayed:
        """What the file holds: the replies still waiting, and the steps numbered `first_step` or later
        (the earlier ones were trained on). A line cut off by the kill is skipped."""
        out = Replayed()
        for r in read_jsonl(self.path):
            if "pending" in r:
                session = r.pop("pending")
                out.pending.pop(session, None)  # re-inserted last: the order is least recently used first
                out.pending[session] = PendingTurn.from_dict(r)
            elif "step" in r:
                out.pending.pop(r["session"], None)
                if r["step"] >= first_step:
                    self._steps.append(r)
                    out.steps.append(JournaledStep(r["step"], r["session"], r["version"], Step.from_dict(r["data"]),
                                                   r.get("tools")))
            elif "end" in r:
                out.pending.pop(r["end"], None)
        return out

    def compact(self, pending: dict[str, PendingTurn], keep_from: int) -> None:
        """Rewrite the file with the steps numbered `keep_from` or later, then the waiting replies (in
        that order: a step read after a session's waiting reply would end it). The temp file is 0600."""
        self._steps = [r for r in self._steps if r["step"] >= keep_from]
        lines = [json.dumps(r, default=str) for r in self._steps]
        lines += [json.dumps({"pending": s, **t.to_dict()}, default=str) for s, t in pending.items()]
        write_text_atomic(self.path, "".join(line + "\n" for line in lines))
