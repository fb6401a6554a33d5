"""Images are made on this machine: a Debian base (pulled where a registry answers, else debootstrap),
shared layers from `envs/images/<name>/Dockerfile`, and one image per task. Every build uses the
legacy builder (docker-py's /build endpoint; no BuildKit syntax) and is tagged by a content hash, so
a second run finds it and builds nothing."""
from __future__ import annotations

import hashlib
import io
import re
import subprocess
import tarfile
from pathlib import Path

import docker.errors

from envs.sandbox.errors import SandboxError

REPO_ROOT = Path(__file__).resolve().parents[2]
HASH_LABEL = "nextstate.content_hash"
_FROM = re.compile(r"^(\s*FROM\s+)(\S+)(.*)$", re.IGNORECASE | re.MULTILINE)


def ensure_base_image(client, name: str) -> None:
    """The Debian base: pulled where a registry answers, else debootstrapped (scripts/make_base_image.sh)."""
    if image_exists(client, name):
        return
    script = REPO_ROOT / "scripts" / "make_base_image.sh"
    proc = subprocess.run(["bash", str(script), name], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxError(f"could not make base image {name}:\n{proc.stderr[-2000:]}")


def image_exists(client, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _content_hash(context: Path, dockerfile_text: str, exclude: set[str]) -> str:
    h = hashlib.sha256(dockerfile_text.encode())
    for p in sorted(context.rglob("*")):
        rel = p.relative_to(context).as_posix()
        if p.is_file() and rel.split("/")[0] not in exclude:
            h.update(rel.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _build_context_tar(context: Path, dockerfile_text: str, exclude: set[str]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(context.rglob("*")):
            rel = p.relative_to(context).as_posix()
            if rel.split("/")[0] in exclude or rel == "Dockerfile":
                continue
            tar.add(p, arcname=rel, recursive=False)
        data = dockerfile_text.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def map_base_images(dockerfile_text: str, image_map: dict[str, str]) -> str:
    """Rewrite FROM lines whose image cannot be pulled here to a local image (config: image_map)."""
    return _FROM.sub(lambda m: m.group(1) + image_map.get(m.group(2), m.group(2)) + m.group(3),
                     dockerfile_text)


def build_image(client, context: Path, tag_repo: str, *, dockerfile: str = "Dockerfile",
                image_map: dict[str, str] | None = None, exclude: set[str] = frozenset(),
                buildargs: dict[str, str] | None = None) -> str:
    """Build `context` unless an image with the same content hash exists; returns its tag."""
    context = Path(context)
    text = map_base_images((context / dockerfile).read_text(), image_map or {})
    base_ids = []
    for m in _FROM.finditer(text):  # name a missing local base precisely, instead of a pull error
        base = (buildargs or {}).get(m.group(2).strip("${}"), m.group(2))
        if not image_exists(client, base):
            try:
                client.images.pull(base)
            except docker.errors.APIError as e:
                raise SandboxError(f"{context / dockerfile}: base image {base} is not here and cannot be "
                                   "pulled; build it or map it to a local image (image_map)") from e
        base_ids.append(client.images.get(base).id)  # a rebuilt base invalidates what sits on it
    key = text + repr(sorted((buildargs or {}).items())) + repr(base_ids)
    tag = f"{tag_repo}:{_content_hash(context, key, exclude)}"
    if image_exists(client, tag):
        return tag
    try:
        client.images.build(fileobj=_build_context_tar(context, text, exclude), custom_context=True,
                            tag=tag, rm=True, forcerm=True, network_mode="host", buildargs=buildargs,
                            labels={HASH_LABEL: tag.rsplit(":", 1)[1]})
    except (docker.errors.BuildError, docker.errors.APIError) as e:
        log = "".join(str(x.get("stream", x.get("error", ""))) for x in getattr(e, "build_log", []) or [])
        raise SandboxError(f"building {context} failed: {e}\n{log[-3000:]}") from e
    return tag


def ensure_shared_image(client, name: str, base: str) -> str:
    """Build `envs/images/<name>` on top of `base` and tag it `nextstate/<name>:latest` too, which is
    what task Dockerfiles say in FROM."""
    ensure_base_image(client, base)
    tag = build_image(client, REPO_ROOT / "envs" / "images" / name, f"nextstate/{name}",
                      buildargs={"BASE": base})
    latest = f"nextstate/{name}:latest"
    client.images.get(tag).tag(latest)
    return latest
