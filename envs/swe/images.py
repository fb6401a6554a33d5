"""Images of SWE instances, built here with the legacy builder and reused across episodes.

swebench's own builder shells out to `docker buildx` (absent here), so we build with
`envs.sandbox.images.build_image` (content-hash tags: a second run builds nothing) and then also
tag each image with the name the instance gives in `image`
(`swebench/sweb.eval.x86_64.<id>:latest`), which is where `swebench.harness.run_evaluation`
looks for it: both graders run on the very same image.

Recipes: a git bundle of the repository (our suite; `envs/tasks/swe/Dockerfile`), or the
Dockerfile of a swebench task repo, whose BuildKit heredocs (`RUN <<EOF`) are rewritten into
files in the build context, since the legacy builder does not know them.
"""
from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import docker.errors
from docker.utils import parse_repository_tag

from envs.sandbox.errors import SandboxError
from envs.sandbox.images import build_image, ensure_shared_image, image_exists
from nextstate.types import Task

# `RUN <<EOF` / `RUN <<-'EOF'` / `COPY <<EOF /dest`: one heredoc per instruction, body up to DELIM
_HEREDOC = re.compile(r"^(RUN|COPY)([ \t]+[^\n]*?)?<<-?([\"']?)(\w+)\3([^\n]*)\n(.*?)\n\4[ \t]*$",
                      re.MULTILINE | re.DOTALL)


def ensure_swe_shared_image(client, base: str, chain: list[str]) -> str:
    """Build the shared images in order (`chain[0]` on `base`, each next on the previous one);
    returns the last one's `nextstate/<name>:latest`."""
    image = base
    for name in chain:
        image = ensure_shared_image(client, name, image)
    return image


def legacy_dockerfile(text: str, context: Path) -> str:
    """Rewrite BuildKit heredocs for the legacy builder: each body becomes a file in `context`;
    a RUN body is then run as a script (by its shebang's interpreter, else /bin/sh), a COPY body
    is copied to its destination."""
    n = 0

    def replace(m: re.Match) -> str:
        nonlocal n
        n += 1
        kind, before, _, _, after, body = m.groups()
        name = f"nextstate-heredoc-{n}"
        (context / name).write_text(body + "\n")
        if kind == "COPY":
            return f"COPY {(before or '').strip()} {name} {after.strip()}".replace("  ", " ")
        script = f"/tmp/{name}"
        interp = body.splitlines()[0][2:].strip() if body.startswith("#!") else "/bin/sh"
        return (f"COPY {name} {script}\n"
                f"RUN {(before or '').strip()} {interp} {script}{after} && rm -f {script}".replace("  ", " "))

    return _HEREDOC.sub(replace, text)


def instance_image(client, task: Task, *, shared_image: str, bundle_dockerfile: Path) -> str:
    """The image of `task` (built unless an image with the same content exists); returns the
    content-hash tag and makes sure the instance's swebench name points at it too."""
    inst, build = task.data["instance"], task.data["build"]
    if build is None:
        if not image_exists(client, inst["image"]):
            raise SandboxError(
                f"image {inst['image']} of {task.task_id} is not here and the instance has no recipe "
                "to build it (a repo_bundle, or a task-repo Dockerfile); load it (docker load) first")
        return inst["image"]
    with tempfile.TemporaryDirectory(prefix="nextstate-swe-") as tmp:
        ctx = Path(tmp) / "context"
        if build["kind"] == "bundle":
            ctx.mkdir()
            shutil.copyfile(build["bundle"], ctx / "repo.bundle")
            text = bundle_dockerfile.read_text()
            buildargs = {"BASE": shared_image, "BASE_COMMIT": inst["base_commit"]}
        else:
            shutil.copytree(build["context"], ctx)
            text = legacy_dockerfile((ctx / build["dockerfile"]).read_text(), ctx)
            buildargs = None
        (ctx / "Dockerfile").write_text(text)
        tag = build_image(client, ctx, f"nextstate-swe/{task.task_id.lower()}", buildargs=buildargs)
    repository, name_tag = parse_repository_tag(inst["image"])
    try:
        client.images.get(tag).tag(repository, name_tag or "latest")
    except docker.errors.APIError as e:
        raise SandboxError(f"could not tag {tag} as {inst['image']}: {e}") from e
    return tag
