"""How good a judge is. `judge_accuracy`: how often its -1 agrees with the env's verifiable step
labels (a tool call that matches the reference, a command that exited 0, ...; a step is 'bad' when any
of its labels is False). `judged_steps` and `vote_scores`: a persona's chat steps with the user's own
verdict, and the judge's votes against it (harness.judge_eval, mode=sft_judge); `hint_scores`: a hint
extractor's hints against the wish the user's reply names."""
from __future__ import annotations

from dataclasses import replace

from nextstate.types import Step
from trainers.feedback.oracle_judge import oracle_vote


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


def judged_steps(env, policy, tasks, system_prompt: str, sampled: int = 0, seed: int = 0) -> list[Step]:
    """2 + `sampled` steps per task: the reference reply, the policy's greedy reply and `sampled` replies
    drawn at temperature 1 (the complaints a training run's rollouts get, not only the greedy reply's),
    each with the user's next message and verdict from the env itself."""
    convs = [[{"role": "system", "content": system_prompt}, {"role": "user", "content": t.instruction}]
             for t in tasks]
    replies = [[g.text] for g in policy.generate(convs)]
    if sampled:
        hot = replace(policy.sampling, temperature=1.0)
        drawn = policy.generate([c for c in convs for _ in range(sampled)], sampling=hot,
                                seeds=[seed * 100_003 + i for i in range(len(convs) * sampled)])
        for i, g in enumerate(drawn):
            replies[i // sampled].append(g.text)
    steps = []
    for task, msgs, own in zip(tasks, convs, replies):
        for action in (env.reference_actions(task)[0], *own):
            env.reset(options={"task_id": task.task_id})
            _, _, _, _, info = env.step(action)
            steps.append(Step(0, msgs, action, info["next_state"], info={"step_label": info["step_label"]}))
    return steps


def vote_scores(steps: list[Step], judgements) -> dict:
    """A judge's votes against the steps' labels (chat: the user's own verdict, `step_label.satisfied`;
    a general agent's step: every verifiable label holds, as the oracle judge votes): the share of valid
    votes (a parsable \\boxed{}), of steps scored (not 0), and the accuracy of the score's sign over the
    scored steps. `satisfied_steps`: the steps labelled right. Accuracy alone flatters a judge that
    votes +1 on nearly everything when most steps are right, so the wrong steps get their own numbers:
    `wrong_recall`, the share of steps labelled wrong that it scored below 0, and `wrong_precision`,
    the share of its scores below 0 that fell on a wrong step (None where nothing to divide by)."""
    votes = [v for j in judgements for v in j.votes]
    truth = [oracle_vote(s) for s in steps]
    scored = [(j.score > 0) == (t > 0) for j, t in zip(judgements, truth) if j.score != 0]
    caught = sum(j.score < 0 and t < 0 for j, t in zip(judgements, truth))
    return {"steps": len(steps), "satisfied_steps": truth.count(1), "votes": len(votes),
            "valid": round(sum(v is not None for v in votes) / max(1, len(votes)), 3),
            "scored": round(len(scored) / max(1, len(steps)), 3),
            "accuracy": round(sum(scored) / len(scored), 3) if scored else None,
            "wrong_recall": _share(caught, sum(t < 0 for t in truth)),
            "wrong_precision": _share(caught, sum(j.score < 0 for j in judgements))}


def _share(n: int, of: int) -> float | None:
    return round(n / of, 3) if of else None


def hint_scores(steps: list[Step], hints: list[str | None]) -> dict:
    """A hint extractor's hints on chat steps against what the user's reply names (`named_wish`): on
    the steps the user complained about, the share with a hint at all (`given`) and with the named wish
    itself (`exact`, case and surrounding space aside); on the accepted steps, the share left without
    one (`silent`: nothing to learn from thanks)."""
    wanted = [(s.next_state.fields.get("named_wish") or "", h) for s, h in zip(steps, hints)
              if not s.info["step_label"]["satisfied"]]
    thanked = [h for s, h in zip(steps, hints) if s.info["step_label"]["satisfied"]]
    return {"complained_steps": len(wanted), "given": _share(sum(h is not None for _, h in wanted), len(wanted)),
            "exact": _share(sum(h is not None and h.strip().lower() == w.strip().lower() for w, h in wanted),
                           len(wanted)),
            "silent": _share(sum(h is None for h in thanked), len(thanked))}
