"""One episode: the agent acts, the env answers with a next state, until it ends. The transcript
kept here is exactly what the policy saw, so every step can be re-scored later.

An env whose `step` raises has failed at its own job (an env answers every action, however bad, with
a next state): the episode ends there as an infra failure, unscored, with the action that set it off
as its last step and the exception (type, message, traceback tail) as the evidence, and the run goes
on with the next episode."""
from __future__ import annotations

import dataclasses
import re
import time
import traceback
from typing import Callable

from agents.base import Agent
from agents.openai_agent import AgentUnavailable
from nextstate.types import NextState, Step, Task, Trajectory

_SURROGATE = re.compile("[\ud800-\udfff]")
TRACEBACK_KEPT = 4000  # characters of an env's traceback kept in a trajectory (its tail)


def _env_raised(e: Exception, call: str = "env.step") -> tuple[str, dict]:
    """What an exception out of the env (`call`) becomes: the observation and the info of an infra
    failure. The episode ends unscored and the run goes on; the traceback is kept for the report."""
    first = (str(e).strip().splitlines() or [""])[0][:500]
    reason = f"{call} raised {type(e).__name__}" + (f": {first}" if first else "")
    ns = NextState(kind="error", text=f"infrastructure failure: {reason}")
    return f"[error] {ns.text}", {"next_state": ns, "infra_failure": True, "infra_reason": reason,
                                  "infra_traceback": "".join(traceback.format_exception(e))[-TRACEBACK_KEPT:]}


def run_episode(env, agent: Agent, task: Task, system_prompt: str, *, seed: int | None = None,
                on_step: Callable[[int], None] | None = None) -> Trajectory:
    t0 = time.monotonic()
    traj = Trajectory(task_id=task.task_id, env_id=env.spec.id if env.spec else type(env).__name__)
    call = "env.reset"
    try:
        obs, info = env.reset(seed=seed, options={"task_id": task.task_id})
        if not info.get("infra_failure"):
            call = "env.reference_actions"
            reference = env.unwrapped.reference_actions(task)
            call = "env.tools_for"
            tools = env.unwrapped.tools_for(task)
    except Exception as e:  # noqa: BLE001  (the env's failure, not the agent's, as in env.step below)
        obs, info = _env_raised(e, call)
    traj.timings["setup"] = info.get("setup_s", time.monotonic() - t0)
    if info.get("infra_failure"):
        traj.infra_failure, traj.infra_reason = True, info.get("infra_reason", "")
        traj.info.update({k: info[k] for k in ("infra_traceback",) if k in info})
        return traj
    agent.begin(task, reference)
    obs = _SURROGATE.sub("\ufffd", obs)
    messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": obs}]
    t_agent = time.monotonic()
    while True:
        t = time.monotonic()
        try:
            gen = agent.act(messages, tools=tools)
        except Exception as e:  # noqa: BLE001  (the policy's machinery failed, e.g. an endpoint or a tokenizer,
            # not a choice of the agent: the episode is unscored with the reason, and the run goes on)
            traj.infra_failure = True
            traj.infra_reason = f"agent: {e}" if isinstance(e, AgentUnavailable) else f"agent: {type(e).__name__}: {e}"
            traj.info["infra_traceback"] = traceback.format_exc()[-4000:]
            return traj
        t_gen = time.monotonic() - t
        if _SURROGATE.search(gen.text):  # no env, tokenizer or JSON writer can encode a lone surrogate
            gen = dataclasses.replace(gen, text=_SURROGATE.sub("\ufffd", gen.text))
        try:
            obs, reward, terminated, truncated, info = env.step(gen.text)
        except Exception as e:  # noqa: BLE001  (the env's failure, not the agent's: see the docstring)
            obs, info = _env_raised(e)
            reward, terminated, truncated = 0.0, True, False
        traj.steps.append(Step(
            index=len(traj.steps), prompt_messages=list(messages), action_text=gen.text,
            next_state=info.get("next_state") or NextState(kind="error", text=obs),
            action_token_ids=list(gen.token_ids), rollout_logprobs=list(gen.logprobs),
            prompt_token_ids=list(gen.prompt_token_ids), reward=float(reward),
            info={**{k: v for k, v in info.items() if k in ("step_label", "truncated_by")},
                  **({"usage": gen.usage} if gen.usage else {})},
            timings={"generate": t_gen, "env": time.monotonic() - t - t_gen},
        ))
        obs = _SURROGATE.sub("\ufffd", obs)  # an env that echoes the action would pass it on to the policy
        messages += [{"role": "assistant", "content": gen.text}, {"role": "user", "content": obs}]
        if on_step is not None:  # the progress bar's live step and token counts
            on_step(len(gen.token_ids) or gen.usage.get("completion_tokens", 0))
        if terminated or truncated:
            break
    traj.terminated, traj.truncated = bool(terminated), bool(truncated)
    traj.infra_failure = bool(info.get("infra_failure"))
    traj.infra_reason = info.get("infra_reason", "")
    traj.outcome = float(info.get("outcome", 0.0))
    traj.success = bool(info.get("success", False)) and not traj.infra_failure
    traj.timings["verify"] = float(info.get("verify_s", 0.0))
    traj.timings["agent"] = time.monotonic() - t_agent - traj.timings["verify"]
    # what of the last step's info the env declares its trajectories keep (its grading report), and the
    # traceback of an env that raised
    for key in (*getattr(getattr(env, "unwrapped", env), "final_info_kept", ()), "infra_traceback"):
        if key in info:
            traj.info[key] = info[key]
    return traj
