"""`nextstate/Chat-v0`: a personal agent in conversation; the user's next message is its next state.

The paper's first setting ("Train any agent simply by talking"): no tool runs, the signal is how the
user answers. A task is a short session with a simulated user (envs/chat/user.py) whose requests come
with checkable wants. Observation: the user's message. Action: the agent's reply (reasoning in
`<think>` blocks is not shown to the user). Next state: the user's reply, kind "user": thanks and the
next request when every want is met, else the user's complaint naming what to change (after
`patience` complaints on one request the user moves on). `info["step_label"]["satisfied"]` says
whether the user accepted the reply: the truth a PRM judge's vote on that step is measured against.
The outcome is the share of requests met; success when all are. Nothing here needs Docker.

With `env.persona` set, the tasks are persona suites instead (envs/chat/personas.py): one request
each, from a user whose preference is never stated, only complained about. Such an episode is graded
on the first reply alone: the outcome is the share of the user's wants it meets (a graded signal even
when no reply meets them all; 0 when it misses a gate want: it does not answer the request), success
when it meets every one; the final info adds
`first_reply_met`, `first_reply_wants` (want -> met) and `corrections` (complaints in the episode).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envs.base import TextEnv, given_or_default, pick_task, set_tasks
from envs.chat.personas import load_personas
from envs.chat.user import GIVE_UP, NO_ANSWER, load_tasks, reply_text
from nextstate.config import REPO_ROOT, EnvConfig
from nextstate.types import NextState, Task


@dataclass
class ChatEnvConfig(EnvConfig):
    tasks_dir: str
    patience: int  # complaints about one request before the user moves on
    persona: str | None  # None: the sessions in tasks_dir; else persona suites (a name, "v2/<name>", "a,b" or "all")


class ChatEnv(TextEnv):
    # a persona task's first-reply grade, which the personalization score is computed from
    final_info_kept = TextEnv.final_info_kept + ("first_reply_met", "first_reply_wants", "corrections")

    def __init__(self, config: ChatEnvConfig | None = None, sandbox=None, *, tasks: list[Task] | None = None,
                 split: str | None = None, run_id: str = "adhoc"):
        config, _ = given_or_default("chat", ChatEnvConfig, config, sandbox)
        if config.patience < 1:
            raise ValueError(f"env.patience must be at least 1, got {config.patience}")
        self.config, self.run_id = config, run_id
        root = Path(config.tasks_dir)
        if tasks is None:
            tasks = (load_tasks(root if root.is_absolute() else REPO_ROOT / root, split) if config.persona is None
                     else load_personas(config.persona, split))
        set_tasks(self, tasks, f"no chat tasks in {config.persona or config.tasks_dir} (split={split})")
        self.task: Task | None = None
        self._turn = self._misses = self._met = self._first_try = self._corrections = 0
        self._first_reply: tuple[bool, ...] | None = None  # per want, for a task graded on its first reply
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        task = pick_task(self, options, "chat task")
        self.task = task
        self._turn = self._misses = self._met = self._first_try = self._corrections = 0
        self._first_reply = None
        self._done = False
        return task.instruction, {"task_id": task.task_id, "persona": task.data["persona"], "setup_s": 0.0}

    def step(self, action: str):
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            return "", 0.0, True, False, {"next_state": NextState("error", "the session is over")}
        requests = self.task.data["requests"]
        turn = self._turn
        request = requests[turn]
        reply = reply_text(action) if isinstance(action, str) else ""
        unmet = request.first_unmet(reply) if reply else None
        satisfied = bool(reply) and unmet is None
        if self._first_reply is None and self.task.data.get("grading") == "first_reply":
            self._first_reply = tuple(bool(reply) and w.met(reply) for w in request.wants)  # nothing meets nothing
        self._corrections += not satisfied
        if satisfied:
            self._met += 1
            self._first_try += self._misses == 0
            said, moved_on = request.thanks, True
        else:
            self._misses += 1
            complaint = unmet.complaint if unmet is not None else f"{NO_ANSWER} {request.text}"
            moved_on = self._misses >= self.config.patience
            said = f"{complaint} {GIVE_UP}" if moved_on else complaint
        if moved_on:
            self._turn, self._misses = self._turn + 1, 0
            if self._turn < len(requests):
                said = f"{said}\n\n{requests[self._turn].text}"
        ns = NextState("user", said, fields={"turn": turn, "satisfied": satisfied,
                                               "unmet": None if satisfied else (unmet.check if unmet else "empty"),
                                               "wish": request.wish(reply) if reply else "",
                                               # the wish the complaint names: all a hint extractor can read
                                               "named_wish": unmet.instruction if unmet is not None else ""})
        info = {"next_state": ns, "step_label": {"satisfied": satisfied}}
        if self._turn < len(requests):
            return said, 0.0, False, False, info
        outcome, final = self.finalize()
        info.update(final)
        return said, outcome, True, False, info

    def finalize(self) -> tuple[float, dict]:
        """The share of the session's requests the user was satisfied with (a cut session counts what it met)."""
        if self._done or self.task is None:
            return 0.0, {}
        self._done = True
        n = len(self.task.data["requests"])
        info = {"outcome": self._met / n, "success": self._met == n, "requests_met": self._met,
                "requests": n, "met_first_try": self._first_try}
        if self.task.data.get("grading") == "first_reply":
            info.update(self._first_reply_grade())
        return info["outcome"], info

    def _first_reply_grade(self) -> dict:
        """A persona task's grade: the share of the wants the first reply met (none if it was cut before
        one), so a group of sampled replies differs even when none meets them all. A reply that misses a
        gate want (the one saying it answers the request at all) scores 0: else "ok." would outscore a
        real answer that is too long, and a policy learning from the outcome would learn to say nothing."""
        wants = self.task.data["requests"][0].wants
        met = self._first_reply or (False,) * len(wants)
        gated = any(g and not m for g, m in zip(self.task.data.get("gates", ()), met))
        checks = [w.check for w in wants]
        names = [f"{c}_{checks[:i + 1].count(c)}" if checks.count(c) > 1 else c for i, c in enumerate(checks)]
        return {"outcome": 0.0 if gated else sum(met) / len(met), "success": all(met), "first_reply_met": all(met),
                "first_reply_wants": dict(zip(names, met)), "corrections": self._corrections}

    def reference_actions(self, task: Task) -> list[str]:
        return [r.reference for r in task.data["requests"]]

    def tools_for(self, task: Task) -> None:
        return None
