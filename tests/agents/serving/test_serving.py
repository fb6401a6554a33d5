"""The embedded server's endpoints over real HTTP, and the client that talks to it (the same client
talks to a real SGLang server). Token-in/token-out alignment is proven here."""
import json

import pytest
import requests

from agents.factory import model_path
from agents.serving.transformers_policy import SamplingConfig
from nextstate.config import ModelConfig, typed

pytestmark = pytest.mark.model


def _post(policy, route, body):
    return requests.post(policy.url + route, json=body, headers=policy.headers, timeout=300)


def test_health_and_model_info(served):
    assert requests.get(served.url + "/health", timeout=10).status_code == 200
    info = requests.get(served.url + "/get_model_info", headers=served.headers, timeout=10).json()
    assert info["weight_version"] == 0 and info["model_path"]


def test_generate_text_and_ids(served):
    r = _post(served, "/generate", {"text": "The capital of France is",
                                    "sampling_params": {"max_new_tokens": 5, "temperature": 0}})
    out = r.json()
    assert r.status_code == 200 and out["meta_info"]["completion_tokens"] == len(out["output_ids"]) <= 5
    ids = served.tokenizer.encode("The capital of France is", add_special_tokens=False)
    out2 = _post(served, "/generate", {"input_ids": [ids, ids], "return_logprob": True,
                                       "sampling_params": {"max_new_tokens": 5, "temperature": 0}}).json()
    assert isinstance(out2, list) and len(out2) == 2
    assert out2[0]["output_ids"] == out["output_ids"]  # text in = the same ids in
    assert [t for _, t, _ in out2[0]["meta_info"]["output_token_logprobs"]] == out2[0]["output_ids"]


def test_token_in_token_out_alignment(served):
    """Teacher scoring of a response under a new context uses the sampled ids themselves (no
    re-tokenization), and scoring under the original context reproduces the rollout logprobs."""
    msgs = [{"role": "user", "content": "Write a shell command that lists files."}]
    s = SamplingConfig(24, 1.0, 1.0, 2048)
    gen = served.generate([msgs], sampling=s, seeds=[123])[0]
    assert gen.token_ids and len(gen.logprobs) == len(gen.token_ids)
    again = served.generate([msgs], sampling=s, seeds=[123])[0]
    assert again.token_ids == gen.token_ids  # a seeded request replays exactly
    (lps, _), = served.score_many([(gen.prompt_token_ids, gen.token_ids)])
    assert max(abs(a - b) for a, b in zip(lps, gen.logprobs)) < 1e-3
    hint = "\n\n[user's hint / instruction]\nUse ls -la."
    hinted = served.prompt_ids([{"role": "user", "content": msgs[0]["content"] + hint}])
    body = {"input_ids": hinted + gen.token_ids, "return_logprob": True, "logprob_start_len": len(hinted),
            "sampling_params": {"max_new_tokens": 0}}
    out = _post(served, "/generate", body).json()
    scored_ids = [t for _, t, _ in out["meta_info"]["input_token_logprobs"]]
    assert scored_ids == gen.token_ids  # exactly the sampled tokens, aligned one to one
    assert out["output_ids"] == []


def test_seeds_go_as_sglang_takes_them_one_sampling_params_object_per_prompt(served):
    """SGLang's `sampling_seed` is one integer; a batch with a seed per prompt sends a list of
    `sampling_params` objects. The server takes that form, and refuses a list where an integer goes."""
    from agents.serving.http_policy import HTTPPolicy

    s = SamplingConfig(6, 1.0, 1.0, 2048)
    wire = HTTPPolicy._sampling_params(s, [5, None])
    assert [w.get("sampling_seed") for w in wire] == [5, None] and wire[0]["max_new_tokens"] == 6
    msgs = [{"role": "user", "content": "Say a word."}]
    a, b, a2 = served.generate([msgs, msgs, msgs], sampling=s, seeds=[11, 12, 11])
    assert a.token_ids == a2.token_ids  # each prompt sampled with its own seed
    prompt = served.prompt_ids(msgs)
    two = _post(served, "/generate", {"input_ids": [prompt, prompt], "sampling_params": [
        {"max_new_tokens": 2, "temperature": 0}, {"max_new_tokens": 5, "temperature": 0}]}).json()
    assert [len(o["output_ids"]) for o in two] == [2, 5]
    for bad, why in (({"sampling_seed": [1, 2]}, "must be an integer"), ([{"max_new_tokens": 2}], "one per prompt")):
        r = _post(served, "/generate", {"input_ids": [prompt, prompt], "sampling_params": bad})
        assert r.status_code == 400 and why in r.text


def test_top_logprobs(served):
    ids = served.tokenizer.encode("one two three four", add_special_tokens=False)
    out = _post(served, "/generate", {"input_ids": ids, "return_logprob": True, "logprob_start_len": 1,
                                      "top_logprobs_num": 5, "sampling_params": {"max_new_tokens": 0}}).json()
    tops = out["meta_info"]["input_top_logprobs"]
    assert len(tops) == len(ids) - 1 and all(len(row) == 5 for row in tops)
    assert all(row[0][0] >= row[-1][0] for row in tops)


def test_chat_completions(served):
    out = _post(served, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                  "max_tokens": 8, "temperature": 0, "logprobs": True}).json()
    assert out["object"] == "chat.completion" and out["choices"][0]["message"]["role"] == "assistant"
    assert out["usage"]["completion_tokens"] == len(out["choices"][0]["logprobs"]["content"])


def test_bad_requests_get_clear_errors(served):
    r = requests.post(served.url + "/generate", data=b"{not json", headers=served.headers, timeout=10)
    assert r.status_code == 400 and "error" in r.json()
    r = _post(served, "/generate", {"sampling_params": {}})
    assert r.status_code == 400 and "text" in r.json()["error"]["message"]
    r = _post(served, "/generate", {"input_ids": ["a"]})
    assert r.status_code == 400
    r = _post(served, "/update_weights_from_disk", {"model_path": "/nonexistent"})
    assert r.status_code == 500 and "safetensors" in r.json()["error"]["message"]
    assert requests.get(served.url + "/health", timeout=10).status_code == 200  # still up


def test_update_weights_from_disk_changes_the_served_model(served, tmp_path, cfg):
    from safetensors.torch import load_file, save_file

    src = model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir)
    state = load_file(str(src / "model.safetensors"))
    ids = served.tokenizer.encode("hello world", add_special_tokens=False)
    before = served.score(ids[:1], ids[1:])
    state["model.norm.weight"] = state["model.norm.weight"] * 0.5  # a visible change
    save_file(state, str(tmp_path / "model.safetensors"))
    out = served.update_weights_from_disk(str(tmp_path))
    assert out["success"] and out["weight_version"] == 1
    assert served.score(ids[:1], ids[1:]) != pytest.approx(before, abs=1e-4)
    served.update_weights_from_disk(str(src))  # restore
    assert served.score(ids[:1], ids[1:]) == pytest.approx(before, abs=1e-4)


def test_repeated_prompts_are_served_from_the_prefix_cache(served):
    def stats():
        return requests.get(served.url + "/get_model_info", headers=served.headers, timeout=10).json()["prefix_cache"]

    ids = served.tokenizer.encode("A prompt that a GRPO group sends several times over.", add_special_tokens=False)
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 2, "temperature": 0}}
    first = _post(served, "/generate", body).json()
    before = stats()
    again = _post(served, "/generate", body).json()
    after = stats()
    assert again["output_ids"] == first["output_ids"]
    assert after["hit_tokens"] - before["hit_tokens"] == len(ids) - 1  # all but the last token reused
    assert after["miss_tokens"] - before["miss_tokens"] == 1 and after["entries"] >= 1


def test_a_stop_string_ends_the_reply_where_it_first_appears(served):
    msgs = [{"role": "user", "content": "List three colors, one per line."}]
    free = served.generate([msgs], sampling=SamplingConfig(40, 0.0, 1.0, 2048))[0]
    words = free.text.split()
    assert len(words) >= 4, free.text
    stop = words[2]  # a string from the middle of the greedy reply
    cut = served.generate([msgs], sampling=SamplingConfig(40, 0.0, 1.0, 2048, stop=(stop,)))[0]
    assert cut.finish_reason == "stop" and stop in cut.text
    assert free.token_ids[:len(cut.token_ids)] == cut.token_ids  # the same greedy tokens, ended early
    assert len(cut.token_ids) < len(free.token_ids)
    shorter = served.tokenizer.decode(cut.token_ids[:-1], skip_special_tokens=True)
    assert stop not in shorter  # ended on the token that completed it, not later
    r = _post(served, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2, "stop": [""]}})
    assert r.status_code == 400 and "stop" in r.text


def test_a_streamed_reply_arrives_token_by_token_and_ends_as_the_whole_one(served):
    msgs = [{"role": "user", "content": "Count from one to five in words."}]
    s = SamplingConfig(16, 0.0, 1.0, 2048)
    whole = served.generate([msgs], sampling=s)[0]
    events = list(served.stream(msgs, sampling=s))
    texts = [t for t, _ in events]
    assert len(events) == len(whole.token_ids) + 1  # one event per token, then the finished reply
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))  # each text extends the one before
    final = events[-1][1]
    assert final is not None and all(g is None for _, g in events[:-1])
    assert (final.text, final.token_ids, final.finish_reason) == (whole.text, whole.token_ids, whole.finish_reason)
    assert max(abs(a - b) for a, b in zip(final.logprobs, whole.logprobs)) < 1e-4
    r = _post(served, "/generate", {"input_ids": [[1, 2], [3, 4]], "stream": True})
    assert r.status_code == 400 and "one prompt" in r.text


def _events(policy, body) -> list[dict]:
    with requests.post(policy.url + "/generate", json=body, headers=policy.headers, timeout=300,
                       stream=True) as r:
        return [json.loads(line[len(b"data: "):]) for line in r.iter_lines()
                if line.startswith(b"data: ") and line != b"data: [DONE]"]


def _incremental(events: list[dict]) -> list[dict]:
    """The same stream as a server with `--incremental-streaming-output` sends it: only what is new in
    each event (text, ids, logprobs), with the running count in meta_info."""
    out, ids_before, text_before, lps_before = [], 0, "", 0
    for e in events:
        meta = dict(e["meta_info"])
        lps = meta.get("output_token_logprobs")
        if lps is not None:
            meta["output_token_logprobs"], lps_before = lps[lps_before:], len(lps)
        out.append({"text": e["text"][len(text_before):], "output_ids": e["output_ids"][ids_before:],
                    "meta_info": meta})
        ids_before, text_before = len(e["output_ids"]), e["text"]
    return out


def test_a_stream_is_read_whole_in_either_of_sglangs_two_ways_of_streaming(served):
    """The real server streams the reply so far in every event (SGLang's default); re-cut into only
    what is new per event, as SGLang sends it with `--incremental-streaming-output` (which the
    embedded server does not do), both read back as the unstreamed reply."""
    from agents.serving.http_policy import StreamedReply

    prompt = served.prompt_ids([{"role": "user", "content": "Name three colours."}])
    sp = {"max_new_tokens": 12, "temperature": 0.0}
    whole = _post(served, "/generate", {"input_ids": prompt, "return_logprob": True, "sampling_params": sp}).json()
    events = _events(served, {"input_ids": prompt, "return_logprob": True, "stream": True, "sampling_params": sp})
    assert len(events) > 3
    for stream in (events, _incremental(events)):
        reply = StreamedReply()
        texts = []
        for e in stream:
            reply.add(e)
            texts.append(reply.text)
        g = reply.generation(prompt)
        assert (g.text, g.token_ids, g.finish_reason) == (whole["text"], whole["output_ids"],
                                                         whole["meta_info"]["finish_reason"]["type"])
        assert len(g.logprobs) == len(g.token_ids)
        assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    lost = _incremental(events)
    del lost[1]
    reply = StreamedReply()
    with pytest.raises(Exception, match="events were lost"):
        for e in lost:
            reply.add(e)


@pytest.mark.slow
def test_the_backend_preflight_passes_on_the_embedded_server_and_names_what_breaks(served):
    """`python -m harness.backend_check` runs these checks on any server (a real SGLang one on a GPU
    machine). On the embedded server all pass; a client that reads logprobs wrong, or a server that
    refuses the batch, fails the checks that depend on it, each saying why."""
    import copy

    from agents.serving.http_policy import ServerError
    from harness.backend_check import run_checks

    served_from = requests.get(served.url + "/get_model_info", headers=served.headers, timeout=10).json()["model_path"]
    checks = run_checks(served, weights=served_from)
    assert [(c.name, c.status) for c in checks] == [
        ("batch generate", "ok"), ("seeded replay", "ok"), ("scoring = rollout logprobs", "ok"),
        ("top-k logprobs", "ok"), ("streaming", "ok"), ("stop strings", "ok"), ("weight push", "ok")], checks
    assert run_checks(served)[-1].status == "skip"

    shifted = copy.copy(served)
    shifted.score_many = lambda pairs, top_k=0: [([lp + 0.5 for lp in lps], tops)
                                                  for lps, tops in served.score_many(pairs, top_k)]
    scoring = {c.name: c for c in run_checks(shifted)}["scoring = rollout logprobs"]
    assert scoring.status == "fail" and "largest gap to the rollout logprobs 0.5" in scoring.seen

    def refuse(*a, **k):
        raise ServerError("HTTP 400: sampling_seed must be an integer")

    refusing = copy.copy(served)
    refusing.generate = refuse
    by_name = {c.name: c for c in run_checks(refusing)}
    assert by_name["batch generate"].status == "fail" and "sampling_seed" in by_name["batch generate"].seen
    assert by_name["scoring = rollout logprobs"].seen.startswith("skipped")


def test_score_many_batches_pairs_of_different_lengths_with_a_start_per_prompt(served):
    """A trainer scores all of an update's (teacher prompt, response) pairs in one request, with
    SGLang's per-prompt `logprob_start_len` list: each pair's logprobs (and top-k) equal scoring it alone."""
    msgs = [[{"role": "user", "content": c}] for c in ("Name a fruit.", "Write one long sentence about the sea.")]
    gens = served.generate(msgs, sampling=SamplingConfig(12, 1.0, 1.0, 2048), seeds=[1, 2])
    pairs = [(g.prompt_token_ids, g.token_ids) for g in gens] + [(gens[0].prompt_token_ids[:-3], gens[1].token_ids[:5])]
    batched = served.score_many(pairs, top_k=3)
    for pair, (lps, tops) in zip(pairs, batched):
        (alone, alone_tops), = served.score_many([pair], top_k=3)
        assert len(lps) == len(pair[1]) and max(abs(a - b) for a, b in zip(lps, alone)) < 1e-3
        assert [[k for _, k in row] for row in tops] == [[k for _, k in row] for row in alone_tops]
    bad = _post(served, "/generate", {"input_ids": [pairs[0][0], pairs[1][0]], "return_logprob": True,
                                      "logprob_start_len": [1], "sampling_params": {"max_new_tokens": 0}})
    assert bad.status_code == 400 and "one integer per prompt" in bad.text
