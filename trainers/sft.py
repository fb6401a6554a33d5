"""Behaviour cloning on oracle trajectories: the warm start the paper also uses for its tool-call
runs. Only the agent's tokens are trained (the prompt is masked out), and the response ends with the
template's end-of-turn token so the model learns to stop."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from agents.serving.chat import render_prompt_ids
from nextstate.types import Sample, Step, Trajectory
from trainers.feedback.model_judge import render


@dataclass
class SFTConfig:
    name: str
    epochs: int
    lr: float
    batch_size: int
    grad_clip: float
    eval_limit: int | None
    threads: int | None = None


def end_of_turn_ids(tokenizer) -> list[int]:
    """What ends a cloned response: the chat template's end-of-turn token, else EOS."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return [end] if isinstance(end, int) and end >= 0 else [tokenizer.eos_token_id]


def sft_samples(trajs: list[Trajectory], tokenizer, tools_of, render) -> list[Sample]:
    """One sample per oracle step: the exact prompt the policy would see and the reference reply."""
    end_ids = end_of_turn_ids(tokenizer)
    out = []
    for t in trajs:
        for s in t.steps:
            prompt = render(tokenizer, s.prompt_messages, tools_of(t.task_id))
            resp = tokenizer.encode(s.action_text, add_special_tokens=False) + end_ids
            out.append(Sample(prompt, resp, [0.0] * len(resp), [1.0] * len(resp), t.task_id, s.index))
    return out


def sft_loss(model, batch: list[Sample]) -> torch.Tensor:
    """Mean negative log-likelihood of the response tokens (token-mean within a sample, then mean
    over samples, as the RL losses aggregate)."""
    from trainers.masked import masked_sample_mean
    from trainers.update import sequence_logprobs

    lp, mask = sequence_logprobs(model, batch, 1.0)
    return -masked_sample_mean(lp, mask)


def sft_train(model, samples: list[Sample], cfg: SFTConfig, seed: int, log=None, progress: bool = True) -> list[float]:
    """Epochs of shuffled minibatches; returns the mean loss of each epoch. `progress=False` (a run's
    `progress=false`) keeps the bar out of logs that are not a terminal."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    g = torch.Generator().manual_seed(seed)
    model.train()
    losses = []
    for epoch in range(cfg.epochs):
        order = torch.randperm(len(samples), generator=g).tolist()
        total, n = 0.0, 0
        with tqdm(total=len(order), desc=f"sft epoch {epoch + 1}/{cfg.epochs}", unit="sample", leave=False,
                  disable=not progress) as bar:
            for i in range(0, len(order), cfg.batch_size):
                batch = [samples[j] for j in order[i: i + cfg.batch_size]]
                loss = sft_loss(model, batch)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                opt.step()
                total, n = total + float(loss.detach()) * len(batch), n + len(batch)
                bar.update(len(batch))
                bar.set_postfix(loss=f"{total / n:.4f}")
        losses.append(total / max(1, n))
        if log:
            log(epoch, losses[-1])
    return losses


@torch.no_grad()
def mean_nll(model, samples: list[Sample], batch_size: int = 8) -> float:
    model.eval()
    total = 0.0
    for i in range(0, len(samples), batch_size):
        batch = samples[i: i + batch_size]
        total += float(sft_loss(model, batch)) * len(batch)
    return total / max(1, len(samples))


def fine_tune(init_path: Path, tokenizer, samples: list[Sample], cfg: SFTConfig, seed: int, out_dir: Path,
              tag: str, progress: bool = True) -> tuple[float, float, list[float]]:
    """Behaviour cloning of the model at `init_path` on `samples`, saved with its tokenizer to
    `out_dir`. Returns (NLL before, NLL after, each epoch's mean loss); prints the epochs as `[tag]`."""
    from transformers import AutoModelForCausalLM

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(init_path)
    nll_before = mean_nll(model, samples)
    losses = sft_train(model, samples, cfg, seed,
                       log=lambda e, loss: print(f"[{tag}] epoch {e + 1}/{cfg.epochs}: loss {loss:.4f}"),
                       progress=progress)
    nll_after = mean_nll(model, samples)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return nll_before, nll_after, losses


def prompt_sample(tokenizer, system: str, template: str, step: Step, answer: str, end_ids: list[int],
                  tag: str) -> Sample:
    """The prompt the model judge (or hinter) sends for `step`, answered by `answer`: what mode=sft_judge clones."""
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": render(template, step)}]
    resp = tokenizer.encode(answer, add_special_tokens=False) + end_ids
    return Sample(render_prompt_ids(tokenizer, msgs), resp, [0.0] * len(resp), [1.0] * len(resp), tag, 0)
