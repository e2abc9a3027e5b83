"""Build a stack's locked environment: exactly the lock, all or nothing, never touching the
previous environment.

The steps, each timed and recorded, run in the order `_Build._run_build` and `_Build._build`
write them: every input check before anything is created, then `<env>.partial` installed,
verified, hashed, recorded, renamed into place and selected (`current`). An env for the same
lock hash that already exists (with a record) is reused: its contents are a function of the lock.

Where the env goes and when one is reused: builder.venv.env_slot; the uv commands that install
the lock: builder.venv.install_commands; the installed set against the lock: builder.venv.installed.
Tests kill it before every step through a Reporter wrapper (builder.venv.fault_hook).
"""

from __future__ import annotations

import errno
import gc
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from builder.compile import patches
from builder.compile.history import read_history, write_history
from builder.compile.jobs import compile_env, plan_jobs
from builder.compile.watchdog import WatchReport
from builder.compile.watched import StepResult, Terminal, run_watched
from builder.kernels.request import request_digest
from builder.kernels.step import KernelsJob, build_kernels, missing_lines
from builder.lock.origin import check_listing, check_origins
from builder.lock.resolve import explain_uv_failure, locked_packages, uv_env, uv_version
from builder.lock.uvproject import index_specs
from builder.venv import atomic, base_site, bytecode, env_slot, envprofile
from builder.venv.clash_settle import settle_clashes
from builder.venv.disk_room import require_room, signals_held, writable_root
from builder.venv.install_commands import install_commands, requirements_path
from builder.venv.installed import verify_against_lock
from builder.venv.origin_ahead import OriginAhead
from builder.venv.pyc_early import EarlyPyc, known_digests
from builder.venv.topology import TopologyChoice, choose_topology
from builder.venv.uv_cache import sweep_leftovers, tree_bytes, uv_cache_dir
from builder.venv.wheel_record import check_wheel_records
from stackgate import __version__, dirfd, proc
from stackgate.build_record import (
    BaseSite,
    BuildHost,
    BuildRecord,
    BytecodeRecord,
    JobPlan,
    KernelsRecord,
    PatchRecord,
    ToolVersions,
    TreeHash,
    WheelRecords,
)
from stackgate.cli_hint import cli_command
from stackgate.envtree.digests import DigestCache
from stackgate.envtree.early_digests import EarlyHasher, valid_raw
from stackgate.env_generated import PROFILE_FORMAT
from stackgate.envtree import compute_tree, digest_patterns, file_digests, write_listing
from stackgate.errors import CheckFailed, CommandFailed, EnvironmentProblem
from stackgate.files import sha256_file
from stackgate.host.snapshot import host_snapshot
from stackgate.layout import PARTIAL_SUFFIX, EnvLayout, lock_files_of
from stackgate.manifest.loading import LoadedStack
from stackgate.lock.state import LockState, read_lock
from stackgate.owned_files import open_owned
from stackgate.paths import display_path
from stackgate.python_finder import Interpreter, find_python
from stackgate.settings import cache_root
from stackgate.topology import Topology
from stackgate.uvbin import uv_bin
from stackgate.envtree.wheel_records import read_claims


@dataclass(frozen=True)
class BuildOptions:
    venv_root: Path
    locks_root: Path | None = None
    python: str | None = None
    topology: Topology | None = None
    index_map: dict[str, str] = field(default_factory=dict)
    offline: bool = False
    wheelhouse: Path | None = None
    repair: bool = False
    # Another Python's site-packages to layer the venv over (builder/venv/base_site.py).
    base_site: Path | None = None
    # Just-in-time kernels to build into the env (builder/kernels/step.py).
    kernels: KernelsJob | None = None
    # Byte-code compiled into the env's site-packages (builder/venv/bytecode.py); off only to
    # measure what it costs and saves (benchmarks/kernels_ahead/bytecode_cost.py).
    bytecode: bool = True
    # UV_INDEX_<NAME>_USERNAME/PASSWORD from --index-map: in uv's environment only, never in a
    # file, a log or this process's environment.
    credentials: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class BuildOutcome:
    record: BuildRecord
    env: Path
    reused: bool
    removed_partials: list[Path]
    log: Path
    lock_wait_s: float


@dataclass(frozen=True)
class _Checked:
    """The inputs, checked before anything is created: the lock, the interpreter, the source
    packages with their patches' hashes verified, the --base-site folder (resolved); and what
    was decided from them: the compile jobs, the topology and its environment profile."""

    state: LockState
    python: Interpreter
    sources: list[patches.SourcePackage]
    patch_records: list[PatchRecord]
    base_site: Path | None
    plan: JobPlan
    choice: TopologyChoice
    profile: dict[str, str]


# Each source package with the folder it is built from.
_Trees = list[tuple[patches.SourcePackage, Path]]


@dataclass(frozen=True)
class _Partial:
    """The env being built, `<final>.partial`: made and opened once, relative to the opened
    stack folder; every step reaches it through that descriptor (dirfd.held_path), so a
    symlink swapped in at its name leads nothing anywhere, and the publish checks what it
    renamed. `early` reads each wheel's files while uv installs the next ones (one read of
    every file: the tree hash and the RECORD check take these digests where it is unchanged)."""

    final: Path
    name: str
    stack_fd: int
    fd: int
    path: Path
    early: EarlyHasher

    @property
    def shown(self) -> Path:
        return self.final.parent / self.name

    @classmethod
    def open(cls, final: Path) -> _Partial:
        name = final.name + PARTIAL_SUFFIX
        stack_fd = dirfd.open_dir(final.parent)
        try:
            fd = dirfd.make_child(stack_fd, name, where=final.parent / name)
        except BaseException:
            os.close(stack_fd)
            raise
        path = dirfd.held_path(fd)
        early = EarlyHasher(path, digest_patterns(path, (final.parent / name, final)), file_digests)
        return cls(final, name, stack_fd, fd, path, early)

    def close(self) -> None:
        self.early.close()
        os.close(self.fd)
        os.close(self.stack_fd)


class Reporter:
    """UI callbacks; the default does nothing (the CLI passes a rich one)."""

    def step(self, name: str, detail: str = "") -> None:
        return None

    def line(self, text: str) -> None:
        return None

    def note(self, text: str) -> None:
        """Something the user should know (always shown, piped or not)."""
        return None

    def done(self, name: str, seconds: float) -> None:
        return None

    def terminal(self) -> AbstractContextManager[Terminal | None]:
        """While uv installs: the user's terminal, for uv to draw its own progress on; None
        (the default) keeps its output to the log and line()."""
        return nullcontext(None)


@dataclass
class _Timer:
    reporter: Reporter
    timings: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def step(self, name: str, detail: str = "") -> Iterator[None]:
        self.reporter.step(name, detail)
        started = time.monotonic()
        yield
        self.timings[name] = round(time.monotonic() - started, 3)
        self.reporter.done(name, self.timings[name])


def build_host(plan: JobPlan) -> BuildHost:
    ident = host_snapshot().identity
    assert ident is not None  # host_snapshot() always probes the identity
    return BuildHost(
        hostname=ident.hostname,
        kernel=ident.kernel,
        machine=ident.machine,
        os_release=ident.os_release,
        usable_cpus=plan.usable_cpus,
        mem_total_bytes=plan.resources.mem_total,
        swap_bytes=plan.swap_bytes,
        cgroup_version=plan.resources.cgroup_version,
    )


def _git_version() -> str | None:
    try:
        return proc.run(["git", "--version"]).stdout.strip().removeprefix("git version ")
    except (CommandFailed, EnvironmentProblem):
        return None


def _raise_step_failure(
    result: StepResult, what: str, state: LockState, loaded: LoadedStack, options: BuildOptions
) -> None:
    text = "\n".join(result.tail)
    # uv wraps its error chain at the terminal's width, so a phrase can span two lines (where
    # depends on the path's length): matched with the whitespace collapsed.
    flat = " ".join(text.split())
    if "No space left on device" in flat or "Disk quota exceeded" in flat:
        raise EnvironmentProblem(f"disk full while {what}", details=result.tail[-6:])
    if "Hash mismatch" in flat or "hash mismatch" in flat:
        raise EnvironmentProblem(
            f"hash mismatch while {what}: a source serves a different file than the lock pins",
            details=result.tail[-8:],
        )
    failure = CommandFailed(result.argv, result.returncode, text, text)
    mapping = {**state.index_map, **options.index_map}
    raise explain_uv_failure(failure, index_specs(loaded.manifest, mapping), {}) from None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic collector off while uv installs: the early reader and the index listing
    allocate an object or more per file and per listed entry, and each collection walked the
    build's whole heap (~1.6 CPU-s of a cu128 build under perf, on the cores uv copies with);
    neither makes cycles that must go before the install ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


class _Build:
    def __init__(self, loaded: LoadedStack, options: BuildOptions, reporter: Reporter) -> None:
        self.loaded = loaded
        self.options = options
        self.reporter = reporter
        self.timer = _Timer(reporter)
        self.layout = EnvLayout(options.venv_root.resolve(), loaded.manifest.name)
        self.log = self.layout.stack_dir / "build.log"
        self.watch = WatchReport()
        self.lock_fd: int | None = None
        # The origin check's index listing while the build goes on (builder.venv.origin_ahead);
        # None once it has passed, or when there is none to read.
        self.origins: OriginAhead | None = None
        # the byte-code step's interpreter probe and store, made before the install, and the
        # `.pyc` put in place while uv installs (builder.venv.pyc_early)
        self.pyc_ready: bytecode.Prepared | None = None
        self.early_pyc: EarlyPyc | None = None

    def _origins_passed(self) -> None:
        """Wait for the index listing; its refusal (BadInput) or failure raised here."""
        if self.origins is not None:
            pending, self.origins = self.origins, None
            pending.wait()

    def _uv_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """uv's environment, with the index credentials."""
        return uv_env({**self.options.credentials, **(extra or {})})

    def _step_env(self, plan: JobPlan, venv: Path | None = None) -> dict[str, str]:
        env = self._uv_env(compile_env(plan, self.loaded.manifest.build))
        if venv is not None:
            env["UV_PROJECT_ENVIRONMENT"] = str(venv)
        return env

    def _run(
        self,
        argv: list[str | Path],
        what: str,
        checked: _Checked,
        *,
        into: _Partial | None = None,
        terminal: Terminal | None = None,
        check: bool = True,
    ) -> bool:
        """Run one step's command; False when it failed and `check` is off. `into`: the env uv
        installs the lock into, from the lock's folder."""
        plan = checked.plan
        result = self._watched(
            argv,
            plan,
            env=self._step_env(plan, into.path if into else None),
            cwd=checked.state.files.folder if into else None,
            on_line=self.reporter.line,
            terminal=terminal,
        )
        # compile jobs: their peaks plan the next build's jobs (write_history)
        self.watch.peak_total_rss = max(self.watch.peak_total_rss, result.watch.peak_total_rss)
        self.watch.peak_job_rss = max(self.watch.peak_job_rss, result.watch.peak_job_rss)
        self.watch.jobs_seen += result.watch.jobs_seen
        if result.returncode != 0 and check:
            _raise_step_failure(result, what, checked.state, self.loaded, self.options)
        return result.returncode == 0

    def _watched(
        self,
        argv: Sequence[str | Path],
        plan: JobPlan,
        *,
        env: Mapping[str, str],
        cwd: Path | None,
        on_line: Callable[[str], None],
        terminal: Terminal | None = None,
    ) -> StepResult:
        """argv under the build's watchdog (the plan's memory bounds, the build log, the held
        lock); its pauses are counted."""
        result = run_watched(
            argv,
            env=env,
            cwd=cwd,
            limit_bytes=max(plan.usable_memory_bytes, 1),
            pause_at_bytes=plan.memory_budget_bytes or None,
            log_path=self.log,
            on_line=on_line,
            keep_fds=(self.lock_fd,) if self.lock_fd is not None else (),
            terminal=terminal,
        )
        self.watch.pauses += result.watch.pauses
        return result

    def _sweep_uv_cache(self) -> None:
        """Remove uv's partial extractions (`.tmp*` in its cache) when no uv is running."""
        cache = uv_cache_dir(self._uv_env())
        if cache is None:
            return
        try:
            swept = sweep_leftovers(cache)
        except OSError as exc:  # never the reason a build fails (nor masks why it did)
            self.reporter.note(f"could not clean uv's cache {cache}: {exc}")
            return
        if swept.removed:
            self.reporter.note(
                f"removed {len(swept.removed)} partial extraction(s) an interrupted uv left in "
                f"{cache} ({swept.bytes / 2**30:.2f} GiB)"
            )

    def _kernels(
        self, job: KernelsJob, part: _Partial, installed: dict[str, str], checked: _Checked
    ) -> KernelsRecord:
        count = sum(len(r.kernels) for _p, r in job.requests)
        scratch = part.final.with_name(part.final.name + ".kernels" + PARTIAL_SUFFIX)
        site = envprofile.site_packages(part.path)
        sites = [site, *([checked.base_site] if checked.base_site is not None else [])]
        try:
            with self.timer.step("kernels", f"building {count} just-in-time kernel(s)"):
                jobs, note = checked.plan.jobs, self.reporter.note
                record = build_kernels(
                    part.path, site, sites, installed, job, scratch, jobs, on_line=note
                )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        for line in missing_lines(record):
            self.reporter.note(line)
        return record

    def _pyc_runner(self, plan: JobPlan) -> bytecode.Runner:
        def run(
            argv: Sequence[str], env: Mapping[str, str], on_line: Callable[[str], None]
        ) -> tuple[int, list[str]]:
            def both(line: str) -> None:
                on_line(line)
                self.reporter.line(line)

            result = self._watched(argv, plan, env=env, cwd=None, on_line=both)
            return result.returncode, result.tail

        return run

    def _early_pyc(self, part: _Partial, plan: JobPlan) -> EarlyPyc | None:
        """The byte-code step's probe and store, before the install; the hook that puts stored
        `.pyc` in place as the early reader reads each source (None without a store)."""
        python = part.path / "bin" / "python"
        ready = bytecode.prepare(python, os.environ, self._pyc_runner(plan), cache_root() / "pyc")
        self.pyc_ready = ready
        if ready.store is None:
            return None
        site = envprofile.site_packages(part.path)
        site_rel = f"{site.relative_to(part.path)}/"
        shipped = part.early.shipped_pyc
        self.early_pyc = EarlyPyc(site, site_rel, ready.tag, ready.store, shipped)
        return self.early_pyc

    def _bytecode(self, part: _Partial, plan: JobPlan) -> BytecodeRecord:
        partial = part.path
        site = envprofile.site_packages(partial)
        placed = self.early_pyc.close() if self.early_pyc is not None else {}
        known = known_digests(part.early.results, site, f"{site.relative_to(partial)}/")
        run = self._pyc_runner(plan)
        with self.timer.step("bytecode", f"compiling byte-code with {plan.jobs} job(s)"):
            ready = self.pyc_ready or bytecode.prepare(
                partial / "bin" / "python", os.environ, run, cache_root() / "pyc"
            )
            record = bytecode.compile_site(ready, site, plan.jobs, run, placed=placed, known=known)
        if record.failed:
            self.reporter.note(
                f"{record.failed} .py file(s) of the env do not compile under its Python (nor "
                f"import): {', '.join(record.failed_examples)}"
                + (" ..." if record.failed > len(record.failed_examples) else "")
            )
        return record

    def run(self) -> BuildOutcome:
        try:
            return self._run_build()
        except Exception:
            # The listing found an input error (exit 2) before anything else could, when it
            # ran first: it still comes first.
            self._origins_passed()
            raise
        finally:
            self.origins = None  # a listing still in flight is abandoned (a daemon thread)

    def _run_build(self) -> BuildOutcome:
        loaded, opts, layout, timer = self.loaded, self.options, self.layout, self.timer
        manifest = loaded.manifest
        # Every input check runs before anything is created, fetched or locked: bad input
        # (exit 2) leaves the venv root exactly as it was. The one exception is the index
        # listing below (network): it goes on beside the build, which installs from uv's cache
        # alone until it has passed (builder.venv.origin_ahead); its refusal removes the
        # partial env and publishes nothing.
        with timer.step("lock", "reading the lock and checking the patches it needs"):
            state = read_lock(loaded, lock_files_of(loaded.path, manifest.name, opts.locks_root))
            # `uv sync --frozen` fetches the lock's own URLs: each must be a file its index
            # lists (mirrors and wheelhouses install by hash through `uv pip install`)
            check_origins(manifest, state, listing=False, extra_map=opts.index_map)
            if not opts.offline and not opts.index_map:
                network = not _truthy(os.environ.get("UV_OFFLINE"))
                self.origins = OriginAhead(lambda: check_listing(manifest, state, network=network))
            sources = patches.source_packages(loaded, state)
            patch_records = [r for pkg in sources for r in patches.verify_patch_hashes(pkg)]
        with timer.step("python", f"finding Python {manifest.python}"):
            python: Interpreter = find_python(manifest.python, opts.python)
            # Needs the interpreter's X.Y; checked here, not after the install.
            base = (
                base_site.check_base_site(opts.base_site, python.version)
                if opts.base_site is not None
                else None
            )
        with timer.step("plan", "planning compile jobs"):
            history = read_history(layout.stack_dir)
            plan = plan_jobs(
                manifest.build,
                measured_peak_per_job_bytes=history.peak_rss_per_job_bytes if history else None,
            )
        with timer.step("topology", "choosing the environment profile"):
            choice: TopologyChoice = choose_topology(opts.topology)
            profile = manifest.env_for(choice.topology)
        writable_root(layout)  # a read-only --venv-root: exit 3 naming it, before anything
        self.reporter.step("wait-lock", f"waiting for {display_path(layout.lock_path)}")
        with atomic.build_lock(layout) as held:
            waited = held.waited_s
            self.lock_fd = held.fd
            timer.timings["wait-lock"] = round(waited, 3)
            self.reporter.done("wait-lock", waited)
            sizes = {p: tree_bytes(p) for p in atomic.leftovers(layout)}
            removed = atomic.remove_partials(layout)
            for path in removed:
                self.reporter.note(
                    f"removed {display_path(path)} ({sizes.get(path, 0) / 2**30:.2f} GiB), "
                    "left by an interrupted build"
                )
            self._sweep_uv_cache()  # what a killed earlier build's uv left in its cache
            kernels = (
                request_digest([r for _p, r in opts.kernels.requests]) if opts.kernels else None
            )
            final, existing = env_slot.pick_env(layout, state, choice, profile, kernels)
            if existing is not None:
                with timer.step("origins", "checking the lock's files against their indexes"):
                    self._origins_passed()
                with timer.step("check", f"hashing {display_path(final)} again"):
                    damage = env_slot.damage(final, existing)
                if not damage:
                    with timer.step("switch", "selecting the existing env"):
                        atomic.switch_current(layout, final)
                    return BuildOutcome(existing, final, True, removed, self.log, waited)
                if not opts.repair:
                    raise CheckFailed(
                        f"{final} was built for this lock but its files changed since; "
                        f"repair it with: {cli_command(['build', manifest.name, '--repair'])} "
                        "(builds a fresh copy beside it; the damaged one is left as it is)",
                        details=damage,
                    )
                final = env_slot.repair_name(final)
            checked = _Checked(state, python, sources, patch_records, base, plan, choice, profile)
            # Enough free disk for the env (and uv's cache), before the .partial exists.
            for note in require_room(
                state, loaded.manifest.name, layout.root, uv_cache_dir(self._uv_env())
            ):
                self.reporter.note(note)
            return self._build(checked, final, removed, waited)

    def _build(
        self, checked: _Checked, final: Path, removed: list[Path], waited: float
    ) -> BuildOutcome:
        opts, timer, state, choice = self.options, self.timer, checked.state, checked.choice
        src_root = final.with_name(final.name + ".src" + PARTIAL_SUFFIX)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        os.close(open_owned(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))  # never a link
        part = _Partial.open(final)
        partial = part.path
        try:
            trees = self._sources(checked.sources, src_root)
            self._venv(checked.python, part)
            self._install(checked, part, [pkg.name for pkg, _ in trees])
            if self.origins is not None:
                # Before anything runs the installed code or the env becomes visible.
                with timer.step("origins", "checking the lock's files against their indexes"):
                    self._origins_passed()
            if trees:
                self._compile(trees, part, checked)
            self._clashes(part)
            with timer.step("profile", f"applying the {choice.topology or 'common'} profile"):
                envprofile.apply_profile(partial, checked.profile, choice)
            with timer.step("verify", "comparing installed packages with the lock"):
                installed = verify_against_lock(partial, state)
            layered = None
            if checked.base_site is not None:
                with timer.step("layer", f"appending {checked.base_site} through a .pth"):
                    layered = base_site.layer(partial, checked.base_site)
            kernels = None
            if opts.kernels is not None:
                kernels = self._kernels(opts.kernels, part, installed, checked)
            bytecode_record = self._bytecode(part, checked.plan) if opts.bytecode else None
            tree, records = self._hash_and_check(part)
            record = self._record(
                checked, part, installed, layered, kernels, bytecode_record, tree, records
            )
            with timer.step("publish", f"renaming into {display_path(final)}"):
                atomic.publish_at(part.stack_fd, part.name, final, part.fd)
            with timer.step("switch", "switching current"):
                atomic.switch_current(self.layout, final)
        except OSError as exc:
            atomic.remove_partial_at(part.stack_fd, part.name)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise EnvironmentProblem(f"disk full while building {final.name}: {exc}") from exc
            raise
        except BaseException as exc:
            self._remove_interrupted(part, exc)
            raise
        finally:
            part.close()
            shutil.rmtree(src_root, ignore_errors=True)
            requirements_path(self.layout.stack_dir).unlink(missing_ok=True)
            self._sweep_uv_cache()  # an install interrupted now leaves nothing behind
        if self.watch.jobs_seen and self.watch.peak_job_rss:
            write_history(
                self.layout.stack_dir,
                peak=self.watch.peak_job_rss,
                jobs_seen=self.watch.jobs_seen,
                lock_hash=state.lock_hash,
            )
        # The record's timings lack the last steps (they happen after it is written); the
        # outcome carries all of them.
        full = record.model_copy(update={"timings_s": dict(timer.timings)})
        return BuildOutcome(full, final, False, removed, self.log, waited)

    def _sources(self, sources: list[patches.SourcePackage], src_root: Path) -> _Trees:
        """Each source package fetched and patched: its tree to build from."""
        with self.timer.step("sources", "fetching sources and applying patches"):
            trees: _Trees = []
            for pkg in sources:
                repo = patches.checkout(pkg, src_root / pkg.name)
                patches.check_and_apply(pkg, repo)
                trees.append((pkg, patches.build_dir(pkg, repo)))
        return trees

    def _venv(self, python: Interpreter, part: _Partial) -> None:
        with self.timer.step("venv", f"creating {display_path(part.shown)}"):
            argv: list[str | Path] = [uv_bin(), "venv", "--no-config", "--relocatable"]
            proc.run([*argv, "--python", python.path, part.path], env=self._uv_env())

    def _install(self, checked: _Checked, part: _Partial, sources: list[str]) -> None:
        opts, state = self.options, checked.state
        what = f"installing {len(locked_packages(state))} locked packages"
        with self.timer.step("install", what):
            commands = install_commands(
                self.loaded.manifest,
                state,
                part.path / "bin" / "python",
                sources,
                stack_dir=self.layout.stack_dir,
                offline=opts.offline,
                wheelhouse=opts.wheelhouse,
                index_map=opts.index_map,
            )
            early_pyc = self._early_pyc(part, checked.plan) if opts.bytecode else None
            part.early.start(early_pyc.offer if early_pyc is not None else None)
            # On a terminal uv draws its own progress (downloads in bytes) there.
            with self.reporter.terminal() as terminal, _collector_paused():
                cached = self.origins is not None and len(commands) == 1
                if cached and self._install_cached(commands[0], checked, part, terminal):
                    commands = []
                for argv in commands:
                    self._run(argv, "installing the lock", checked, into=part, terminal=terminal)
            # uv read uv.lock again from the folder: the env is the lock's only if that
            # is still the lock that was checked and hashed.
            if sha256_file(state.files.lockfile) != state.lock_hash:
                raise EnvironmentProblem(
                    f"{state.files.lockfile} changed while it was being installed; the "
                    "env may hold another lock than the one checked: build again",
                    details=[f"hashed before the install: {state.lock_hash[:16]}"],
                )

    def _install_cached(
        self, argv: list[str | Path], checked: _Checked, part: _Partial, terminal: Terminal | None
    ) -> bool:
        """While the listing is still being read: the lock from uv's cache only (nothing
        downloaded) and no source distribution built (no code from the lock runs). False, once
        the listing has passed, when the cache lacks files of the lock."""
        cache_only = [*argv, "--offline", "--no-build"]
        what = "installing the lock from uv's cache"
        if self._run(cache_only, what, checked, into=part, terminal=terminal, check=False):
            return True
        self.reporter.note(
            "uv's cache lacks files of this lock: they are downloaded once their indexes list them"
        )
        self._origins_passed()
        return False

    def _compile(self, trees: _Trees, part: _Partial, checked: _Checked) -> None:
        summary = f"building {len(trees)} source package(s): {checked.plan.summary()}"
        with self.timer.step("compile", summary):
            for pkg, src_tree in trees:
                argv: list[str | Path] = [uv_bin(), "pip", "install", "--no-config", "--python"]
                argv += [part.path / "bin" / "python", "--no-deps", src_tree]
                if self.options.offline:
                    argv += ["--offline"]
                self._run(argv, f"building {pkg.name}", checked)

    def _clashes(self, part: _Partial) -> None:
        """Before anything from the env runs: a path several wheels install holds the copy the
        lock-order rule chooses, whatever order uv's parallel writes ended in."""
        with self.timer.step("clashes", "giving paths several wheels install their chosen copy"):
            claims = read_claims(part.path, part.early.parsed_records())
            settled = settle_clashes(part.path, uv_cache_dir(self._uv_env()), claims)
        for item in settled:
            if not item.found:
                self.reporter.note(
                    f"{item.path}: no verified copy of {item.chosen}'s file to put in place; "
                    "the env keeps the copy uv wrote last, so its tree hash may differ "
                    "from another build of this lock"
                )

    def _hash_and_check(self, part: _Partial) -> tuple[TreeHash, WheelRecords]:
        """The tree hash, then each file against its wheel's RECORD with the same pass's
        digests: every file is read once (a clash is recorded, a file no owner's RECORD
        matches refuses the build with its cause)."""
        partial = part.path
        with self.timer.step("hash", "hashing the installed files"):
            read_early = part.early.finish()
            with DigestCache() as cache:
                own = (partial, part.shown, part.final)
                listed = compute_tree(partial, own_paths=own, cache=cache, early=read_early)
            write_listing(partial, listed)
            tree = TreeHash(
                sha256=listed.sha256, files=listed.files, bytes=listed.bytes, scheme=listed.scheme
            )
        with self.timer.step("records", "checking the files against their wheels' RECORDs"):
            raw = {**valid_raw(partial, read_early, listed.raw), **listed.raw}
            # the RECORDs as the watcher read them during the install, where unchanged
            claims = read_claims(partial, part.early.parsed_records())
            records = check_wheel_records(
                partial, raw, uv_cache=uv_cache_dir(self._uv_env()), claims=claims
            )
        for clash in records.clashes:
            if not clash.same_bytes:
                self.reporter.note(
                    f"{clash.path} is installed by {', '.join(clash.owners)}; the env "
                    f"holds the copy of {' and '.join(clash.holds) or 'none of them'} "
                    "(the last owner in the lock's order)"
                )
        return tree, records

    def _record(
        self,
        checked: _Checked,
        part: _Partial,
        installed: dict[str, str],
        layered: BaseSite | None,
        kernels: KernelsRecord | None,
        bytecode_record: BytecodeRecord | None,
        tree: TreeHash,
        records: WheelRecords,
    ) -> BuildRecord:
        opts, state, final, plan = self.options, checked.state, part.final, checked.plan
        with self.timer.step("record", "writing the build record"):
            record = BuildRecord(
                stack=self.loaded.manifest.name,
                manifest_path=str(self.loaded.path.resolve()),
                manifest_hash=state.manifest_hash,
                lock_hash=state.lock_hash,
                env_name=final.name,
                env_path=str(final),
                created_at=datetime.now(UTC).isoformat(timespec="seconds"),
                offline=opts.offline,
                wheelhouse=str(opts.wheelhouse.resolve()) if opts.wheelhouse else None,
                host=build_host(plan),
                tools=ToolVersions(
                    stackgate=__version__,
                    uv=uv_version(),
                    python=checked.python.version,
                    python_path=str(checked.python.path),
                    git=_git_version(),
                ),
                timings_s=dict(self.timer.timings),
                topology=checked.choice.topology,
                topology_source=checked.choice.source,
                env_profile=checked.profile,
                env_profile_format=PROFILE_FORMAT,
                job_plan=plan,
                peak_rss_bytes=self.watch.peak_total_rss or None,
                peak_rss_per_job_bytes=self.watch.peak_job_rss or None,
                watchdog_pauses=self.watch.pauses,
                patches=checked.patch_records,
                packages=installed,
                base_site=layered,
                tree=tree,
                wheel_records=records,
                kernels=kernels,
                bytecode=bytecode_record,
            )
            record.write(part.path)
        return record

    def _remove_interrupted(self, part: _Partial, exc: BaseException) -> None:
        """Ctrl-C or SIGTERM: the half-built env (gigabytes) goes, by name in the opened stack
        folder (never through a link swapped in), and a second Ctrl-C during the removal does
        not stop it half-way; what is left is said."""
        size = tree_bytes(part.path)
        with signals_held():
            atomic.remove_partial_at(part.stack_fd, part.name)
        if isinstance(exc, KeyboardInterrupt) and size:
            left = os.path.lexists(part.shown)
            self.reporter.note(
                f"interrupted: {'could not remove' if left else 'removed'} "
                f"{display_path(part.shown)} ({size / 2**30:.2f} GiB)"
                + ("; the next build removes it" if left else "")
            )


def build_env(
    loaded: LoadedStack, options: BuildOptions, reporter: Reporter | None = None
) -> BuildOutcome:
    return _Build(loaded, options, reporter or Reporter()).run()
