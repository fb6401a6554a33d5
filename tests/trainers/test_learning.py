"""Learning in miniature, one test per signal: one prompt, a preferred and a dispreferred reply, and a
few updates of the real model through the path a training run takes (oracle judge -> hints -> teacher
logprobs from the serving endpoint -> the signal's samples -> the PPO update) must make the preferred
reply more likely and the dispreferred one less. A wrong advantage sign, a mask that drops the wrong
tokens or teacher logprobs shifted by one position fail it.

The hint is the task's reference reply (`hints=oracle`), so the hinted teacher certainly prefers the
preferred reply: the test checks the wiring, not how good a hint the model would extract."""
from __future__ import annotations

import pytest
import torch

from nextstate.types import NextState, Sample, Step, Trajectory
from trainers.feedback.apply import judge_and_teach
from trainers.feedback.oracle_judge import OracleHints, OracleJudge
from trainers.signals import SignalConfig, build_samples, collect_steps
from trainers.update import UpdateConfig, ppo_update, sequence_logprobs

pytestmark = [pytest.mark.model, pytest.mark.learning, pytest.mark.slow]  # twelve runs of real updates: ~5 min together

SYSTEM = "You are a helpful personal assistant. Reply to the user's message directly, in plain text."
REQUEST = "What's a good name for a goldfish?"
PREFERRED = "hey, how about bubbles? short and cute."
DISPREFERRED = "A good name for a goldfish could be Goldie. It is a classic choice for a pet fish."
COMPLAINT = "Please talk to me like a friend would, start with hey."
SIGNALS = {
    "outcome": SignalConfig("outcome", w_rl=1.0, w_opd=0.0, baseline="stepwise", opd_topk=0),
    "prm": SignalConfig("prm", w_rl=1.0, w_opd=0.0, baseline="stepwise", opd_topk=0),
    "opd": SignalConfig("opd", w_rl=0.0, w_opd=1.0, baseline="stepwise", opd_topk=0),
    "prm_opd": SignalConfig("prm_opd", w_rl=1.0, w_opd=1.0, baseline="stepwise", opd_topk=0),
    # the vote plus the episode's GRPO outcome advantage (conf/signal/prm_grpo.yaml)
    "prm_grpo": SignalConfig("prm", w_rl=1.0, w_opd=0.0, baseline="grpo", opd_topk=0),
    # the paper's top-K variant
    "opd_topk": SignalConfig("opd", w_rl=0.0, w_opd=1.0, opd_topk=20, baseline="stepwise"),
}
HINT_SUFFIX = "\n\n[user's hint / instruction]\n{hint}"
UPDATE = UpdateConfig(lr=2e-5, weight_decay=0.0, grad_clip=1.0, epochs=1, minibatch_size=2, eps_low=0.2,
                      eps_high=0.28, kl_coef=0.0, rollout_temperature=1.0)
ROUNDS = 4


MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": REQUEST}]


def _token_logprobs(model, prompt_ids: list[int], reply_ids: list[int]) -> list[float]:
    with torch.no_grad():
        lp, _ = sequence_logprobs(model, [Sample(prompt_ids, reply_ids, [], [])])
    return lp[0].tolist()


def _trajectories(model, prompt_ids: list[int], good_ids: list[int], bad_ids: list[int]) -> list[Trajectory]:
    """The two replies as a group of two rollouts of one task, with the trainer's current logprobs as
    the rollout's (the update is on-policy), and the user's verdict as the env would give it."""
    trajs = []
    for reply, ids, liked in ((PREFERRED, good_ids, True), (DISPREFERRED, bad_ids, False)):
        said = "Thanks, that's what I needed." if liked else COMPLAINT
        step = Step(0, MESSAGES, reply, NextState("user", said), action_token_ids=ids,
                    rollout_logprobs=_token_logprobs(model, prompt_ids, ids), prompt_token_ids=prompt_ids,
                    info={"step_label": {"satisfied": liked}})
        trajs.append(Trajectory("goldfish", "nextstate/Chat-v0", [step], outcome=float(liked), success=liked))
    return trajs


@pytest.mark.parametrize("signal", list(SIGNALS))
def test_a_few_updates_make_the_preferred_reply_likelier(signal, served, model_server):
    from transformers import AutoModelForCausalLM

    policy, path = served, model_server[1]  # the frozen initial model: the teacher, as mode.teacher=frozen
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path)
    optimizer = torch.optim.AdamW(model.parameters(), lr=UPDATE.lr, weight_decay=0.0)
    prompt_ids = policy.prompt_ids(MESSAGES)
    good_ids = policy.tokenizer.encode(PREFERRED + "<|im_end|>", add_special_tokens=False)
    bad_ids = policy.tokenizer.encode(DISPREFERRED + "<|im_end|>", add_special_tokens=False)
    good0, bad0 = (sum(_token_logprobs(model, prompt_ids, ids)) for ids in (good_ids, bad_ids))
    hints = OracleHints(lambda task_id: [PREFERRED])
    hinter = lambda sts: hints.hints_for([st.group for st in sts], [st.step for st in sts])  # noqa: E731

    for r in range(ROUNDS):
        trajs = _trajectories(model, prompt_ids, good_ids, bad_ids)
        steps = collect_steps(trajs)
        judge_and_teach(steps, OracleJudge(), hinter, SIGNALS[signal], policy, HINT_SUFFIX, lambda task_id: None,
                        salt=r)
        samples = build_samples(SIGNALS[signal], steps, trajs)
        assert samples, f"{signal}: no samples to learn from"
        ppo_update(model, optimizer, samples, UPDATE, generator=torch.Generator().manual_seed(r))

    good1, bad1 = (sum(_token_logprobs(model, prompt_ids, ids)) for ids in (good_ids, bad_ids))
    print(f"{signal}: log p(preferred) {good0:.2f} -> {good1:.2f}, log p(dispreferred) {bad0:.2f} -> {bad1:.2f}")
    assert good1 > good0 + 1.0, f"{signal}: log p(preferred) {good0:.2f} -> {good1:.2f}"
    assert (good1 - bad1) > (good0 - bad0) + 1.0, (
        f"{signal}: preference margin {good0 - bad0:.2f} -> {good1 - bad1:.2f}")


# -- a general agent: a tool call on the templated tool-call suite, graded by the real env -----------
def _tool_task():
    from envs.toolcall.templated import load_templated

    return next(t for t in load_templated("train", 300, 100, 0) if t.tags[1] == "calculate")


def _tool_trajectories(model, env, task, tools, prompt_ids, replies) -> list[Trajectory]:
    """Each (call, answer, ids) played through the env: its step labels and outcome are the env's."""
    trajs = []
    for call, answer, ids in replies:
        obs, _ = env.reset(options={"task_id": task.task_id})
        msgs = [{"role": "system", "content": ""}, {"role": "user", "content": obs}]
        obs, _, _, _, info = env.step(call)
        steps = [Step(0, msgs, call, info["next_state"], action_token_ids=ids, prompt_token_ids=prompt_ids,
                      rollout_logprobs=_token_logprobs(model, prompt_ids, ids), info=info)]
        _, outcome, done, _, info = env.step(answer)
        assert done
        steps.append(Step(1, msgs, answer, info["next_state"], info=info))  # no tokens: not trained here
        trajs.append(Trajectory(task.task_id, "nextstate/ToolCall-v0", steps, outcome=outcome, success=outcome == 1.0))
    return trajs


@pytest.mark.parametrize("signal", list(SIGNALS))
def test_a_general_agent_learns_the_right_tool_call(signal, served, model_server):
    """The right call (the env labels it matching the reference, and its episode is solved) against a
    wrong one (another tool, a failed episode): every signal must move the policy toward the right call.
    The margin is what is asserted: both calls open with the same tokens (`<tool_call>`, `{"name": "`),
    which the wrong call's negative advantage pushes down too, so the right call's own log p may fall."""
    from transformers import AutoModelForCausalLM

    from envs.toolcall.env import ToolCallEnv
    from envs.toolcall.templated import reference_actions, tools_for

    policy, path = served, model_server[1]  # the frozen initial model: the teacher, as mode.teacher=frozen
    task = _tool_task()
    env = ToolCallEnv(tasks=[task])
    tools = tools_for(task)
    good_call, answer = reference_actions(task)
    bad_call = '<tool_call>\n{"name": "lookup_city", "arguments": {"city": "Paris"}}\n</tool_call>'
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path)
    optimizer = torch.optim.AdamW(model.parameters(), lr=UPDATE.lr, weight_decay=0.0)
    prompt_ids = policy.prompt_ids([{"role": "system", "content": ""}, {"role": "user", "content": task.instruction}],
                                   tools)
    good_ids, bad_ids = (policy.tokenizer.encode(c + "<|im_end|>", add_special_tokens=False)
                         for c in (good_call, bad_call))
    good0, bad0 = (sum(_token_logprobs(model, prompt_ids, ids)) for ids in (good_ids, bad_ids))
    hints = OracleHints(lambda task_id: reference_actions(task))
    hinter = lambda sts: hints.hints_for([st.group for st in sts], [st.step for st in sts])  # noqa: E731

    for r in range(ROUNDS):
        trajs = _tool_trajectories(model, env, task, tools, prompt_ids,
                                   [(good_call, answer, good_ids), (bad_call, "I do not know.", bad_ids)])
        assert [t.outcome for t in trajs] == [1.0, 0.0]
        assert trajs[0].steps[0].info["step_label"]["matches_reference"]
        assert not trajs[1].steps[0].info["step_label"]["matches_reference"]
        steps = collect_steps(trajs)
        judge_and_teach(steps, OracleJudge(), hinter, SIGNALS[signal], policy, HINT_SUFFIX, lambda task_id: tools,
                        salt=r)
        samples = build_samples(SIGNALS[signal], steps, trajs)
        assert samples, f"{signal}: no samples to learn from"
        ppo_update(model, optimizer, samples, UPDATE, generator=torch.Generator().manual_seed(r))
    env.close()

    good1, bad1 = (sum(_token_logprobs(model, prompt_ids, ids)) for ids in (good_ids, bad_ids))
    print(f"{signal}: log p(right call) {good0:.2f} -> {good1:.2f}, log p(wrong call) {bad0:.2f} -> {bad1:.2f}")
    assert (good1 - bad1) > (good0 - bad0) + 1.0, f"{signal}: margin {good0 - bad0:.2f} -> {good1 - bad1:.2f}"


@pytest.mark.parametrize("signal", ["outcome", "prm_grpo"])
def test_an_empty_reply_voted_down_becomes_less_likely(signal, served, model_server):
    """An empty reply is its stop token alone (`mode.train_stop_token`, the default): its negative
    advantage must lower the chance of stopping at once. Left out of the loss, it has no token at all,
    and nothing the update does can make it rarer (a tool-call run came to answer 49 of 269 held-out
    steps with nothing that way)."""
    from transformers import AutoModelForCausalLM

    policy, path = served, model_server[1]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path)
    optimizer = torch.optim.AdamW(model.parameters(), lr=UPDATE.lr, weight_decay=0.0)
    prompt_ids = policy.prompt_ids(MESSAGES)
    stop = policy.tokenizer.convert_tokens_to_ids("<|im_end|>")
    good_ids = policy.tokenizer.encode(PREFERRED + "<|im_end|>", add_special_tokens=False)
    empty0 = _token_logprobs(model, prompt_ids, [stop])[0]

    def trajectories():
        out = []
        for reply, ids, liked in ((PREFERRED, good_ids, True), ("", [stop], False)):
            said = "Thanks, that's what I needed." if liked else "empty reply: answer in plain text"
            step = Step(0, MESSAGES, reply, NextState("user", said), action_token_ids=ids,
                        rollout_logprobs=_token_logprobs(model, prompt_ids, ids), prompt_token_ids=prompt_ids,
                        info={"step_label": {"satisfied": liked}})
            out.append(Trajectory("goldfish", "nextstate/Chat-v0", [step], outcome=float(liked), success=liked))
        return out

    assert len(collect_steps(trajectories(), frozenset({stop}))) == 1  # left out: the empty reply is no sample
    for r in range(ROUNDS):
        trajs = trajectories()
        steps = collect_steps(trajs)
        judge_and_teach(steps, OracleJudge(), lambda sts: [None] * len(sts), SIGNALS[signal], policy, HINT_SUFFIX,
                        lambda task_id: None, salt=r)
        samples = build_samples(SIGNALS[signal], steps, trajs)
        assert any(s.response_ids == [stop] and s.advantages[0] < 0 for s in samples), f"{signal}: no empty sample"
        ppo_update(model, optimizer, samples, UPDATE, generator=torch.Generator().manual_seed(r))

    empty1 = _token_logprobs(model, prompt_ids, [stop])[0]
    print(f"{signal}: log p(empty reply) {empty0:.2f} -> {empty1:.2f}")
    assert empty1 < empty0 - 1.0, f"{signal}: log p(empty reply) {empty0:.2f} -> {empty1:.2f}"
