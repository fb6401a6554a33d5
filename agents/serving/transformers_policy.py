"""In-process transformers backend: batched sampling that keeps the sampled token ids and their
logprobs (token-in/token-out), and scoring of a given response under a given prompt."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from agents.serving.chat import render_prompt_ids, stop_token_ids
from agents.serving.prefix_cache import PrefixCache
from nextstate.types import Generation


@dataclass(frozen=True)
class SamplingConfig:
    max_new_tokens: int
    temperature: float
    top_p: float
    max_prompt_tokens: int
    ignore_eos: bool = False  # generate exactly max_new_tokens (benchmarks)
    stop: tuple[str, ...] = ()  # a row ends once its text contains one of these (kept in its tokens and text)


def stop_strings(value) -> tuple[str, ...]:
    """A request's `stop` (a string or a list of them, OpenAI's and SGLang's shape) as the tuple
    `SamplingConfig.stop` takes; ValueError when it is neither."""
    stop = [value] if isinstance(value, str) else (value or [])
    if not (isinstance(stop, (list, tuple)) and all(isinstance(x, str) and x for x in stop)):
        raise ValueError("stop must be a non-empty string or a list of them")
    return tuple(stop)


def seed_of(value, name: str = "seed") -> int | None:
    """A request's seed (None: unseeded); ValueError naming the field when it is not an integer."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


# Above this size (batch x width x vocabulary float32 logits) `input_logprobs` runs the LM head row by
# row on the positions it reads: a batch of 16 multi-step episodes (~1,000 tokens each) would otherwise
# hold 3 GB of logits and as much again in their log-softmax (a KL-reference server was killed for memory
# at 15 GB). Below it, one batched LM head, as the OPD teacher's scoring of short prompts always ran.
LOGITS_BATCH_BYTES = 1 << 30


class TransformersPolicy:
    name = "transformers"

    def __init__(self, model, tokenizer, sampling: SamplingConfig, *, model_name: str, seed: int = 0):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.model_name = model_name
        self.generator = torch.Generator().manual_seed(seed)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else tokenizer.eos_token_id
        self.prefix_cache: PrefixCache | None = None  # enable_prefix_cache(); off: every prompt is prefilled
        self.stop_ids = stop_token_ids(tokenizer)

    @classmethod
    def load(cls, path, sampling: SamplingConfig, *, model_name: str, seed: int = 0,
             dtype: str = "float32", threads: int | None = None) -> "TransformersPolicy":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
        return cls(model, tok, sampling, model_name=model_name, seed=seed)

    # -- Policy -----------------------------------------------------------------------------------
    def generate(self, conversations, *, tools=None, seeds: list[int] | None = None) -> list[Generation]:
        prompts = [self._fit(render_prompt_ids(self.tokenizer, msgs, tools)) for msgs in conversations]
        outs = self.sample_ids(prompts, seeds=seeds)
        return [Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True), token_ids=ids,
                           logprobs=lps, prompt_token_ids=p, finish_reason=fin)
                for p, (ids, lps, fin) in zip(prompts, outs)]

    @torch.inference_mode()
    def score(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        """log p(response token | prompt, earlier response tokens), at temperature 1."""
        ids = torch.tensor([prompt_ids + response_ids])
        logits = self.model(input_ids=ids).logits[0, len(prompt_ids) - 1: -1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(response_ids)[:, None])[:, 0]
        return lp.tolist()

    @torch.inference_mode()
    def input_logprobs(self, sequences: list[list[int]], starts: list[int], top_k: int = 0):
        """For each sequence, log p(token_t | tokens_<t) for t >= start (None for t = 0), and with
        top_k > 0 also the top-k (logprob, id) pairs at each of those positions. One padded batch;
        with the prefix cache on, a cached prefix before `start - 1` is not computed again (a teacher
        prompt shares the rollout's prompt up to the hint)."""
        starts = [max(0, min(start, len(s))) for s, start in zip(sequences, starts)]
        limits = [max(0, start - 1) for start in starts]
        input_ids, attn, positions, past = self._prefill_inputs(sequences, limits)
        width = input_ids.shape[1]
        batched = len(sequences) * width * self.model.config.vocab_size * 4 <= LOGITS_BATCH_BYTES
        if batched:
            logits = self.model(input_ids=input_ids, attention_mask=attn, position_ids=positions, cache=past).logits
            logp = torch.log_softmax(logits.float(), -1)
        else:  # the whole batch's log-distribution would not fit: the LM head row by row, where read
            hidden = self.model.get_decoder()(input_ids=input_ids, attention_mask=attn, position_ids=positions,
                                              cache=past).last_hidden_state
            head = self.model.get_output_embeddings()
        out = []
        for i, (s, start) in enumerate(zip(sequences, starts)):
            offset = width - len(s)  # column of absolute position t is offset + t (right-aligned)
            first = 0 if batched else offset + max(start - 1, 0)  # the first column this row reads
            row_logp = logp[i] if batched else torch.log_softmax(head(hidden[i, first:]).float(), -1)
            lps: list[float | None] = []
            tops = []
            for t in range(start, len(s)):
                if t == 0:
                    lps.append(None)
                    tops.append([])
                    continue
                row = row_logp[offset + t - 1 - first]
                lps.append(float(row[s[t]]))
                if top_k:
                    v, k = row.topk(top_k)
                    tops.append(list(zip(v.tolist(), k.tolist())))
            out.append((lps, tops))
        return out

    def load_weights(self, path) -> None:
        """Replace the weights in place from a safetensors checkpoint dir (weight sync)."""
        from pathlib import Path

        from safetensors.torch import load_file

        state: dict = {}
        for f in sorted(Path(path).glob("*.safetensors")):
            state.update(load_file(str(f)))
        if not state:
            raise FileNotFoundError(f"no *.safetensors in {path}")
        if self.model.config.tie_word_embeddings:  # a tied pair may be stored under either name
            emb = self.model.get_input_embeddings().weight
            tied = [n for n, p in self.model.named_parameters(remove_duplicate=False) if p is emb]
            have = next((state[n] for n in tied if n in state), None)
            if have is not None:
                state.update({n: have for n in tied})
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ValueError(f"weights in {path} do not fit the model: missing={missing[:5]} "
                             f"unexpected={unexpected[:5]}")
        if self.prefix_cache is not None:  # KV of the old weights
            self.prefix_cache.clear()

    def enable_prefix_cache(self, max_tokens: int) -> None:
        self.prefix_cache = PrefixCache(max_tokens) if max_tokens > 0 else None

    # -- sampling ---------------------------------------------------------------------------------
    def _fit(self, ids: list[int]) -> list[int]:
        """Keep the prompt's tail when it is longer than the budget (the system prompt is the head,
        but the latest next state matters most for the next action)."""
        budget = self.sampling.max_prompt_tokens
        return ids if len(ids) <= budget else ids[-budget:]

    @torch.inference_mode()
    def sample_ids(self, prompts: list[list[int]], sampling: SamplingConfig | None = None,
                   seeds: list[int | torch.Generator | None] | None = None,
                   on_token: Callable[[int, int], None] | None = None, *, limits: list[int] | None = None,
                   preempt: Callable[[], bool] | None = None) -> list[tuple[list[int], list[float], str | None]]:
        """Batched sampling with a KV cache and left padding. The recorded logprob is the one of
        the distribution actually sampled from (logits / temperature; raw logits when greedy).
        A row with a seed draws from its own generator, so its sample does not depend on what else
        is in the batch or on earlier requests (resumed runs take the same next step); a generator
        given instead of a seed goes on from where it is (a reply sampled in several calls).
        `on_token(row, token_id)` hears each kept token as it is sampled (for streaming).
        `limits`: each row's own max_new_tokens (default: the sampling's). `preempt()`, asked after
        each step, may end the call early: the rows not yet finished then have finish reason None
        (the batcher carries them on in a later call, agents/serving/batcher.py)."""
        s = sampling or self.sampling
        gens = [sd if isinstance(sd, torch.Generator) else
                torch.Generator().manual_seed(int(sd)) if sd is not None else self.generator
                for sd in (seeds or [None] * len(prompts))]
        batch = len(prompts)
        limits = limits or [s.max_new_tokens] * batch
        if max(limits) <= 0:
            return [([], [], "length") for _ in prompts]
        unique = [list(u) for u in dict.fromkeys(map(tuple, prompts))]  # a GRPO group: one prompt G times
        input_ids, attn, positions, past = self._prefill_inputs(unique)
        out = self.model(input_ids=input_ids, attention_mask=attn, position_ids=positions, cache=past, use_cache=True)
        past, logits = out.cache, out.logits[:, -1].float()
        if self.prefix_cache is not None:
            self._remember(unique, attn, past)
        if len(unique) < batch:  # each prompt was prefilled once; now one row per request again
            rows = torch.tensor([unique.index(p) for p in prompts])
            past.batch_select_indices(rows)
            logits, attn, positions = logits[rows], attn[rows], positions[rows]
        next_pos = positions[:, -1:] + 1
        tokens: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        finish: list[str | None] = [None if n > 0 else "length" for n in limits]
        done = torch.tensor([f is not None for f in finish])
        stop = torch.tensor(sorted(self.stop_ids))
        for _ in range(max(limits)):
            chosen, chosen_lp = self._pick(logits, s, gens)
            stopped = torch.zeros_like(done) if s.ignore_eos else torch.isin(chosen, stop)
            for i in range(batch):
                if done[i]:
                    continue
                tokens[i].append(int(chosen[i]))
                logprobs[i].append(float(chosen_lp[i]))
                if stopped[i]:  # the stop token ends the reply's tokens (not its text): it is trained too
                    finish[i] = "stop"
                    continue
                if on_token is not None:
                    on_token(i, tokens[i][-1])
                if s.stop and self._says_stop(tokens[i], s.stop):
                    stopped[i], finish[i] = True, "stop"
                elif len(tokens[i]) >= limits[i]:
                    stopped[i], finish[i] = True, "length"
            done |= stopped
            if bool(done.all()) or (preempt is not None and preempt()):
                break
            attn = torch.cat([attn, torch.ones((batch, 1), dtype=torch.long)], dim=1)
            out = self.model(input_ids=chosen[:, None], attention_mask=attn, position_ids=next_pos,
                             cache=past, use_cache=True)
            past, logits = out.cache, out.logits[:, -1].float()
            next_pos = next_pos + 1
        return [(tokens[i], logprobs[i], finish[i]) for i in range(batch)]

    def _says_stop(self, ids: list[int], stop: tuple[str, ...]) -> bool:
        """Whether the reply so far contains a stop string (decoded whole: a string may span tokens,
        and ~0.1 ms per token is nothing next to a forward pass)."""
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return any(st in text for st in stop)

    def _prefill_inputs(self, prompts: list[list[int]], limits: list[int] | None = None):
        """Left-padded suffixes after each prompt's cached prefix, and the cached KV as a batched
        cache in front of them (each row's prefix right-aligned, padding masked out). Positions
        count only real tokens, so a row's layout does not change what it computes."""
        batch = len(prompts)
        limits = limits or [None] * batch
        cached = ([self.prefix_cache.match(p, lim) for p, lim in zip(prompts, limits)]
                  if self.prefix_cache is not None else [(0, None)] * batch)
        reused = [n for n, _ in cached]
        width = max(len(p) - n for p, n in zip(prompts, reused))
        input_ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((batch, width), dtype=torch.long)
        for i, (p, n) in enumerate(zip(prompts, reused)):
            input_ids[i, width - (len(p) - n):] = torch.tensor(p[n:])
            attn[i, width - (len(p) - n):] = 1
        past, longest = None, max(reused)
        if longest:
            from transformers import DynamicCache

            past = DynamicCache(config=self.model.config)
            template = next(kv for _, kv in cached if kv is not None)
            for layer, (k0, v0) in enumerate(template):
                keys = k0.new_zeros((batch, k0.shape[0], longest, k0.shape[2]))
                values = v0.new_zeros((batch, v0.shape[0], longest, v0.shape[2]))
                for i, (n, kv) in enumerate(cached):
                    if n:
                        keys[i, :, longest - n:], values[i, :, longest - n:] = kv[layer]
                past.update(keys, values, layer)
            past_mask = torch.zeros((batch, longest), dtype=torch.long)
            for i, n in enumerate(reused):
                past_mask[i, longest - n:] = 1
            attn = torch.cat([past_mask, attn], dim=1)
        positions = (attn.cumsum(-1) - 1).clamp(min=0)[:, -width:]
        if self.prefix_cache is not None:
            self.prefix_cache.record(hit=sum(reused), miss=sum(len(p) for p in prompts) - sum(reused))
        return input_ids, attn, positions, past

    def _remember(self, prompts: list[list[int]], attn: torch.Tensor, cache) -> None:
        """Store each prompt's KV (its unmasked positions) right after the prefill."""
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        for i, p in enumerate(prompts):
            if p in self.prefix_cache:  # a GRPO group sends one prompt several times
                continue
            keep = attn[i].nonzero()[:, 0]
            self.prefix_cache.put(p, [(k[i].index_select(1, keep), v[i].index_select(1, keep)) for k, v in layers])

    @staticmethod
    def _pick(logits: torch.Tensor, s: SamplingConfig, gens) -> tuple[torch.Tensor, torch.Tensor]:
        if s.temperature <= 0:
            lp = torch.log_softmax(logits, -1)
            chosen = lp.argmax(-1)
            return chosen, lp.gather(-1, chosen[:, None])[:, 0]
        lp = torch.log_softmax(logits / s.temperature, -1)
        probs = lp.exp()
        if s.top_p < 1.0:
            sorted_p, order = probs.sort(-1, descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < s.top_p
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p * keep)
        chosen = torch.stack([torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(gens)])
        return chosen, lp.gather(-1, chosen[:, None])[:, 0]
