"""`build_image`: manifest + lock -> recipe -> context -> engine -> image (and archive).

Reproducibility: the timestamp every file and the config are clamped to comes, in order,
from SOURCE_DATE_EPOCH, the commit time of the last commit touching the lock (while the lock
is unchanged since), or 0. `check_reproducible` builds a second time under another unique
name and compares the config digest (image ID) and the manifest digest, and the archives'
manifest digests when an archive was asked for; never the archive files' own hashes, whose
tar headers differ between identical images.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from builder.compile import patches
from builder.compile.jobs import plan_jobs
from builder.image.context import assemble
from builder.image.pins import load_pins
from builder.image.recipe import RecipeInputs, recipe_inputs
from stackgate import proc
from stackgate.containers.base import BuildSpec, BuiltImage, ContainerEngine, unique_tag
from stackgate.containers.buildah import StorageConfig
from stackgate.containers.docker import DockerConfig
from stackgate.containers.select import EngineChoice, open_engine
from stackgate.errors import BadInput, CommandFailed, EnvironmentProblem
from stackgate.files import sha256_file
from stackgate.layout import LockFiles, lock_files_of
from stackgate.lock.state import LockState, read_lock
from stackgate.manifest.loading import LoadedStack
from stackgate.model import StrictModel
from stackgate.paths import project_root
from stackgate.resource_limits import HostResources


class ImageRequest(StrictModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: EngineChoice = "auto"
    tag: str | None = None
    output: Path | None = Field(default=None, description="Write an OCI archive here.")
    check_reproducible: bool = False
    lock_dir: Path | None = None
    base: str | None = None
    uv_image: str | None = None
    base_python: str | None = None
    include_tool: bool = True
    ca_bundle: Path | None = Field(
        default=None,
        description="CA bundle for a TLS-intercepting proxy: mounted for RUN steps only.",
    )
    sources: dict[str, Path] = Field(default_factory=dict)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    docker: DockerConfig = Field(default_factory=DockerConfig)
    resources: HostResources | None = None


# Where --ca-bundle is seen by RUN steps (a mount: it never becomes part of the image).
CA_BUNDLE_INSIDE = "/run/stackgate/ca-bundle.pem"


class ReproCheck(BaseModel):
    identical: bool
    compared: dict[str, list[str | None]]
    note: str = ""


class ImageResult(BaseModel):
    stack: str
    engine: str
    engine_version: str
    tag: str | None
    image_id: str
    manifest_digest: str | None
    archive: str | None = None
    archive_digest: str | None = None
    labels: dict[str, str]
    timestamp: int
    timestamp_from: str
    build_args: dict[str, str]
    seconds: float
    containerfile_sha256: str
    reproducible: ReproCheck | None = None


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        return proc.run(["git", *args], cwd=cwd, timeout=30).stdout.strip()
    except (CommandFailed, EnvironmentProblem, OSError):
        return None


def source_date_epoch(lockfile: Path) -> tuple[int, str]:
    """(timestamp, where it came from): env, the lock's last commit, or 0."""
    env = os.environ.get("SOURCE_DATE_EPOCH")
    if env:
        if not env.isdigit():
            raise BadInput(f"SOURCE_DATE_EPOCH='{env}' is not a whole number of seconds")
        return int(env), "SOURCE_DATE_EPOCH"
    folder = lockfile.parent
    changed = _git(["status", "--porcelain", "--", lockfile.name], folder)
    stamp = _git(["log", "-1", "--format=%ct", "--", lockfile.name], folder)
    if changed == "" and stamp:
        return int(stamp), f"last commit of {lockfile.name}"
    return 0, "0 (lock not committed)"


def source_commit(root: Path, inputs: list[Path]) -> str:
    """HEAD of the checkout, '-dirty' when any input differs from it; 'unknown' outside git."""
    head = _git(["rev-parse", "HEAD"], root)
    if not head:
        return "unknown"
    paths = [str(p) for p in inputs if p.exists()]
    dirty = _git(["status", "--porcelain", "--", *paths], root)
    return f"{head}-dirty" if dirty else head


@dataclass(frozen=True)
class Prepared:
    inputs: RecipeInputs
    state: LockState
    created: int
    created_from: str


def prepare(loaded: LoadedStack, request: ImageRequest) -> Prepared:
    """Everything that needs no engine: lock check, pins, job plan, labels, recipe inputs."""
    files = (
        LockFiles(request.lock_dir)
        if request.lock_dir
        else lock_files_of(loaded.path, loaded.manifest.name)
    )
    state = read_lock(loaded, files)  # missing or stale lock: exit 2 with the command to fix it
    pins = load_pins()
    plan = plan_jobs(loaded.manifest.build, resources=request.resources)
    created, created_from = source_date_epoch(files.lockfile)
    root = project_root()
    commit = source_commit(root, [loaded.path, files.folder, root / "images"])
    commits = {pkg.name: pkg.commit for pkg in patches.source_packages(loaded, state)}
    unknown = sorted(set(request.sources) - set(commits))
    if unknown:
        # Checked before any engine is asked: a tree for no package would be silently unused.
        raise BadInput(
            f"--source {', '.join(unknown)}: not a package built from source in "
            f"{loaded.manifest.name} (those are: {', '.join(sorted(commits)) or 'none'})"
        )
    inputs = recipe_inputs(
        loaded,
        pins=pins,
        plan=plan,
        manifest_sha256=loaded.file_sha256(),
        lock_sha256=state.lock_hash,
        source_commit=commit,
        created=created,
        base=request.base,
        uv_image=request.uv_image,
        base_python=request.base_python,
        include_tool=request.include_tool,
        locked_commits=commits,
        proxy_ca=request.ca_bundle is not None,
    )
    return Prepared(inputs, state, created, created_from)


def _compare(first: BuiltImage, second: BuiltImage, archives: tuple[str, str] | None) -> ReproCheck:
    compared: dict[str, list[str | None]] = {
        "config digest (image id)": [first.image_id, second.image_id],
        "manifest digest": [first.manifest_digest, second.manifest_digest],
    }
    if archives is not None:
        compared["archive manifest digest"] = list(archives)
    # A digest neither build has (docker keeps no manifest digest locally) proves nothing.
    known = [(a, b) for a, b in compared.values() if a is not None or b is not None]
    identical = bool(known) and all(a == b for a, b in known)
    return ReproCheck(identical=identical, compared=compared)


def build_image(loaded: LoadedStack, request: ImageRequest) -> ImageResult:
    prepared = prepare(loaded, request)
    inputs, created, created_from = prepared.inputs, prepared.created, prepared.created_from
    build_args = inputs.build_args(created)
    # The engine first: no point fetching sources for a build that has nothing to run on.
    with open_engine(request.engine, storage=request.storage, docker=request.docker) as engine:
        workdir = Path(tempfile.mkdtemp(prefix=f"stackgate-image-{inputs.stack}-"))
        try:
            context = workdir / "context"
            containerfile = assemble(
                context,
                inputs,
                loaded,
                prepared.state,
                tool_root=project_root(),
                sources=request.sources,
            )
            return _build_with(
                engine,
                inputs,
                request,
                context,
                containerfile,
                build_args,
                created,
                created_from,
                workdir,
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def _build_with(
    engine: ContainerEngine,
    inputs: RecipeInputs,
    request: ImageRequest,
    context: Path,
    containerfile: Path,
    build_args: dict[str, str],
    created: int,
    created_from: str,
    workdir: Path,
) -> ImageResult:
    mounts: dict[str, str] = {}
    if request.ca_bundle is not None:
        mounts[str(request.ca_bundle)] = CA_BUNDLE_INSIDE
        build_args = {**build_args, "SSL_CERT_FILE": CA_BUNDLE_INSIDE}

    def spec() -> BuildSpec:
        return BuildSpec(
            context,
            containerfile,
            unique_tag(inputs.stack),
            build_args,
            created,
            build_mounts=mounts,
        )

    first = engine.build(spec())
    archive_digest = None
    if request.output is not None:
        archive_digest = engine.export_oci(first, request.output)
    repro = None
    if request.check_reproducible:
        second = engine.build(spec())
        archives = None
        if archive_digest is not None:
            archives = (archive_digest, engine.export_oci(second, workdir / "second.tar"))
        repro = _compare(first, second, archives)
        if not engine.reproducible:
            repro = repro.model_copy(update={"note": engine.reproducible_note})
    # Without --tag or --output the image would vanish with the build name: keep it under a
    # name that says which lock it holds.
    tag = request.tag
    if tag is None and request.output is None:
        tag = f"localhost/stackgate-{inputs.stack}:lock-{inputs.lock_sha256[:12]}"
    if tag:
        engine.tag(first, tag)
        engine.keep(tag)
    return ImageResult(
        stack=inputs.stack,
        engine=engine.name,
        engine_version=engine.version,
        tag=tag,
        image_id=first.image_id,
        manifest_digest=first.manifest_digest,
        archive=str(request.output) if request.output else None,
        archive_digest=archive_digest,
        labels=first.labels,
        timestamp=created,
        timestamp_from=created_from,
        build_args=build_args,
        seconds=first.seconds,
        containerfile_sha256=sha256_file(containerfile),
        reproducible=repro,
    )
