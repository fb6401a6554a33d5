"""The policy update: per-token logprobs of the exact sampled tokens under the current weights, the
PPO clipped surrogate (+ optional k3 KL to the reference), AdamW with gradient clipping."""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch

from nextstate.types import Sample
from trainers.losses import k3_kl, ppo_clipped_loss, topk_reverse_kl
from trainers.lr_schedule import warmup_factor


@dataclass
class UpdateConfig:
    lr: float
    weight_decay: float
    grad_clip: float
    epochs: int
    minibatch_size: int
    eps_low: float
    eps_high: float
    kl_coef: float
    rollout_temperature: float  # logprobs are taken of logits / temperature, as the rollout sampled them
    _: KW_ONLY
    lr_schedule: str = "constant"  # constant | linear | cosine (trainers/lr_schedule.py)
    lr_min_ratio: float = 0.1      # a decaying rate ends at lr * lr_min_ratio
    lr_warmup_steps: int = 0       # the run's first optimizer steps rise linearly to the rate (0: none)
    term_grad_norms: bool = False  # log each loss term's gradient norm (one extra backward per term)
    micro_batch_tokens: int = 0    # > 0: a minibatch's forward/backward in parts of at most this many tokens
    share_prompt_head: bool = False  # the tokens every row of a part starts with run once (sequence_logprobs)


def optimizer_steps(optimizer) -> int:
    """How many steps the optimizer has taken (Adam's own count, saved with its checkpoint); 0 when new."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p)
            if state and "step" in state:
                return int(state["step"])
    return 0


def _pad(rows: list[list[float]], width: int, value: float = 0.0) -> torch.Tensor:
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.float32)


def shared_rows(seqs: list[list[int]]) -> list[int]:
    """For each sequence, the index of the sequence whose row computes it: itself, or a longer one that
    it is a strict prefix of. A multi-step episode's step k (prompt + reply) is, token for token, the
    start of step k+1's prompt, so one forward pass of the last step gives every step's logprobs (causal
    attention: a position never sees what follows). Equal sequences keep their own rows."""
    host = list(range(len(seqs)))
    longest_first = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    rows: list[int] = []
    for i in longest_first:
        n = len(seqs[i])
        host[i] = next((r for r in rows if len(seqs[r]) > n and seqs[r][:n] == seqs[i]), i)
        if host[i] == i:
            rows.append(i)
    return host


def common_head(seqs: list[list[int]], rows: list[int], prompt_lens: list[int]) -> int:
    """How many leading tokens every row shares (a suite's system prompt and tool list), up to the
    shortest prompt less one, so that every response's first logit is computed after it."""
    first = seqs[rows[0]]
    n = min(min(prompt_lens) - 1, *(len(seqs[r]) for r in rows))
    for r in rows[1:]:
        other = seqs[r]
        k = 0
        while k < n and other[k] == first[k]:
            k += 1
        n = k
    return max(0, n)


def _decoder_hidden(model, ids: torch.Tensor, attn: torch.Tensor, head: int) -> torch.Tensor:
    """The decoder's last hidden states of the rows `ids` (right-padded, `attn` their mask). With
    `head` > 0 the first `head` tokens, the same in every row, run once as a batch of one and the
    rows attend to that one KV (expanded, so its gradient is the sum of every row's): the hidden
    states of positions >= `head` are returned, [rows, width - head, hidden]."""
    decoder = model.get_decoder()
    if head <= 0:
        return decoder(input_ids=ids, attention_mask=attn).last_hidden_state
    from transformers import DynamicCache

    rows, width = ids.shape
    shared = decoder(input_ids=ids[:1, :head], use_cache=True).cache
    cache = DynamicCache(config=model.config)
    for layer, kv in enumerate(shared.layers):
        cache.update(kv.keys.expand(rows, -1, -1, -1), kv.values.expand(rows, -1, -1, -1), layer)
    positions = torch.arange(head, width, device=ids.device).expand(rows, -1)
    return decoder(input_ids=ids[:, head:], attention_mask=attn, position_ids=positions,
                   cache=cache).last_hidden_state


def sequence_logprobs(model, samples: list[Sample], temperature: float = 1.0, *, full: bool = False,
                      share_prefixes: bool = False, share_head: bool = False) -> tuple[torch.Tensor, ...]:
    """log p(response token | prompt, earlier response tokens) for every sample: [B, T] and a mask
    (and with `full`, the whole [B, T, V] log-distribution at those positions, for top-K OPD).

    With `share_prefixes`, a sample that is a prefix of another is read from that one's row
    (`shared_rows`): the forward pass runs once per episode instead of once per step (the PPO update
    uses it; SFT keeps one row per sample, so its weights stay bit-for-bit what they were). Only the
    response positions go through the LM head (the vocabulary projection of every prompt position
    would cost far more memory than the whole forward pass). With `share_head`, the tokens every row
    starts with run once for all rows (`common_head`): the same values, up to float rounding."""
    seqs = [s.prompt_ids + s.response_ids for s in samples]
    host = shared_rows(seqs) if share_prefixes else list(range(len(seqs)))
    rows = sorted(set(host))
    row_of = {r: k for k, r in enumerate(rows)}
    width = max(len(seqs[r]) for r in rows)
    T = max(len(s.response_ids) for s in samples)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    for k, r in enumerate(rows):
        ids[k, : len(seqs[r])] = torch.tensor(seqs[r])
        attn[k, : len(seqs[r])] = 1
    flat = torch.zeros((len(seqs), T), dtype=torch.long)  # index into the [rows * width] positions
    target = torch.zeros((len(seqs), T), dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.bool)
    for i, s in enumerate(samples):
        n, p = len(s.response_ids), len(s.prompt_ids)
        flat[i, :n] = row_of[host[i]] * width + torch.arange(p - 1, p - 1 + n)
        target[i, :n] = torch.tensor(s.response_ids)
        mask[i, :n] = True
    device = next(model.parameters()).device
    ids, attn, flat, target, mask = (t.to(device) for t in (ids, attn, flat, target, mask))
    # (gradient checkpointing keeps no KV cache in training, so the head cannot be shared there)
    head = (common_head(seqs, rows, [len(s.prompt_ids) for s in samples])
            if share_head and len(rows) > 1 and not getattr(model, "is_gradient_checkpointing", False) else 0)
    hidden = _decoder_hidden(model, ids, attn, head)
    flat = (flat - head * (1 + flat // width)).clamp(min=0)  # into the [rows * (width - head)] positions after it
    h = hidden.reshape(-1, hidden.shape[-1])[flat]
    logits = model.get_output_embeddings()(h).float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, -1)
    lp = logp.gather(-1, target[..., None])[..., 0]
    return (lp, mask, logp) if full else (lp, mask)


def topk_opd_loss(logp: torch.Tensor, mb: list[Sample], mask: torch.Tensor) -> torch.Tensor:
    """w_opd * reverse KL(student || hinted teacher's top K + tail) over the samples that carry a
    teacher top K (top-K OPD); token-mean per sample, then the mean over all samples of the batch,
    so that one hinted sample among many weighs what it would as a PPO term."""
    B, T, _ = logp.shape
    K = max(len(row) for s in mb if s.teacher_top for row in s.teacher_top)
    t_lp = torch.zeros((B, T, K))
    t_ids = torch.zeros((B, T, K), dtype=torch.long)
    rows = torch.zeros((B, T), dtype=torch.bool)
    weight = torch.zeros(B)
    for i, s in enumerate(mb):
        if not s.teacher_top:
            continue
        weight[i] = s.opd_weight
        for t, top in enumerate(s.teacher_top[:T]):
            if len(top) == K:
                t_lp[i, t] = torch.tensor([p for p, _ in top])
                t_ids[i, t] = torch.tensor([k for _, k in top])
                rows[i, t] = True
    device = logp.device
    rows = rows.to(device) & mask
    kl = topk_reverse_kl(logp, t_lp.to(device), t_ids.to(device), rows)
    per_sample = kl.sum(-1) / rows.sum(-1).clamp(min=1)
    return (weight.to(device) * per_sample).mean()


def backward_by_term(terms: dict[str, torch.Tensor], params: list[torch.Tensor]) -> dict[str, float]:
    """Accumulate the gradient of the sum of `terms` into `params`' .grad, one term at a time, and
    return each term's own gradient norm (before clipping): which term moves the policy, which the
    summed loss cannot say (at ratio 1 the PPO term's value is ~0 while its gradient is not)."""
    norms = {}
    live = {k: t for k, t in terms.items() if t.requires_grad}
    for i, (name, term) in enumerate(live.items()):
        grads = torch.autograd.grad(term, params, retain_graph=i < len(live) - 1, allow_unused=True)
        sq = 0.0
        for p, g in zip(params, grads):
            if g is None:
                continue
            sq += float(g.detach().pow(2).sum())
            p.grad = g if p.grad is None else p.grad + g
        norms[name] = sq ** 0.5
    return norms


def micro_batches(samples: list[Sample], max_tokens: int) -> list[list[Sample]]:
    """`samples` in parts whose padded rows hold at most `max_tokens` tokens (one part when 0). The
    steps of one episode stay together, so that each part still reads them from one row
    (`shared_rows`); a row longer than the budget is a part of its own."""
    if max_tokens <= 0 or not samples:
        return [samples]
    seqs = [s.prompt_ids + s.response_ids for s in samples]
    host = shared_rows(seqs)
    groups: dict[int, list[int]] = {}
    for i, h in enumerate(host):
        groups.setdefault(h, []).append(i)
    parts, part, width = [], [], 0
    for h in sorted(groups, key=lambda r: -len(seqs[r])):  # longest first: padding stays small
        new_width = max(width, len(seqs[h]))
        rows = sum(1 for i in part if host[i] == i) + 1
        if part and new_width * rows > max_tokens:
            parts.append(part)
            part, new_width = [], len(seqs[h])
        part = part + groups[h]
        width = new_width
    parts.append(part)
    return [[samples[i] for i in sorted(p)] for p in parts]


def _losses(model, mb: list[Sample], cfg: UpdateConfig, device) -> tuple[dict[str, torch.Tensor], dict]:
    """The loss terms of one forward pass over `mb`: PPO's clipped surrogate, top-K OPD, k3 KL."""
    topk = any(s.teacher_top for s in mb)
    lp, mask, *logp = sequence_logprobs(model, mb, cfg.rollout_temperature, full=topk, share_prefixes=True,
                                        share_head=cfg.share_prompt_head)
    T = lp.shape[1]
    old = _pad([s.old_logprobs for s in mb], T).to(device)
    adv = _pad([s.advantages for s in mb], T).to(device)
    pg_loss, pg = ppo_clipped_loss(lp, old, adv, mask, eps_low=cfg.eps_low, eps_high=cfg.eps_high)
    opd_kl = topk_opd_loss(logp[0], mb, mask) if topk else torch.zeros(())
    kl = torch.zeros(())
    if cfg.kl_coef > 0:
        ref = _pad([s.ref_logprobs or s.old_logprobs for s in mb], T).to(device)
        kl = k3_kl(lp, ref, mask)
    return {"pg": pg_loss, "opd_topk": opd_kl, "kl": kl}, pg


def ppo_update(model, optimizer, samples: list[Sample], cfg: UpdateConfig,
               generator: torch.Generator | None = None, lr: float | None = None) -> dict:
    """`epochs` passes over the samples in shuffled minibatches; one optimizer step per minibatch, at
    rate `lr` (the schedule's rate of this update; default `cfg.lr`), scaled down over the run's first
    `cfg.lr_warmup_steps` optimizer steps (counted by the optimizer's state, so a resumed run goes on)."""
    if not samples:
        return {"loss": 0.0, "updates": 0}
    rate = cfg.lr if lr is None else lr
    model.train()
    device = next(model.parameters()).device
    stats = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "opd_topk_kl": 0.0, "clip_fraction": 0.0, "approx_kl": 0.0,
             "grad_norm": 0.0, "lr": 0.0, "updates": 0}
    # Mean loss of each pass over the same samples: with more than one epoch, the last epoch's loss
    # minus the first one's is what the earlier steps did to the objective on this very batch (the
    # regression check's "the update lowers its loss"; one epoch of a single minibatch starts at ratio 1).
    epoch_losses: list[float] = []
    for _ in range(cfg.epochs):
        epoch_sum, epoch_n = 0.0, 0
        order = torch.randperm(len(samples), generator=generator).tolist()
        for start in range(0, len(order), cfg.minibatch_size):
            mb = [samples[i] for i in order[start: start + cfg.minibatch_size]]
            optimizer.zero_grad(set_to_none=True)
            params = [p for p in model.parameters() if p.requires_grad]
            parts = micro_batches(mb, 0 if cfg.term_grad_norms else cfg.micro_batch_tokens)
            n_tokens = sum(len(s.response_ids) for s in mb)
            mb_stats = {k: 0.0 for k in ("loss", "pg_loss", "kl", "opd_topk_kl", "clip_fraction", "approx_kl")}
            for part in parts:
                # every loss is a mean over samples: a part weighs its share of them, and the parts'
                # gradients add up to the minibatch's own
                w = len(part) / len(mb)
                terms, pg = _losses(model, part, cfg, device)
                loss = terms["pg"] + terms["opd_topk"] + cfg.kl_coef * terms["kl"]
                if cfg.term_grad_norms:  # (one part: the whole minibatch)
                    weighted = {"pg": terms["pg"], "opd_topk": terms["opd_topk"], "kl": cfg.kl_coef * terms["kl"]}
                    for name, norm in backward_by_term(weighted, params).items():
                        stats[f"grad_norm_{name}"] = stats.get(f"grad_norm_{name}", 0.0) + norm
                else:
                    (w * loss).backward()
                tw = sum(len(s.response_ids) for s in part) / max(1, n_tokens)  # token-weighted, as one pass
                mb_stats["loss"] += w * float(loss.detach())
                mb_stats["pg_loss"] += w * float(terms["pg"].detach())
                mb_stats["kl"] += w * float(terms["kl"].detach())
                mb_stats["opd_topk_kl"] += w * float(terms["opd_topk"].detach())
                mb_stats["clip_fraction"] += tw * float(pg["clip_fraction"])
                mb_stats["approx_kl"] += tw * float(pg["approx_kl"])
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            step_lr = rate * warmup_factor(optimizer_steps(optimizer), cfg.lr_warmup_steps)
            for group in optimizer.param_groups:
                group["lr"] = step_lr
            optimizer.step()
            stats["lr"] += step_lr
            for k, v in mb_stats.items():
                stats[k] += v
            stats["grad_norm"] += float(grad_norm)
            stats["updates"] += 1
            epoch_sum, epoch_n = epoch_sum + mb_stats["loss"], epoch_n + 1
        epoch_losses.append(epoch_sum / max(1, epoch_n))
    n = max(1, stats["updates"])
    out = {k: (v / n if k != "updates" else v) for k, v in stats.items()}
    out["loss_first_epoch"], out["loss_last_epoch"] = epoch_losses[0], epoch_losses[-1]
    return out
