"""Resuming a run dir (`resume=<run_dir>`, or a sweep run again into the same dirs): it must hold a
run, and go on with the config that run was made with; a finished one is not run (or filed) again;
Ctrl-C says the command that resumes it. The recorded config is `<run_dir>/config.yaml`.

`resume=` makes no new run dir: conf/config.yaml's `hydra.run.dir` is `${nextstate.run_dir:...}`, the
resumed dir when `resume=` names a run (one with a config.yaml) and a new timestamped dir otherwise (so
`resume=` of a path with no run makes no dir there either, and is refused by `check_resumable`). Hydra
then writes no `.hydra/` record into the resumed dir (`hydra.output_subdir` is
`${nextstate.output_subdir:...}`, null then): the record of the command that started the run stays as
it was, so a refused resume can still quote it; Hydra's run.log there is appended to.

Secrets (`SECRET_KEYS`: the proxy's API key, the attached servers' key) are never written down or
printed: config.yaml has "<set>", Hydra's `.hydra/` record has "***" in their place (`redact_secrets`),
and the resume command leaves them out. A resumed run takes the key from its environment variable
(`SECRET_ENV`: NEXTSTATE_PROXY_API_KEY, NEXTSTATE_BACKEND_API_KEY) or the override again; without
it, the resume is refused as a changed config."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from nextstate.atomic import write_text_atomic

SECRET_ENV = {"mode.api_key": "NEXTSTATE_PROXY_API_KEY", "backend.api_key": "NEXTSTATE_BACKEND_API_KEY"}
SECRET_KEYS = tuple(SECRET_ENV)


def _names_a_run(resume) -> bool:
    return bool(resume) and (Path(str(resume)) / "config.yaml").is_file()


OmegaConf.register_new_resolver(
    "nextstate.run_dir", lambda resume, fresh: str(resume) if _names_a_run(resume) else fresh, replace=True)
OmegaConf.register_new_resolver(
    "nextstate.output_subdir", lambda resume: None if _names_a_run(resume) else ".hydra", replace=True)

# Keys a resumed run may change: how it runs, not what it computes (and more training iterations).
RESUMABLE_CHANGES = {"resume", "progress", "parallel", "mode.iterations"}


def config_changes(cfg: DictConfig, run_dir: Path, named: tuple[str, ...] = ()) -> tuple[list[str], dict] | None:
    """(the keys, dotted, in which `cfg` differs from the config recorded in `run_dir`, beyond those a
    resumed run may change; the keys the record lacks, with their values now), or None when no run was
    recorded there. A key the record lacks (added to the code after that run; a new key's default keeps
    the old behaviour) is a change only when `named`, the keys this command sets, names it."""
    try:
        recorded = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    except OSError:
        return None
    current = recorded_config(cfg)
    differing = sorted(k for k in _differing(recorded, current) if k not in RESUMABLE_CHANGES)
    new = {k: _at(current, k) for k in differing if not _recorded(recorded, k)}
    return [k for k in differing if k not in new or _names(named, k)], new


def _at(tree: dict, dotted: str):
    for part in dotted.split("."):
        tree = tree[part]
    return tree


def _recorded(recorded: dict, dotted: str) -> bool:
    try:
        _at(recorded, dotted)
    except (KeyError, TypeError):
        return False
    return True


def _names(named: tuple[str, ...], dotted: str) -> bool:
    return any(n == dotted or n.startswith(dotted + ".") or dotted.startswith(n + ".") for n in named)


def _command_keys() -> tuple[str, ...]:
    """The keys this command's overrides set (`backend=x` sets the group `backend`)."""
    try:
        overrides = HydraConfig.get().overrides.task
    except ValueError:  # not inside a Hydra app
        return ()
    return tuple(o.lstrip("+~").split("=", 1)[0] for o in overrides)


def _differing(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for key in {*a, *b}:
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _differing(x, y, f"{prefix}{key}.")
        elif x != y:
            out.append(f"{prefix}{key}")
    return out


def _secret_set(override: str) -> str | None:
    key = override.lstrip("+~").split("=", 1)[0]
    return key if key in SECRET_KEYS else None


def resume_command(overrides, run_dir: Path) -> str:
    """The command that resumes `run_dir` with these overrides (less any `resume=` among them, and
    less the secrets: it says which environment variables to set instead)."""
    kept = [o for o in overrides if not o.startswith("resume=") and not _secret_set(o)]
    command = shlex.join(["python", "-m", "harness.run", *kept, f"resume={run_dir}"])
    envs = list(dict.fromkeys(SECRET_ENV[k] for k in map(_secret_set, overrides) if k))
    if envs:
        command += f"  (with {' and '.join(envs)} set to the run's keys, which are not shown)"
    return command


def _masked(node, secret: str):
    if isinstance(node, str):
        return node.replace(secret, "***")
    if isinstance(node, dict):
        return {k: _masked(v, secret) for k, v in node.items()}
    if isinstance(node, list):
        return [_masked(v, secret) for v in node]
    return node


def secrets_of(cfg: DictConfig) -> list[str]:
    """The values of the secrets the config sets."""
    return [str(s) for s in (OmegaConf.select(cfg, k, default=None) for k in SECRET_KEYS) if s]


def masked(text: str, cfg: DictConfig) -> str:
    for s in secrets_of(cfg):
        text = text.replace(s, "***")
    return text


def _sweep_record() -> list[Path]:
    """A Hydra multirun's record of the whole sweep (`<sweep dir>/multirun.yaml`, written before its jobs)."""
    try:
        hc = HydraConfig.get()
    except ValueError:  # not inside a Hydra app
        return []
    if hc.mode is None or hc.mode.name != "MULTIRUN":
        return []
    return [Path(hc.sweep.dir) / "multirun.yaml"]


def refuse_pickled_secrets(argv: list[str]) -> None:
    """A submitit sweep (hydra/launcher=slurm | submitit_*) pickles each job's overrides into
    `<sweep dir>/.submitit/<job>/*_submitted.pkl` before any job runs, where no redaction can reach
    (the pickle must stay whole: SLURM requeues a job from it). A key given there on the command line
    would land on disk in clear, so the command is refused before Hydra starts, naming the
    environment variable that keeps it out."""
    launcher = next((a.split("=", 1)[1] for a in argv if a.startswith("hydra/launcher=")), "")
    if launcher != "slurm" and not launcher.startswith("submitit"):
        return
    for arg in argv:
        key = arg.lstrip("+~").split("=", 1)[0]
        if key in SECRET_ENV and "=" in arg:
            raise SystemExit(f"{key}=... with hydra/launcher={launcher}: submitit writes each job's overrides "
                             f"to disk (.submitit/*_submitted.pkl), key and all. Set {SECRET_ENV[key]} in the "
                             f"environment instead and leave {key} out of the command")


def redact_secrets(cfg: DictConfig, run_dir: Path) -> None:
    """Hydra's records of the command (`<run_dir>/.hydra/*.yaml`: the overrides, the config, hydra.yaml's
    override_dirname; in a sweep also `<sweep dir>/multirun.yaml`) with every secret's value replaced by
    "***". Each job of a sweep redacts the sweep's record again (atomically; the second finds nothing)."""
    secrets = secrets_of(cfg)
    if not secrets:
        return
    for path in [*sorted((run_dir / ".hydra").glob("*.yaml")), *_sweep_record()]:
        if not path.is_file():
            continue
        text = path.read_text()
        if any(s in text for s in secrets):
            record = yaml.safe_load(text)
            for s in secrets:
                record = _masked(record, s)
            write_text_atomic(path, yaml.safe_dump(record, sort_keys=False, allow_unicode=True))


def started_with(run_dir: Path) -> list[str] | None:
    """The overrides `run_dir`'s run was started with: Hydra's record in its .hydra/, unless this very
    command wrote that record (its hydra.run.dir is the run dir and Hydra wrote a .hydra/ there: a
    sweep's job dir run again; `resume=` writes none)."""
    hc = HydraConfig.get()
    if hc.output_subdir is not None and Path(hc.runtime.output_dir).resolve() == run_dir.resolve():
        return None
    try:
        return list(OmegaConf.load(run_dir / ".hydra" / "overrides.yaml"))
    except OSError:
        return None


def check_resumable(cfg: DictConfig, run_dir: Path) -> None:
    """A run dir that holds a run (named by `resume=`, or a sweep's job dir run again) goes on only
    with the config that run was made with: anything else would file one run's episodes under
    another's config. `resume=` must name a run."""
    compared = config_changes(cfg, run_dir, _command_keys())
    if compared is None:
        if cfg.get("resume"):
            raise SystemExit(f"resume={run_dir}: no run to resume there (no config.yaml); give a run dir under "
                             f"{cfg.paths.results_dir}/runs/")
        return
    changes, added = compared
    if changes:
        original = started_with(run_dir)
        how = f":\n  {resume_command(original, run_dir)}" if original is not None else ""
        raise SystemExit(f"{run_dir}: that run was made with another config (differs in: {', '.join(changes)}); "
                         f"resume it with the overrides it was started with{how}, or choose another run dir")
    if added:
        listed = ", ".join(f"{k}={v}" for k, v in added.items())
        print(f"{run_dir}: config keys new since that run, at their defaults: {listed}", file=sys.stderr)


def already_finished(cfg: DictConfig, run_dir: Path) -> dict | None:
    """The metrics of the run finished earlier in `run_dir` (so a sweep run again skips its finished
    jobs, and a finished run resumed files no second row), or None. A resumed training run may ask
    for more iterations, and then goes on. (`check_resumable` has made sure it is the same run.)"""
    try:
        done = json.loads((run_dir / "metrics.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return None if done.get("iterations", 0) < cfg.mode.get("iterations", 0) else done


def recorded_config(cfg: DictConfig) -> dict:
    """The resolved config as the run dir records it, with secrets (`SECRET_KEYS`) masked."""
    out = OmegaConf.to_container(cfg, resolve=True)
    for key in SECRET_KEYS:
        group, name = key.split(".")
        if (out.get(group) or {}).get(name):
            out[group][name] = "<set>"
    return out
