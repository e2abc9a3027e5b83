"""The static group: the static checks (run.py) of the env and stack a validators run names.

No GPU needed. Every check is a Result; an env that cannot be read is one ERROR result.
"""

from __future__ import annotations

from stackgate.layout import lock_files_of
from validators.core.context import RunContext
from validators.core.results import Result, make_result
from validators.elf.file_facts_cache import FileFactsCache
from validators.static.abi_results import AbiOptions
from validators.static.run import StaticInputs, run_static

GROUP = "static"


def run_group(ctx: RunContext) -> list[Result]:
    if ctx.env_path is None:
        why = "no --env given: nothing to check statically"
        return [make_result("static.env", "SKIP", why, group=GROUP)]
    manifest, options = ctx.stack.manifest, ctx.options.static
    return run_static(
        StaticInputs(
            env_path=ctx.env_path,
            stack=manifest.name,
            manifest=manifest,
            lock=lock_files_of(ctx.stack.path, manifest.name).lockfile,
            targets=options.targets or tuple(manifest.host.target_archs),
            abi=AbiOptions(confirm=options.confirm, deep=options.deep),
            cache=FileFactsCache.default(),
        )
    )
