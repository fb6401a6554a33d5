"""How good a judge is. `judge_accuracy`: how often its -1 agrees with the env's verifiable step
labels (a tool call that matches the reference, a command that exited 0, ...; a step is 'bad' when any
of its labels is False). `judged_steps` and `vote_scores`: a persona's chat steps with the user's own
verdict, and the judge's votes against it (harness.judge_eval, mode=sft_judge)."""
from __future__ import annotations

from nextstate.types import Step


def judge_accuracy(pairs: list) -> dict:
    """`pairs`: [(step score, {label: bool}), ...]. Precision and recall of the judge's negative
    verdicts (score < 0) against bad steps; None where undefined (no negatives / no bad steps)."""
    tp = fp = fn = 0
    for score, labels in pairs:
        bad = not all(bool(v) for v in labels.values())
        neg = score is not None and score < 0
        tp += neg and bad
        fp += neg and not bad
        fn += bad and not neg
    return {"precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None, "n": len(pairs)}


def judged_steps(env, policy, tasks, system_prompt: str) -> list[Step]:
    """Two steps per task: the reference reply and the policy's (greedy) reply, each with the user's
    next message and verdict from the env itself."""
    convs = [[{"role": "system", "content": system_prompt}, {"role": "user", "content": t.instruction}]
             for t in tasks]
    replies = [g.text for g in policy.generate(convs)]
    steps = []
    for task, msgs, reply in zip(tasks, convs, replies):
        for action in (env.reference_actions(task)[0], reply):
            env.reset(options={"task_id": task.task_id})
            _, _, _, _, info = env.step(action)
            steps.append(Step(0, msgs, action, info["next_state"], info={"step_label": info["step_label"]}))
    return steps


def vote_scores(steps: list[Step], judgements) -> dict:
    """A judge's votes on chat steps against the user's own verdict (`step_label.satisfied`): the
    share of valid votes (a parsable \\boxed{}), of steps scored (not 0), and the accuracy of the
    score's sign over the scored steps."""
    votes = [v for j in judgements for v in j.votes]
    truth = [1 if s.info["step_label"]["satisfied"] else -1 for s in steps]
    scored = [(j.score > 0) == (t > 0) for j, t in zip(judgements, truth) if j.score != 0]
    return {"steps": len(steps), "satisfied_steps": truth.count(1), "votes": len(votes),
            "valid": round(sum(v is not None for v in votes) / max(1, len(votes)), 3),
            "scored": round(len(scored) / max(1, len(steps)), 3),
            "accuracy": round(sum(scored) / len(scored), 3) if scored else None}
