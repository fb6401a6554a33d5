"""Images are made on this machine: a Debian base (pulled where a registry answers, else debootstrap),
shared layers from `envs/images/<name>/Dockerfile`, and one image per task. Every build uses the
legacy builder (docker-py's /build endpoint; no BuildKit syntax) and is tagged by a content hash, so
a second run finds it and builds nothing."""
from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import docker.errors
from docker.utils.build import exclude_paths
from dockerfile_parse import DockerfileParser

from envs.sandbox.errors import SandboxError

REPO_ROOT = Path(__file__).resolve().parents[2]
HASH_LABEL = "nextstate.content_hash"


@dataclass(frozen=True)
class FromLine:
    """One FROM instruction, as dockerfile-parse reads it (continuations, case, comments): its lines,
    its flags (`--platform=...`, not the image), the image (ARGs resolved) and the stage it names."""

    startline: int
    endline: int
    flags: tuple[str, ...]
    image: str
    stage: str | None
    keyword: str = "FROM"  # as written (`from` stays `from` when the image is rewritten)


def from_lines(dockerfile_text: str, buildargs: dict[str, str] | None = None) -> list[FromLine]:
    parser = DockerfileParser(fileobj=io.BytesIO(dockerfile_text.encode()), build_args=buildargs or {})
    froms = [s for s in parser.structure if s["instruction"] == "FROM"]
    out = []
    for s, image in zip(froms, parser.parent_images):
        words = s["value"].split()
        flags = tuple(w for w in words if w.startswith("--"))
        rest = [w for w in words if not w.startswith("--")]
        stage = rest[2] if len(rest) >= 3 and rest[1].lower() == "as" else None
        out.append(FromLine(s["startline"], s["endline"], flags, image, stage, s["content"].split()[0]))
    return out


def context_files(context: Path, exclude: set[str] = frozenset()) -> list[Path]:
    """The files of a build context, as `docker build` sends them: the context's `.dockerignore`
    patterns honoured (docker-py's own matcher), and top-level names in `exclude` left out."""
    ignore = context / ".dockerignore"
    patterns = ignore.read_text().splitlines() if ignore.is_file() else []
    kept = set(exclude_paths(str(context), patterns))
    return [p for p in sorted(context.rglob("*"))
            if p.is_file() and (rel := p.relative_to(context).as_posix()) in kept and rel.split("/")[0] not in exclude]


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
    except docker.errors.APIError as e:  # an invalid reference (400) is no image either
        if e.status_code == 400:
            return False
        raise


def repository(image: str) -> str:
    """`image` without its tag and digest, Docker Hub's implicit prefixes dropped: `ubuntu:24.04`,
    `docker.io/library/ubuntu@sha256:...` and `ubuntu` are all `ubuntu`."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: len(name) - len(last[-1]) + last[-1].index(":")]
    for prefix in ("docker.io/", "index.docker.io/", "library/"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def mapped_image(image: str, image_map: dict[str, str]) -> str | None:
    """The local image `image_map` names for `image`: an exact key first, else one with the same
    repository (tags and digests ignored, so a digest-pinned FROM line maps too); None if none."""
    if image in image_map:
        return image_map[image]
    repo = repository(image)
    for key, local in image_map.items():
        if repository(key) == repo:
            return local
    return None


def _content_hash(context: Path, dockerfile_text: str, exclude: set[str]) -> str:
    h = hashlib.sha256(dockerfile_text.encode())
    for p in context_files(context, exclude):
        h.update(p.relative_to(context).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _build_context_tar(context: Path, dockerfile_text: str, exclude: set[str]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in context_files(context, exclude):
            rel = p.relative_to(context).as_posix()
            if rel != "Dockerfile":
                tar.add(p, arcname=rel, recursive=False)
        data = dockerfile_text.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def map_base_images(dockerfile_text: str, image_map: dict[str, str]) -> str:
    """Rewrite FROM lines whose image cannot be pulled here to a local image (config: image_map).
    A mapped line loses its `--platform` flag: the local image is the one this machine runs."""
    lines = dockerfile_text.splitlines(keepends=True)
    for f in reversed(from_lines(dockerfile_text)):
        local = mapped_image(f.image, image_map)
        if local is None:
            continue
        flags = "".join(x + " " for x in f.flags if not x.lower().startswith("--platform"))
        lines[f.startline: f.endline + 1] = [f"{f.keyword} {flags}{local}{f' AS {f.stage}' if f.stage else ''}\n"]
    return "".join(lines)


def base_images(dockerfile_text: str, buildargs: dict[str, str] | None = None) -> list[str]:
    """The images the FROM lines name (flags, `scratch` and earlier stages left out; `${ARG}` from
    `buildargs`)."""
    bases, stages = [], set()
    for f in from_lines(dockerfile_text, buildargs):
        if f.image.lower() != "scratch" and f.image not in stages:
            bases.append(f.image)
        if f.stage:
            stages.add(f.stage)
    return bases


def _missing_bases(client, text: str, buildargs: dict[str, str] | None) -> list[str]:
    missing = []
    for base in base_images(text, buildargs):
        if image_exists(client, base):
            continue
        try:
            client.images.pull(base)
        except docker.errors.APIError:
            missing.append(base)
    return missing


def build_image(client, context: Path, tag_repo: str, *, dockerfile: str = "Dockerfile",
                image_map: dict[str, str] | None = None, exclude: set[str] = frozenset(),
                buildargs: dict[str, str] | None = None, fallback: str | None = None,
                dockerfile_text: str | None = None) -> str:
    """Build `context` unless an image with the same content hash exists; returns its tag. Base
    images: `image_map` first; a base that is neither here nor pullable becomes `fallback` if given,
    else a SandboxError naming it. `dockerfile_text` stands in for the context's Dockerfile."""
    context = Path(context)
    text = dockerfile_text if dockerfile_text is not None else (context / dockerfile).read_text()
    text = map_base_images(text, image_map or {})
    missing = _missing_bases(client, text, buildargs)  # named precisely, instead of a pull error
    if missing and fallback:
        text = map_base_images(text, {m: fallback for m in missing})
        missing = _missing_bases(client, text, buildargs)
    if missing:
        raise SandboxError(f"{context / dockerfile}: base image {missing[0]} is not here and cannot be pulled; "
                           f"build it, map it to a local image (env.image_map, matched by repository: "
                           f"{repository(missing[0])}) or set env.base_image_fallback=<local image>")
    # a rebuilt base invalidates what sits on it
    base_ids = [client.images.get(b).id for b in base_images(text, buildargs)]
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
