"""The four signals turn judged trajectories into samples, checked against hand-computed numbers."""
import pytest
import yaml

from nextstate.types import Judgement, NextState, Step, Trajectory
from trainers.signals import SignalConfig, build_samples, collect_steps

SIG = {
    "outcome": SignalConfig("outcome", w_rl=1.0, w_opd=0.0, baseline="stepwise", opd_topk=0),
    "prm": SignalConfig("prm", w_rl=1.0, w_opd=0.0, baseline="stepwise", opd_topk=0),
    "opd": SignalConfig("opd", w_rl=0.0, w_opd=1.0, baseline="stepwise", opd_topk=0),
    "prm_opd": SignalConfig("prm_opd", w_rl=1.0, w_opd=1.0, baseline="stepwise", opd_topk=0),
}


def _traj(task, outcome, n_steps=1, infra=False):
    steps = [Step(i, [], "a", NextState(kind="terminal", text=""), action_token_ids=[5, 6],
                  rollout_logprobs=[-1.0, -2.0], prompt_token_ids=[1, 2, 3]) for i in range(n_steps)]
    return Trajectory(task, "env", steps=steps, outcome=outcome, infra_failure=infra)


def test_a_replys_stop_token_is_left_out_only_when_asked_and_an_empty_reply_then_has_no_sample():
    stop = 2  # <|im_end|>
    trajs = [_traj("A", 1.0), _traj("A", 0.0)]
    trajs[0].steps[0].action_token_ids, trajs[0].steps[0].rollout_logprobs = [5, 6, stop], [-1.0, -2.0, -0.5]
    trajs[1].steps[0].action_token_ids, trajs[1].steps[0].rollout_logprobs = [stop], [-3.0]  # an empty reply
    trained = collect_steps(trajs)
    assert [(s.response_ids, s.old_logprobs) for s in trained] == [([5, 6, stop], [-1.0, -2.0, -0.5]),
                                                                    ([stop], [-3.0])]
    left_out = collect_steps(trajs, frozenset({stop}))
    assert [(s.response_ids, s.old_logprobs) for s in left_out] == [([5, 6], [-1.0, -2.0])]
    # a stop id inside a reply (it cannot be sampled there, but a hand-made step may hold one) stays
    trajs[0].steps[0].action_token_ids = [stop, 6, 7]
    assert collect_steps(trajs, frozenset({stop}))[0].response_ids == [stop, 6, 7]


def test_outcome_is_group_normalized_and_broadcast():
    trajs = [_traj("A", 1.0), _traj("A", 0.0), _traj("B", 1.0), _traj("B", 1.0), _traj("A", 0.0, infra=True)]
    steps = collect_steps(trajs)
    assert len(steps) == 4  # the infra failure gives nothing to learn from
    samples = build_samples(SIG["outcome"], steps, trajs)
    # group A: [1, 0] -> mean .5, sigma .5 -> [+1, -1]; group B is constant -> advantage 0 -> dropped
    assert [s.advantages for s in samples] == [pytest.approx([1.0, 1.0], abs=1e-5),
                                               pytest.approx([-1.0, -1.0], abs=1e-5)]


def test_prm_adds_step_score_to_outcome_then_standardizes():
    trajs = [_traj("A", 1.0), _traj("A", 0.0), _traj("A", 0.0)]
    steps = collect_steps(trajs)
    for st, score in zip(steps, [1.0, -1.0, 1 / 3]):
        st.judgement = Judgement(votes=(1,), score=score)
    samples = build_samples(SIG["prm"], steps, trajs)
    # R = [2, -1, 1/3]; mean 4/9; population sigma = sqrt(((14/9)^2 + (13/9)^2 + (1/9)^2)/3)
    import math
    r = [2.0, -1.0, 1 / 3]
    m = sum(r) / 3
    sd = math.sqrt(sum((x - m) ** 2 for x in r) / 3)
    assert [s.advantages[0] for s in samples] == pytest.approx([(x - m) / (sd + 1e-6) for x in r], rel=1e-4)


def test_prm_keeps_a_step_without_peers_raw_and_prm_peered_drops_it():
    """Two rollouts of A: the first answers at step 0 (R = 1 + 1), the second calls (R = 0 - 1) and goes on
    alone to step 1 (R = 0 + 1): prm keeps that step's raw 1.0, prm_peered drops it."""
    trajs = [_traj("A", 1.0), _traj("A", 0.0, n_steps=2)]
    steps = collect_steps(trajs)
    for st, score in zip(steps, [1.0, -1.0, 1.0]):
        st.judgement = Judgement(votes=(1,), score=score)
    prm = build_samples(SIG["prm"], steps, trajs)
    assert [(s.group, s.step_index, s.advantages[0]) for s in prm] == \
        [("A", 0, pytest.approx(1.0, rel=1e-5)), ("A", 0, pytest.approx(-1.0, rel=1e-5)), ("A", 1, 1.0)]
    peered = SignalConfig("prm_peered", w_rl=1.0, w_opd=0.0, baseline="stepwise", opd_topk=0)
    assert [(s.step_index, s.advantages) for s in build_samples(peered, steps, trajs)] == \
        [(0, pytest.approx([1.0, 1.0], rel=1e-5)), (0, pytest.approx([-1.0, -1.0], rel=1e-5))]


def test_opd_uses_teacher_minus_old_and_drops_unhinted():
    trajs = [_traj("A", 0.0), _traj("A", 0.0)]
    steps = collect_steps(trajs)
    steps[0].teacher_logprobs = [-0.5, -1.0]  # old [-1, -2] -> advantages [0.5, 1.0]
    samples = build_samples(SIG["opd"], steps, trajs)
    assert len(samples) == 1 and samples[0].advantages == pytest.approx([0.5, 1.0])


def test_opd_positions_keeps_the_opd_term_on_the_first_tokens_only():
    trajs = [_traj("A", 0.0)]
    steps = collect_steps(trajs)
    steps[0].teacher_logprobs = [-0.5, -1.0]  # old [-1, -2]: every token [0.5, 1.0], the first only [0.5, 0]
    first = SignalConfig("opd", w_rl=0.0, w_opd=1.0, baseline="stepwise", opd_topk=0, opd_positions=1)
    assert build_samples(first, steps, trajs)[0].advantages == pytest.approx([0.5, 0.0])
    wide = SignalConfig("opd", w_rl=0.0, w_opd=1.0, baseline="stepwise", opd_topk=0, opd_positions=5)
    assert build_samples(wide, steps, trajs)[0].advantages == pytest.approx([0.5, 1.0])  # N past the reply: all
    steps[0].teacher_top = [[(-0.1, 5)], [(-0.2, 6)]]
    topk = SignalConfig("opd", w_rl=0.0, w_opd=1.0, baseline="stepwise", opd_topk=1, opd_positions=1)
    assert build_samples(topk, steps, trajs)[0].teacher_top == [[(-0.1, 5)]]
    with pytest.raises(ValueError, match="opd_positions"):
        SignalConfig("opd", w_rl=0.0, w_opd=1.0, baseline="stepwise", opd_topk=0, opd_positions=-1)


def test_combined_hint_only_score_only_and_both():
    trajs = [_traj("A", 0.0, n_steps=1), _traj("A", 0.0, n_steps=1), _traj("B", 0.0)]
    steps = collect_steps(trajs)
    steps[0].judgement = Judgement(score=1.0)
    steps[1].judgement = Judgement(score=-1.0)
    steps[1].teacher_logprobs = [-1.5, -1.0]
    steps[2].teacher_logprobs = [0.0, 0.0]  # B: single-entry bucket, R = 0 kept raw (score 0)
    samples = build_samples(SIG["prm_opd"], steps, trajs)
    by_group = [(s.group, s.advantages) for s in samples]
    # A: R = [1, -1] -> standardized [1, -1]; step 0 score only: [1, 1]
    # step 1 both: -1 + (teacher - old) = [-1 - 0.5, -1 + 1.0]
    # B: no score (R = 0) but a hint: OPD only: [0 - (-1), 0 - (-2)] = [1, 2]
    assert by_group[0] == ("A", pytest.approx([1.0, 1.0], abs=1e-5))
    assert by_group[1] == ("A", pytest.approx([-1.5, 0.0], abs=1e-5))
    assert by_group[2] == ("B", pytest.approx([1.0, 2.0], abs=1e-5))


def test_personal_baseline_none_uses_the_score_itself_and_masks_zeros():
    """The personal-agent variant: no outcome added, no standardization, 0-scored steps dropped."""
    personal = SignalConfig("prm", w_rl=1.0, w_opd=0.0, baseline="none", opd_topk=0)
    trajs = [_traj("A", 1.0), _traj("A", 0.0), _traj("A", 0.0)]
    steps = collect_steps(trajs)
    for st, score in zip(steps, [1.0, 0.0, -1.0]):
        st.judgement = Judgement(votes=(1,), score=score)
    assert [s.advantages for s in build_samples(personal, steps, trajs)] == [[1.0, 1.0], [-1.0, -1.0]]
    # combined: a 0-scored step with a hint is OPD only; a scored one adds both
    combined = SignalConfig("prm_opd", w_rl=1.0, w_opd=1.0, baseline="none", opd_topk=0)
    steps[1].teacher_logprobs = [-0.5, -1.5]  # old [-1, -2]: OPD [0.5, 0.5]
    steps[2].teacher_logprobs = [-1.0, -1.0]  # OPD [0, 1]; score -1
    assert [s.advantages for s in build_samples(combined, steps, trajs)] == \
           [[1.0, 1.0], pytest.approx([0.5, 0.5]), pytest.approx([-1.0, 0.0])]


def test_batch_baseline_centres_the_votes_on_the_updates_mean():
    """`baseline: batch`: the vote less the mean vote of the update's scored steps, so a batch of mostly
    failing steps pushes its few right ones up as hard as its many wrong ones down; 0-scored steps dropped."""
    centred = SignalConfig("prm", w_rl=1.0, w_opd=0.0, baseline="batch", opd_topk=0)
    trajs = [_traj("A", 1.0), _traj("A", 0.0), _traj("B", 0.0), _traj("B", 0.0), _traj("C", 0.0)]
    steps = collect_steps(trajs)
    for st, score in zip(steps, [1.0, -1.0, -1.0, -1.0, 0.0]):
        st.judgement = Judgement(votes=(1,), score=score)
    # scored: [1, -1, -1, -1], mean -0.5 -> [1.5, -0.5, -0.5, -0.5]; the 0-scored step is dropped
    got = [(s.group, s.advantages) for s in build_samples(centred, steps, trajs)]
    assert got == [("A", [1.5, 1.5]), ("A", [-0.5, -0.5]), ("B", [-0.5, -0.5]), ("B", [-0.5, -0.5])]
    # all scored alike: nothing to prefer, no sample
    for st in steps:
        st.judgement = Judgement(votes=(1,), score=-1.0)
    assert build_samples(centred, steps, trajs) == []


def test_grpo_baseline_adds_the_episodes_group_normalized_outcome_to_each_steps_vote():
    """`baseline: grpo`: A = GRPO outcome advantage of the step's episode + the step's vote, uncentred and
    unstandardized, so a group whose rollouts all failed still pushes its wrong steps down by their vote and
    a solved episode raises every step of it; a step whose sum is 0 is dropped."""
    grpo = SignalConfig("prm", w_rl=1.0, w_opd=0.0, baseline="grpo", opd_topk=0)
    trajs = [_traj("A", 1.0, n_steps=2), _traj("A", 0.0), _traj("B", 0.0), _traj("B", 0.0)]
    steps = collect_steps(trajs)
    for st, score in zip(steps, [1.0, 0.0, -1.0, -1.0, 0.0]):
        st.judgement = Judgement(votes=(1,), score=score)
    # group A: outcomes [1, 0] -> GRPO [+1, -1], on every step of each episode; group B all failed -> 0
    # A0 step 0: 1 + 1 = 2; A0 step 1: 1 + 0 = 1; A1: -1 - 1 = -2; B0: 0 - 1 = -1; B1: 0 + 0 -> dropped
    got = [(s.group, s.step_index, s.advantages[0]) for s in build_samples(grpo, steps, trajs)]
    assert got == [("A", 0, pytest.approx(2.0, rel=1e-5)), ("A", 1, pytest.approx(1.0, rel=1e-5)),
                   ("A", 0, pytest.approx(-2.0, rel=1e-5)), ("B", 0, -1.0)]
    # the group is every episode that ran, as for `outcome`: a solved one with no trainable step (its
    # replies kept no token ids) still makes its failed sibling's advantage -1
    trajs = [_traj("C", 1.0, n_steps=0), _traj("C", 0.0)]
    steps = collect_steps(trajs)
    steps[0].judgement = Judgement(votes=(0,), score=0.0)
    assert [s.advantages[0] for s in build_samples(grpo, steps, trajs)] == [pytest.approx(-1.0, rel=1e-5)]


def test_an_unknown_baseline_is_a_clear_error():
    with pytest.raises(ValueError, match="stepwise, none, batch or grpo"):
        SignalConfig("prm", w_rl=1.0, w_opd=0.0, baseline="group", opd_topk=0)


def test_topk_opd_carries_the_teachers_top_k_and_leaves_the_advantage_to_rl():
    """With signal.opd_topk the OPD term is a loss of its own: a hinted sample carries the teacher's
    top K per token and its weight, and its advantage holds only the RL part."""
    trajs = [_traj("A", 1.0), _traj("A", 0.0)]
    steps = collect_steps(trajs)
    top = [[(-0.1, 5), (-2.5, 9)], [(-0.2, 6), (-1.9, 4)]]
    for st, score in zip(steps, (1.0, -1.0)):
        st.judgement = Judgement(score=score)
        st.teacher_logprobs, st.teacher_top = [-0.5, -1.0], top
    cfg = SignalConfig("prm_opd", w_rl=1.0, w_opd=0.5, opd_topk=2, baseline="stepwise")
    samples = build_samples(cfg, steps, trajs)
    # R = outcome + score = [2, -1] -> standardized [+1, -1]; no log p_T - log p_old term
    assert [s.advantages for s in samples] == [pytest.approx([1.0, 1.0], abs=1e-5),
                                               pytest.approx([-1.0, -1.0], abs=1e-5)]
    assert all(s.teacher_top == top and s.opd_weight == 0.5 for s in samples)
    plain = build_samples(SIG["prm_opd"], steps, trajs)  # top-1: the teacher term is in the advantage
    assert plain[0].teacher_top is None and plain[0].advantages == pytest.approx([1.5, 2.0], abs=1e-5)
    with pytest.raises(ValueError, match="opd_topk"):
        SignalConfig("opd", w_rl=0.0, w_opd=1.0, opd_topk=-1, baseline="stepwise")


def test_topk_opd_loss_is_the_weighted_reverse_kl_averaged_over_all_samples():
    import torch

    from nextstate.types import Sample
    from trainers.losses import topk_reverse_kl
    from trainers.update import topk_opd_loss

    logp = torch.log_softmax(torch.tensor([[[2.0, 0.0, -1.0, 0.5]], [[0.0, 0.0, 0.0, 0.0]]]), -1)
    mask = torch.ones(2, 1, dtype=torch.bool)
    hinted = Sample([1], [0], [-1.0], [0.0], teacher_top=[[(-0.1, 1), (-3.0, 0)]], opd_weight=2.0)
    plain = Sample([1], [0], [-1.0], [0.0])
    loss = topk_opd_loss(logp, [hinted, plain], mask)
    kl = topk_reverse_kl(logp[:1], torch.tensor([[[-0.1, -3.0]]]), torch.tensor([[[1, 0]]]), mask[:1])
    assert float(kl) > 0.5  # the student's mode (id 0) is where the teacher puts little mass
    assert float(loss) == pytest.approx(2.0 * float(kl) / 2, rel=1e-6)  # weight 2, mean over 2 samples


def test_the_name_picks_the_function_so_it_cannot_disagree_with_what_trains():
    """A signal is its registered function: an outcome config with an OPD weight still trains outcome (no
    flag can make it read a teacher), and an unknown name is refused with the known ones."""
    trajs = [_traj("t", 1.0), _traj("t", 0.0)]
    steps = collect_steps(trajs)
    for st in steps:
        st.teacher_logprobs = [0.0] * len(st.response_ids)
    weighted = SignalConfig("outcome", w_rl=1.0, w_opd=1.0, baseline="stepwise", opd_topk=0)
    assert not weighted.needs_judge and not weighted.needs_hints
    assert [s.advantages for s in build_samples(weighted, steps, trajs)] == \
        [s.advantages for s in build_samples(SIG["outcome"], steps, trajs)]
    with pytest.raises(ValueError, match="must be one of outcome, prm, opd, prm_opd"):
        SignalConfig("grpo", w_rl=1.0, w_opd=0.0, baseline="stepwise", opd_topk=0)


def test_a_new_signal_is_one_registered_function_and_every_yaml_names_one():
    from nextstate.config import CONF_DIR
    from trainers.signals import register, signals

    @register("test_answer_only", needs_judge=True, needs_hints=False)
    def answer_only(cfg, steps, trajs):
        return []

    try:
        cfg = SignalConfig("test_answer_only", w_rl=1.0, w_opd=0.0, baseline="stepwise", opd_topk=0)
        assert cfg.needs_judge and build_samples(cfg, collect_steps([_traj("t", 1.0)]), []) == []
    finally:
        from trainers.signals import registry
        registry._REGISTERED.pop("test_answer_only")
    # every registered signal has its conf/signal/<name>.yaml, and every YAML (a variant such as
    # prm_votes too) picks a registered signal by its `name:`
    picks = {p.stem: yaml.safe_load(p.read_text())["name"] for p in (CONF_DIR / "signal").glob("*.yaml")
             if p.stem != "_base"}
    assert set(signals()) <= set(picks) and set(picks.values()) <= set(signals()), picks
