"""The simulated user of `nextstate/Chat-v0`: what a person checks in a reply, and what they say back.

A chat task is a short session (envs/tasks/chat/, one YAML per task): the user's requests in order,
each with the wants the user checks a reply against. The reply that meets every want is thanked and
the next request follows; otherwise the user names the first unmet want in their own words (the
directive part of the next state the paper learns from), and after `patience` corrections gives up
on that request. The checks are plain text rules (words, lines, phrases), so the user's verdict is
exact and a run needs no second model; the replies are written like a person's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from envs.task_formats import TaskFormatError
from nextstate.types import Task

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+\S")


def _words(text: str) -> list[str]:
    return re.findall(r"\w[\w'-]*", text)  # a bullet's dash is not a word


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _has(text: str, phrase: str) -> bool:
    return phrase.lower() in text.lower()


# want name -> (does the reply meet it, the value's type)
CHECKS: dict[str, tuple[Callable[[str, Any], bool], type]] = {
    "contains_all": (lambda t, v: all(_has(t, p) for p in v), list),
    "contains_any": (lambda t, v: any(_has(t, p) for p in v), list),
    "contains_none": (lambda t, v: not any(_has(t, p) for p in v), list),
    "max_words": (lambda t, v: len(_words(t)) <= v, int),
    "min_words": (lambda t, v: len(_words(t)) >= v, int),
    "lines": (lambda t, v: len(_lines(t)) == v, int),
    "max_lines": (lambda t, v: len(_lines(t)) <= v, int),
    "min_bullets": (lambda t, v: sum(bool(_BULLET.match(line)) for line in _lines(t)) >= v, int),
    "starts_with": (lambda t, v: t.lower().startswith(v.lower()), str),
    "ends_with": (lambda t, v: t.lower().rstrip(" .!").endswith(v.lower().rstrip(" .!")), str),
    "lowercase": (lambda t, v: (t == t.lower()) == v, bool),
    "no_questions": (lambda t, v: ("?" not in t) == v, bool),
    "matches": (lambda t, v: re.search(v, t, re.IGNORECASE | re.MULTILINE) is not None, str),
}

THANKS = "Thanks, that's what I needed."
GIVE_UP = "Never mind, let's move on."
NO_ANSWER = "You didn't say anything."


@dataclass(frozen=True)
class Want:
    check: str
    value: Any
    complaint: str  # what the user says when a reply misses it
    instruction: str = ""  # the wish stated plainly, for the oracle's `hints=wish` (never shown to the policy)

    def met(self, reply: str) -> bool:
        return CHECKS[self.check][0](reply, self.value)


@dataclass(frozen=True)
class Request:
    text: str
    wants: tuple[Want, ...]
    thanks: str
    reference: str  # a reply that meets every want (the oracle's)

    def first_unmet(self, reply: str) -> Want | None:
        return next((w for w in self.wants if not w.met(reply)), None)

    def wish(self, reply: str) -> str:
        """What a perfect hint extractor would take from the user's answer: every unmet want's
        instruction ("" when all are met or none has one)."""
        return " ".join(w.instruction for w in self.wants if w.instruction and not w.met(reply))


def reply_text(action: str) -> str:
    """What the user reads: the reply without reasoning blocks (an unfinished one hides the rest)."""
    text = _THINK.sub("", action) if "<think>" in action else action
    return text.split("<think>", 1)[0].strip()


def _want(path: Path, d: dict) -> Want:
    checks = [k for k in d if k not in ("complaint", "instruction")]
    if len(checks) != 1 or checks[0] not in CHECKS or not isinstance(d.get("complaint"), str):
        raise TaskFormatError(f"{path}: a want is one of {sorted(CHECKS)} with a complaint: {d}")
    name, value = checks[0], d[checks[0]]
    expected = CHECKS[name][1]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise TaskFormatError(f"{path}: {name} takes a {expected.__name__}, got {value!r}")
    if name == "matches":
        try:
            re.compile(value)
        except re.error as e:
            raise TaskFormatError(f"{path}: matches: bad pattern {value!r}: {e}") from e
    return Want(name, value, d["complaint"].strip(), str(d.get("instruction") or "").strip())


def load_task(path: Path) -> Task:
    try:
        d = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise TaskFormatError(f"{path}: invalid YAML: {e}") from e
    missing = [k for k in ("id", "split", "turns") if k not in (d or {})]
    if missing:
        raise TaskFormatError(f"{path}: missing {missing}")
    if d["id"] != path.stem:
        raise TaskFormatError(f"{path}: id {d['id']!r} must match the file name")
    if d["split"] not in ("train", "test") or not d["turns"]:
        raise TaskFormatError(f"{path}: split must be train or test, and turns non-empty")
    requests = []
    for i, turn in enumerate(d["turns"]):
        if not {"request", "wants", "reference"} <= set(turn or {}):
            raise TaskFormatError(f"{path}: turn {i} needs request, wants and reference")
        request = Request(turn["request"].strip(), tuple(_want(path, w) for w in turn["wants"]),
                          str(turn.get("thanks") or THANKS).strip(), str(turn["reference"]).strip())
        unmet = request.first_unmet(request.reference)
        if unmet is not None:
            raise TaskFormatError(f"{path}: turn {i}'s reference misses its own want {unmet.check}")
        requests.append(request)
    return Task(task_id=d["id"], env="chat", instruction=requests[0].text, split=d["split"],
                difficulty=str(d.get("difficulty", "medium")), tags=("chat", str(d.get("persona", "user"))),
                path=path, data={"requests": tuple(requests), "persona": str(d.get("persona", "user"))})


def load_tasks(root: Path, split: str | None = None) -> list[Task]:
    if not root.is_dir():
        raise TaskFormatError(f"chat suite {root} does not exist")
    tasks = [load_task(p) for p in sorted(root.glob("*.yaml"))]
    return [t for t in tasks if split in (None, "all") or t.split == split]
