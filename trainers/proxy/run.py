"""`mode=proxy`'s run: the endpoint (trainers/proxy/server.py) in a Ray actor as the loops' rollout
worker (trainers/proxy/roles.py), a judge and the trainer as in mode=async; every update logged,
checkpointed, and the journal compacted after it. `mode.iterations` updates, then the proxy stops
(0 = until Ctrl-C)."""
from __future__ import annotations

import os
import time
from contextlib import ExitStack
from pathlib import Path

from agents.serving.asgi_server import listening_socket
from nextstate.atomic import append_jsonl, read_jsonl, write_json_atomic
from trainers.async_train import ray_loops, record_update
from trainers.checkpoint import checkpoint_state
from trainers.job import Job
from trainers.proxy.roles import ProxyEndpoint, ProxyJudge
from trainers.proxy.server import ProxyConfig
from trainers.ray_loops import ACTOR_GONE, UpdateReport
from trainers.ray_runtime import ray_session
from trainers.setup import Run, add_counts, start_run
from trainers.train_plot import write_train_plot


def _check_signal(run: Run) -> None:
    s = run.job.signal
    if not (s.needs_judge or s.needs_hints):
        raise SystemExit("mode=proxy: a conversation has no outcome score; use signal=prm|opd|prm_opd "
                         "(+experiment=personal_proxy)")
    if s.needs_judge and s.baseline != "none":
        raise SystemExit("mode=proxy: each reply is its own group, so step-wise standardization has nothing to "
                         "compare; use signal.baseline=none (+experiment=personal_proxy)")


def _keep_the_key_from_children() -> None:
    """The proxy's key, read from NEXTSTATE_PROXY_API_KEY when the job was typed, travels in the job
    the endpoint actor gets; the variable leaves this process's environment before the policy server
    and Ray start: no child process (a model server, a Ray worker running any task) inherits it."""
    os.environ.pop("NEXTSTATE_PROXY_API_KEY", None)


def proxy_main(job: Job, run_dir: Path) -> dict:
    (run_dir / "proxy.json").unlink(missing_ok=True)  # a dead run's URL must not reach a client
    tc: ProxyConfig = job.mode
    _keep_the_key_from_children()
    try:  # tried before the servers start: a taken port fails at once (the endpoint actor binds it)
        listening_socket(tc.host, tc.port, 1).close()
    except OSError as e:
        raise SystemExit(f"mode=proxy cannot listen on {tc.host}:{tc.port} ({e.strerror}): choose another "
                         "mode.port, or mode.port=0 for a free one") from None
    with ExitStack() as stack:
        run = start_run(job, run_dir, stack, with_env=False)
        _check_signal(run)
        state = run.begin(checkpoint_state(run.state_file))
        stack.callback((run_dir / "proxy.json").unlink, missing_ok=True)  # once it stops serving (Ctrl-C, SIGTERM too)
        stack.enter_context(ray_session(job.ray))
        loops = ray_loops(run, workers=1, next_group=state.open_from, with_env=False,
                          rollout=ProxyEndpoint, judge=ProxyJudge,
                          rollout_options={"max_concurrency": 4})  # stats and compaction while a step is awaited
        final: dict = {}

        def endpoint(method: str, *args):
            """A call on the endpoint actor; None while Ray restarts it (killed for memory, say): the
            stats are then the last ones, and the journal is compacted after the next update."""
            import ray

            try:
                return ray.get(loops.rollout_actors[0].call.remote(method, *args))
            except ACTOR_GONE as e:
                print(f"[proxy] the endpoint is restarting ({type(e).__name__}); its {method} waits for the "
                      "next update", flush=True)
                return None

        def on_update(r: UpdateReport) -> None:
            final.update(endpoint("stats") or {})
            log = {**record_update(state, r, loops), **final}
            state.open_from = r.open_from
            loops.save(state.to_dict())
            endpoint("compact", r.open_from)  # after the checkpoint: a kill in between keeps a step twice, never none
            append_jsonl(run.log_file, log)
            write_train_plot(run_dir)  # a proxy may never finish: its curves are current after every update
            print(f"[proxy] update {r.version}: {r.samples} samples from live sessions, "
                  f"loss {r.stats.get('loss', 0):.4f}; {final.get('served', 0)} requests served", flush=True)

        remaining = tc.iterations - (state.iteration + 1) if tc.iterations else 10**12
        if remaining > 0:
            loops.run(remaining, on_update, lambda group, counts: add_counts(state, counts, 0))
    metrics = {"mode": "proxy", "signal": job.signal.name, "model": job.model.name, "seed": job.seed,
               "iterations": state.iteration + 1, "train_samples": state.train_samples,
               "steps_judged": state.train_episodes, "judge_votes": state.judge_votes,
               "hints_accepted": state.hints_accepted, "dropped_stale": state.dropped_stale, **final,
               "wall_s": round(time.monotonic() - run.t_start, 1), "train_log": read_jsonl(run.log_file)}
    write_json_atomic(run_dir / "metrics.json", metrics)
    print(f"[proxy] stopped after {metrics['iterations']} updates; weights in {run_dir / 'weights'}")
    return metrics
