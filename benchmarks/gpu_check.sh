#!/usr/bin/env bash
# A short check for a GPU machine (no internet needed), two parts, each ending with a JSON line:
# 1. the trainer's PPO step on a Qwen3-shaped model (random weights from a Qwen3 config: no download) in
#    bf16 with gradient checkpointing: step time and tokens/s;
# 2. the async loops on one GPU machine: two policy servers (backend.replicas=2) and the trainer actor
#    (it asks Ray for the GPU) beside them, a short mode=async run of the default model on the chat env:
#    trained samples/s and the trainer's idle share. Needs the model cache (make model); SKIP_LOOPS=1 skips it.
# 3. the general-agent experiment (conf/experiment/general_toolcall.yaml) as the README's GPU command runs
#    it, in small: 2 updates from the base model (or $GENERAL_MODEL_ARGS, e.g. "model=qwen3_4b backend=sglang
#    backend.python=/opt/sglang/bin/python" where Qwen3-4B and SGLang are on the machine), 8 held-out
#    instances; seconds per update by phase. SKIP_GENERAL=1 skips it.
# Usage: bash benchmarks/gpu_check.sh [hidden] [layers]   (default: Qwen3-0.6B shape)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY - "$@" <<'PYEOF'
import json, sys, time
import torch
from transformers import Qwen3Config, AutoModelForCausalLM
sys.path.insert(0, ".")
from nextstate.types import Sample
from trainers.update import UpdateConfig, ppo_update

hidden = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 28
dev = "cuda" if torch.cuda.is_available() else "cpu"
if dev == "cpu":
    print("WARNING: no GPU visible; running on the CPU (use a tiny shape, e.g. 64 2, as a smoke test)")
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
cfg = Qwen3Config(vocab_size=151936, hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                  num_attention_heads=max(1, hidden // 64), num_key_value_heads=max(1, hidden // 128), head_dim=128, tie_word_embeddings=True)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).to(dev)
model.gradient_checkpointing_enable()
opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
B, P, R = (8, 1024, 512) if dev == "cuda" else (2, 64, 32)
g = torch.Generator().manual_seed(0)
samples = [Sample(torch.randint(0, 150000, (P,), generator=g).tolist(), torch.randint(0, 150000, (R,), generator=g).tolist(),
                  [-2.0] * R, [1.0 if i % 2 else -1.0] * R) for i in range(B)]
upd = UpdateConfig(1e-6, 0.0, 1.0, 1, 4, 0.2, 0.28, 0.0, 1.0)
ppo_update(model, opt, samples[:4], upd)  # warm-up
sync()
times = []
for _ in range(3):
    t = time.perf_counter(); stats = ppo_update(model, opt, samples, upd); sync()
    times.append(time.perf_counter() - t)
step = sorted(times)[1]
params = sum(p.numel() for p in model.parameters())
tok = B * (P + R)
print(f"Qwen3-shaped model: {params / 1e9:.2f} B params, bf16, grad checkpointing; {B} samples x {P}+{R} tokens")
print(f"PPO update: {step:.2f} s, {tok / step:.0f} tokens/s, peak mem {(torch.cuda.max_memory_allocated() if dev == 'cuda' else 0) / 2**30:.1f} GiB")
print(json.dumps({"metric": "gpu_ppo_step_tokens_per_s", "value": round(tok / step), "target": None,
                  "higher_is_better": True, "step_s": round(step, 3), "params_b": round(params / 1e9, 3)}))
PYEOF

if [ "${SKIP_LOOPS:-0}" != 1 ]; then
RUN=${OUT:-/tmp}/gpu_check_async
rm -rf "$RUN"
$PY -m harness.run mode=async env=chat signal=opd hints=next_state mode.teacher=policy split=all progress=false \
  backend.replicas=2 mode.iterations=4 mode.batch_samples=8 mode.group_size=2 mode.rollout_workers=4 \
  mode.eval_limit=2 env.max_steps=2 model.max_new_tokens=64 "hydra.run.dir=$RUN"
$PY - "$RUN" <<'PYEOF'
import json, sys
log = [json.loads(l) for l in open(f"{sys.argv[1]}/train_log.jsonl")]
samples, elapsed, updating = sum(x["samples"] for x in log), log[-1]["elapsed_s"], sum(x["update_s"] for x in log)
print(json.dumps({"metric": "gpu_async_two_servers_samples_per_s", "value": round(samples / elapsed, 3), "target": None,
                  "higher_is_better": True, "trainer_idle_share": round(1 - updating / elapsed, 3),
                  "updates": len(log), "staleness_max": max(x["staleness_max"] for x in log)}))
PYEOF
fi

[ "${SKIP_GENERAL:-0}" = 1 ] && exit 0
RUN=${OUT:-/tmp}/gpu_check_general
rm -rf "$RUN"
# shellcheck disable=SC2086  # GENERAL_MODEL_ARGS is a list of overrides
$PY -m harness.run +experiment=general_toolcall model.init_from=null signal=prm seed=0 progress=false \
  mode.iterations=2 mode.eval_every=0 mode.eval_limit=8 ${GENERAL_MODEL_ARGS:-} "hydra.run.dir=$RUN"
$PY - "$RUN" <<'PYEOF'
import json, sys
log = [json.loads(l) for l in open(f"{sys.argv[1]}/train_log.jsonl")]
phases = ("rollout_s", "judge_s", "update_s", "publish_s")
per_update = {p: round(sum(x.get(p, 0.0) for x in log) / len(log), 2) for p in phases}
print(json.dumps({"metric": "gpu_general_toolcall_s_per_update", "value": round(sum(per_update.values()), 2),
                  "target": 60, "higher_is_better": False, "updates": len(log),
                  "samples": [x["samples"] for x in log], **per_update}))
PYEOF
