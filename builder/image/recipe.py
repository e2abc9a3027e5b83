"""The image recipe: what goes into a stack image, and the Containerfile rendered from it.

`RecipeInputs` holds every input (pinned bases, Python, job plan, environment, labels,
source builds); `render()` turns it into text through images/stack.Containerfile.j2. Both are
pure: no engine, no network. `recipe_inputs()` gathers the inputs from a manifest, its lock,
the pins and a job plan.

Precedence for the bases: images/base-images.toml < `--base`/`--uv-image` on the command line
(which must be pinned by digest too: a local base made for CI is as pinned as a registry one).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import jinja2
from pydantic import Field

from builder.compile.jobs import compile_env
from builder.image.pins import CudaBases, ImagePins, PinnedImage
from stackgate import __version__
from stackgate.build_record import JobPlan
from stackgate.containers.run import (
    IMAGE_ENV,
    IMAGE_PYTHON_DIR,
    IMAGE_ROOT,
    IMAGE_STACK_DIR,
    IMAGE_TOOL,
)
from stackgate.errors import BadInput
from stackgate.manifest.loading import LoadedStack
from stackgate.model import StrictModel
from stackgate.paths import project_root

TEMPLATE = "stack.Containerfile.j2"
LABEL_PREFIX = "io.stackgate"

# Names and values that look like credentials never go into an image: tokens come at run time.
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|CREDENTIAL|PRIVATE", re.I
)
_SECRET_VALUE = re.compile(
    r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|ghp_|github_pat_|glpat-|AKIA[0-9A-Z]{16})"
)
_DIGEST_REF = re.compile(r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}\Z")

PATHS = {
    "root": IMAGE_ROOT,
    "env": IMAGE_ENV,
    "tool": IMAGE_TOOL,
    "tool_src": f"{IMAGE_ROOT}/tool-src",
    "python": IMAGE_PYTHON_DIR,
    "stack": IMAGE_STACK_DIR,
    "sources": f"{IMAGE_ROOT}/src",
}


class PythonSource(StrictModel):
    """Where the image's CPython comes from: the pinned uv (a version) or the base (a path)."""

    mode: Literal["uv", "base"]
    version: str | None = None
    path: str | None = None


class SourcePackage(StrictModel):
    """A package built from source inside the image (git ref + patches applied on the host)."""

    name: str
    git: str
    ref: str
    commit: str = Field(default="", description="The commit uv.lock resolved ref to.")
    subdirectory: str = ""
    patches: list[str] = Field(default_factory=list)


class RecipeInputs(StrictModel):
    stack: str
    description: str
    manifest_sha256: str
    lock_sha256: str
    uv: PinnedImage
    build_base: PinnedImage
    runtime_base: PinnedImage
    runtime_note: str
    python: PythonSource
    plan_args: dict[str, str] = Field(description="Job plan: build-arg name -> value.")
    plan_summary: str
    env: dict[str, str]
    labels: dict[str, str]
    source_packages: list[SourcePackage] = Field(default_factory=list)
    include_tool: bool = True
    proxy_ca: bool = Field(default=False, description="RUN steps get SSL_CERT_FILE (--ca-bundle).")

    def build_args(self, source_date_epoch: int) -> dict[str, str]:
        """--build-arg values: the job plan and the fixed timestamp."""
        return {**self.plan_args, "SOURCE_DATE_EPOCH": str(source_date_epoch)}


def secrets_in(values: Mapping[str, str], where: str) -> list[str]:
    """Entries that look like credentials (by name or by value)."""
    found = []
    for name, value in values.items():
        if _SECRET_NAME.search(name):
            found.append(f"{where}.{name}: looks like a credential; pass it at run time")
        elif _SECRET_VALUE.match(value):
            found.append(f"{where}.{name}: its value looks like a token; pass it at run time")
    return found


def _dq(value: str) -> str:
    """A Containerfile double-quoted string (JSON escaping is a subset it accepts)."""
    return json.dumps(value)


def _sq(value: str) -> str:
    """One shell word for a RUN line, whatever the value holds."""
    return shlex.quote(value)


def _comment(value: str) -> str:
    """Text for a `#` comment: control characters (a newline would end the comment and start
    an instruction) shown escaped. The manifest loader already refuses them; this is the
    second wall."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in value
    )


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(project_root() / "images"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["dq"] = _dq
    env.filters["sq"] = _sq
    env.filters["comment"] = _comment
    return env


def render(inputs: RecipeInputs, template: str = TEMPLATE) -> str:
    """The Containerfile text for these inputs (deterministic)."""
    problems = secrets_in(inputs.env, "environment") + secrets_in(inputs.labels, "labels")
    if problems:
        raise BadInput("refusing to bake credentials into an image", details=problems)
    for image in (inputs.uv, inputs.build_base, inputs.runtime_base):
        if not _DIGEST_REF.match(image.ref):
            raise BadInput(f"image '{image.ref}' is not pinned by digest")
    text = _environment().get_template(template).render(**inputs.model_dump(), paths=PATHS)
    return text


def image_labels(
    loaded: LoadedStack,
    *,
    manifest_sha256: str,
    lock_sha256: str,
    source_commit: str,
    created: int,
    base: PinnedImage,
) -> dict[str, str]:
    """OCI annotations plus ours; the same inputs always give the same labels."""
    m = loaded.manifest
    return {
        "org.opencontainers.image.title": f"stackgate-{m.name}",
        "org.opencontainers.image.description": m.description,
        "org.opencontainers.image.created": datetime.fromtimestamp(created, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        "org.opencontainers.image.revision": source_commit,
        "org.opencontainers.image.version": __version__,
        "org.opencontainers.image.base.name": base.tag,
        "org.opencontainers.image.base.digest": base.digest,
        f"{LABEL_PREFIX}.stack": m.name,
        f"{LABEL_PREFIX}.manifest.sha256": manifest_sha256,
        f"{LABEL_PREFIX}.lock.sha256": lock_sha256,
        f"{LABEL_PREFIX}.tool.version": __version__,
        f"{LABEL_PREFIX}.source.commit": source_commit,
        f"{LABEL_PREFIX}.python": m.python,
        f"{LABEL_PREFIX}.cuda": m.host.cuda,
        f"{LABEL_PREFIX}.target-archs": ",".join(m.host.target_archs),
    }


def source_packages(
    loaded: LoadedStack, commits: Mapping[str, str] | None = None
) -> list[SourcePackage]:
    """Packages pinned to a git ref with patches: uv cannot patch, so they build in the image."""
    out = []
    for name, pin in sorted(loaded.manifest.packages.items()):
        if pin.git is not None and pin.ref is not None and pin.patches:
            out.append(
                SourcePackage(
                    name=name,
                    git=pin.git,
                    ref=pin.ref,
                    commit=(commits or {}).get(name, ""),
                    subdirectory=pin.subdirectory or "",
                    patches=[Path(p.path).name for p in pin.patches],
                )
            )
    return out


def pinned_override(ref: str, what: str) -> PinnedImage:
    """An image given on the command line: it must be pinned by digest as well."""
    if not _DIGEST_REF.match(ref):
        raise BadInput(f"{what} '{ref}' must be pinned by digest: repository@sha256:<64 hex>")
    return PinnedImage(ref=ref, tag=f"{ref.split('@', 1)[0]}:given-on-the-command-line")


def choose_bases(
    loaded: LoadedStack, pins: ImagePins, base: str | None
) -> tuple[PinnedImage, PinnedImage, str]:
    """(build base, runtime base, why the runtime is what it is)."""
    if base is not None:
        image = pinned_override(base, "--base")
        return image, image, "runtime = build base (--base given)"
    bases: CudaBases = pins.for_cuda(loaded.manifest.host.cuda)
    if loaded.manifest.host.min_nvcc_for_jit is not None:
        # FlashInfer/SGLang JIT-compile kernels at run time: the runtime needs nvcc, so the
        # slim -runtime image would fail on first use; keep the devel base.
        return (
            bases.devel,
            bases.devel,
            (
                f"runtime keeps the devel base: the stack JIT-compiles kernels "
                f"(host.min_nvcc_for_jit = {loaded.manifest.host.min_nvcc_for_jit}) and needs nvcc"
            ),
        )
    return bases.devel, bases.runtime, "slim runtime base: no kernel JIT, no compiler needed"


def recipe_inputs(
    loaded: LoadedStack,
    *,
    pins: ImagePins,
    plan: JobPlan,
    manifest_sha256: str,
    lock_sha256: str,
    source_commit: str,
    created: int,
    base: str | None = None,
    uv_image: str | None = None,
    base_python: str | None = None,
    include_tool: bool = True,
    locked_commits: Mapping[str, str] | None = None,
    proxy_ca: bool = False,
) -> RecipeInputs:
    m = loaded.manifest
    build_base, runtime_base, note = choose_bases(loaded, pins, base)
    if base_python is not None:
        python = PythonSource(mode="base", path=base_python)
    else:
        python = PythonSource(mode="uv", version=pins.python_for(m.python))
    uv = pinned_override(uv_image, "--uv-image") if uv_image else pins.uv
    env = dict(m.environment.common)
    problems = secrets_in(env, "environment.common")
    if problems:
        raise BadInput("refusing to bake credentials into an image", details=problems)
    return RecipeInputs(
        stack=m.name,
        description=m.description,
        manifest_sha256=manifest_sha256,
        lock_sha256=lock_sha256,
        uv=uv,
        build_base=build_base,
        runtime_base=runtime_base,
        runtime_note=note,
        python=python,
        plan_args=compile_env(plan, m.build),
        plan_summary=plan.summary(),
        env=env,
        labels=image_labels(
            loaded,
            manifest_sha256=manifest_sha256,
            lock_sha256=lock_sha256,
            source_commit=source_commit,
            created=created,
            base=runtime_base,
        ),
        source_packages=source_packages(loaded, locked_commits),
        include_tool=include_tool,
        proxy_ca=proxy_ca,
    )
