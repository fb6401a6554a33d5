"""Checkpoints that survive a kill: written to a temp dir, then renamed over the old one. They hold
the trainable weights, the optimizer, the RNG and the loop's state, so a resumed run takes the same
next step as an uninterrupted one."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def full_state_dict(model) -> dict[str, torch.Tensor]:
    """The model's weights as a plain (merged) checkpoint that any server can load: LoRA adapters
    are merged in for the copy, and peft's key names are mapped back to the base model's."""
    if hasattr(model, "merge_adapter"):
        model.merge_adapter()
        try:
            sd = model.get_base_model().state_dict()
            state = {k.replace(".base_layer.", "."): v.detach().clone() for k, v in sd.items() if "lora_" not in k}
        finally:
            model.unmerge_adapter()
    else:
        state = {k: v.detach() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # shared with the embedding; safetensors refuses aliases
    return {k: v.contiguous().cpu() for k, v in state.items()}


def save_weights(model, out_dir: Path) -> Path:
    """Weights for the serving endpoint (`update_weights_from_disk`), written atomically."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    save_file(full_state_dict(model), str(tmp / "model.safetensors"), metadata={"format": "pt"})
    _replace_dir(tmp, out_dir)
    return out_dir


def _replace_dir(tmp: Path, target: Path) -> None:
    old = target.with_name(target.name + ".old")
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def save_checkpoint(path: Path, model, optimizer, state: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    trainable = {k: v.detach().contiguous().cpu() for k, v in model.named_parameters() if v.requires_grad}
    save_file(trainable, str(tmp / "trainable.safetensors"))
    torch.save({"optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state()}, tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps(state, indent=2))
    _replace_dir(tmp, path)


def checkpoint_state(path: Path) -> dict | None:
    """The run state saved with a checkpoint, without its weights (None: no checkpoint yet)."""
    state = Path(path) / "state.json"
    return json.loads(state.read_text()) if state.exists() else None


def load_checkpoint(path: Path, model, optimizer) -> dict | None:
    path = Path(path)
    if not (path / "state.json").exists():
        return None
    trainable = load_file(str(path / "trainable.safetensors"))
    params = dict(model.named_parameters())
    with torch.no_grad():
        for k, v in trainable.items():
            params[k].copy_(v)
    blob = torch.load(path / "optimizer.pt", weights_only=False)
    optimizer.load_state_dict(blob["optimizer"])
    torch.set_rng_state(blob["torch_rng"])
    return json.loads((path / "state.json").read_text())
