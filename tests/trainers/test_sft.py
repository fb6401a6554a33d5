"""SFT warm start: behaviour cloning lowers the loss on the train split and never sees test tasks."""
from pathlib import Path

import pytest

from agents.serving.chat import render_prompt_ids
from envs.task_formats import load_suite
from nextstate.types import NextState, Step, Trajectory
from tests.paths import ROOT
from trainers.sft import SFTConfig, mean_nll, sft_samples, sft_train
from trainers.sft_run import SplitLeakError, oracle_trajectories

SUITE = load_suite(ROOT / "envs" / "tasks" / "terminal")


def test_sft_refuses_test_tasks():
    with pytest.raises(SplitLeakError, match="non-train"):
        oracle_trajectories(pool=None, tasks=[t for t in SUITE if t.split == "test"][:1], system_prompt="",
                            seed=0, parallel=1, progress=False)


@pytest.mark.slow
@pytest.mark.model
def test_sft_lowers_train_loss_and_masks_the_prompt(cfg, capsys):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agents.factory import model_path
    from nextstate.config import ModelConfig, typed

    path = model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir)
    tok = AutoTokenizer.from_pretrained(path)
    trajs = []
    for task in [t for t in SUITE if t.split == "train"][:4]:
        msgs = [{"role": "system", "content": "Run commands."}, {"role": "user", "content": task.instruction}]
        reply = "```bash\n" + Path(task.data["solution"]).read_text().strip()[:300] + "\n```"
        trajs.append(Trajectory(task.task_id, "terminal", steps=[Step(0, msgs, reply, NextState("terminal", ""))]))
    samples = sft_samples(trajs, tok, lambda _: None, render_prompt_ids)
    assert len(samples) == 4
    s = samples[0]
    assert s.prompt_ids == render_prompt_ids(tok, trajs[0].steps[0].prompt_messages)  # exactly what the policy sees
    assert s.response_ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")  # it learns to stop
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path)
    before = mean_nll(model, samples)
    capsys.readouterr()
    losses = sft_train(model, samples, SFTConfig("sft", 2, 5e-5, 4, 1.0, None), seed=0, progress=False)
    assert "sft epoch" not in capsys.readouterr().err  # progress=false: no bar in a run's log
    after = mean_nll(model, samples)
    assert after < before * 0.9, (before, after, losses)
