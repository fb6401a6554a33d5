"""The 'before' evaluation of a training run is greedy decoding of the initial weights on the test
tasks: every signal of a sweep would compute the same numbers. It is cached under a key of
everything that determines it (weights file, env config, the tasks' ids and content, sampling, and
the seed where the env's episodes depend on it: MiniWoB pages do, tool-call and terminal tasks do
not, so every seed of a sweep shares one before-eval there). The episodes file is kept beside the
summary, so a run that hits the cache still has its `eval_before.jsonl` (the replies, and what
reports read per preference)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

from nextstate.atomic import write_json_atomic


class EvalCache:
    def __init__(self, root: Path, weights_dir: Path, env_cfg, tasks, sampling, seed: int | None):
        weights = sorted(Path(weights_dir).glob("*.safetensors"))
        stamp = [(w.name, w.stat().st_size, w.stat().st_mtime_ns) for w in weights]
        # the tasks' content, not only their ids: persona v2 kept v1's ids with new requests and answer keys
        task_content = [[t.task_id, t.instruction, t.data] for t in tasks]
        key = json.dumps([str(weights_dir), stamp, dataclasses.asdict(env_cfg), task_content,
                          dataclasses.asdict(sampling), seed], sort_keys=True, default=str)
        self.path = Path(root) / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")

    def get(self, episodes_to: Path | None = None) -> dict | None:
        """The cached summary; its episodes are copied to `episodes_to` where they were kept."""
        try:
            summary = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if episodes_to is not None and self._episodes.exists():
            tmp = Path(episodes_to).with_suffix(".tmp")
            shutil.copyfile(self._episodes, tmp)
            tmp.replace(episodes_to)
        return summary

    def put(self, summary: dict, episodes: Path | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if episodes is not None and Path(episodes).exists():  # first, so a summary never lacks its episodes
            tmp = self._episodes.with_suffix(".tmp")
            shutil.copyfile(episodes, tmp)
            tmp.replace(self._episodes)
        write_json_atomic(self.path, summary)

    @property
    def _episodes(self) -> Path:
        return self.path.with_suffix(".jsonl")
