"""`python -m harness.judge_eval [overrides]`: how good the PRM judge is on a persona's chat steps.

The paper's judge reads (reply, the user's next message) and votes +1 / -1. Here the user's own
verdict (`step_label.satisfied`) is the truth. For every request of the split, two steps go to the
judge: the reference reply (the user thanks it) and the policy's greedy reply (the user complains,
nearly always, at the start of training), so the set holds both verdicts. Printed and written to
`<run dir>/judge_eval.json`: vote validity (the share of the m x steps answers with a parsable
\\boxed{}), accuracy of the step score's sign against the verdict over the steps it scored, and the
share of steps scored at all (a 0 is masked out of training).

    python -m harness.judge_eval env.persona=casual                        # the default model as judge
    python -m harness.judge_eval env.persona=casual judge.model=<checkpoint dir>
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from agents.factory import model_path, serve_policy
from agents.serving.backend import BackendConfig
from nextstate.atomic import write_json_atomic
from nextstate.config import compose, model_config, typed
from trainers.feedback.judge_accuracy import judged_steps, vote_scores
from trainers.feedback.model_judge import HintConfig, JudgeConfig, ModelJudge


def main(argv: list[str]) -> int:
    cfg = compose(["env=chat", "judge=model", "hints=model", *argv])
    if not cfg.env.persona:
        raise SystemExit("give a persona: env.persona=casual (see envs/tasks/personas/)")
    from envs.chat.env import ChatEnv, ChatEnvConfig

    env = ChatEnv(typed(cfg.env, ChatEnvConfig), split=cfg.split)
    tasks = env.tasks[: cfg.limit or None]
    model_cfg, backend = model_config(cfg.model), typed(cfg.backend, BackendConfig)
    judge_cfg = typed(cfg.judge, JudgeConfig)
    out_dir = Path(cfg.paths.results_dir) / "judge_eval"
    out_dir.mkdir(parents=True, exist_ok=True)
    init = model_path(model_cfg, cfg.paths.cache_dir)
    with serve_policy(model_cfg, backend, cfg.paths.cache_dir, path=init, log_path=out_dir / "policy.log") as policy:
        steps = judged_steps(env, policy, tasks, cfg.env.system_prompt)
    judge_path = Path(judge_cfg.model) if judge_cfg.model else init
    with serve_policy(model_cfg, backend, cfg.paths.cache_dir, path=judge_path, log_path=out_dir / "judge.log") as jp:
        judgements = ModelJudge(jp, judge_cfg, typed(cfg.hints, HintConfig), seed=cfg.seed).votes(steps)
    result = {"persona": cfg.env.persona, "split": cfg.split, "judge": str(judge_path), "m": judge_cfg.m,
              **vote_scores(steps, judgements)}
    write_json_atomic(out_dir / f"{cfg.env.persona}_{cfg.split}_{judge_path.name}.json",
                      {**result, "examples": [{"reply": s.action_text, "next_state": s.next_state.text,
                                               "satisfied": s.info["step_label"]["satisfied"], "raw": list(j.raw)}
                                              for s, j in list(zip(steps, judgements))[:10]]})
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
