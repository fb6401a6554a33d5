"""The PRM judge and the hindsight-hint extractor of OpenClaw-RL, both run by a judge model that sees
an action and its next state (with the next state's role) and never the original prompt.

Prompts are templates in conf/judge/ and conf/hints/. Votes are parsed from `\\boxed{...}`; hints
from `[HINT_START] ... [HINT_END]`."""
from __future__ import annotations

import re
from dataclasses import dataclass

from agents.serving.transformers_policy import SamplingConfig
from nextstate.types import Judgement, NextState, Step
from trainers.advantages import majority_vote, mean_valid_vote

_BOXED = re.compile(r"\\?boxed\{\s*([+-]?\d+)\s*\}")
_HINT = re.compile(r"\[HINT_START\](.*?)\[HINT_END\]", re.DOTALL)
ROLES = {"terminal": "terminal output", "tool": "tool result", "page": "page change", "user": "user reply",
         "test": "test run", "error": "environment error"}


@dataclass
class JudgeConfig:
    name: str
    model: str | None
    m: int
    temperature: float
    max_new_tokens: int
    aggregate: str
    system: str
    template: str


@dataclass
class NextStateHintConfig:
    """`hints=next_state`: the next state itself is the hint, no model call."""

    name: str
    min_chars: int  # a next state this short or shorter is no hint
    teacher_suffix: str


@dataclass
class HintConfig:
    name: str
    m: int
    temperature: float
    max_new_tokens: int
    min_chars: int
    system: str
    template: str
    teacher_suffix: str


def parse_vote(text: str) -> int | None:
    """The last \\boxed{} answer if it is 1, -1 or 0; None otherwise (unparsable)."""
    found = _BOXED.findall(text)
    if not found:
        return None
    v = int(found[-1])
    return v if v in (1, -1, 0) else None


def parse_hint(text: str) -> str | None:
    """The hint of a +1 answer, or None (a -1, no box, or no hint markers)."""
    if parse_vote(text) != 1:
        return None
    m = _HINT.search(text)
    return m.group(1).strip() if m else None


def best_hint(texts: list[str], min_chars: int) -> str | None:
    """Keep +1 votes whose hint is longer than `min_chars`; take the longest."""
    hints = [h for h in (parse_hint(t) for t in texts) if h and len(h) > min_chars]
    return max(hints, key=len) if hints else None


def aggregate_votes(votes: list[int | None], how: str) -> float:
    if how == "majority":
        return float(majority_vote(votes))
    if how == "mean":
        return mean_valid_vote(votes)
    raise ValueError(f"unknown vote aggregation {how!r} (mean | majority)")


def _clip(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2:]


def fill(template: str, **values: str) -> str:
    """Replace `{name}` placeholders and nothing else (templates hold literal braces: \\boxed{1})."""
    for k, v in values.items():
        template = template.replace("{" + k + "}", v)
    return template


def task_of(step: Step) -> str:
    """The episode's first user message: the task, as the agent was given it."""
    return next((m["content"] for m in step.prompt_messages if m["role"] == "user"), "")


def render(template: str, step: Step) -> str:
    """A judge prompt for one step. `{task}` (conf/judge/model_task.yaml) adds the task: whether a
    command moved a task on depends on the task, which `judge=model` (OpenClaw-RL's judge) never sees."""
    ns: NextState = step.next_state
    body = ns.text if ns.exit_code is None else f"[exit code {ns.exit_code}]\n{ns.text}"
    return fill(template, task=_clip(task_of(step), 600), action=_clip(step.action_text),
                role=ROLES.get(ns.kind, ns.kind), next_state=_clip(body))


class ModelJudge:
    """Votes and hints from a judge model behind the serving client (batched: all m x steps at once)."""

    def __init__(self, policy, judge: JudgeConfig | None, hints: HintConfig | None, seed: int = 0):
        """`judge` / `hints`: the model kind's prompts and sampling; None where that role is not this
        model's (e.g. `judge=oracle hints=model`)."""
        self.policy, self.judge_cfg, self.hint_cfg, self.seed = policy, judge, hints, seed

    def _ask(self, steps: list[Step], system: str, template: str, m: int, temperature: float,
             max_new_tokens: int, salt: int) -> list[list[str]]:
        convs, seeds = [], []
        for i, step in enumerate(steps):
            msgs = [{"role": "system", "content": system}, {"role": "user", "content": render(template, step)}]
            for k in range(m):
                convs.append(msgs)
                seeds.append(hash((self.seed, salt, i, k)) % (2**31))
        if not convs:
            return []
        sampling = SamplingConfig(max_new_tokens, temperature, 1.0, self.policy.sampling.max_prompt_tokens)
        gens = self.policy.generate(convs, sampling=sampling, seeds=seeds)
        return [[g.text for g in gens[i * m:(i + 1) * m]] for i in range(len(steps))]

    def votes(self, steps: list[Step], salt: int = 0) -> list[Judgement]:
        c = self.judge_cfg
        if c is None:
            raise RuntimeError("this ModelJudge has no judge config (judge is not the model kind)")
        outs = self._ask(steps, c.system, c.template, c.m, c.temperature, c.max_new_tokens, salt)
        result = []
        for texts in outs:
            votes = [parse_vote(t) for t in texts]
            result.append(Judgement(votes=tuple(votes), score=aggregate_votes(votes, c.aggregate),
                                    raw=tuple(texts)))
        return result

    def hints(self, steps: list[Step], salt: int = 0) -> list[str | None]:
        c = self.hint_cfg
        if c is None:
            raise RuntimeError("this ModelJudge has no hints config (hints is not the model kind)")
        outs = self._ask(steps, c.system, c.template, c.m, c.temperature, c.max_new_tokens, salt + 7919)
        return [best_hint(texts, c.min_chars) for texts in outs]


def teacher_messages(step: Step, hint: str, suffix: str) -> list[dict[str, str]]:
    """The original conversation with the hint appended to its last user message."""
    msgs = [dict(m) for m in step.prompt_messages]
    for m in reversed(msgs):
        if m["role"] == "user":
            m["content"] = m["content"] + fill(suffix, hint=hint)
            break
    return msgs


def next_state_hint(step: Step, min_chars: int, limit: int = 1500) -> str | None:
    """`hints=next_state`: what came back after the action, verbatim (clipped), as the hint."""
    text = step.next_state.text.strip()
    return _clip(text, limit) if len(text) > min_chars else None
