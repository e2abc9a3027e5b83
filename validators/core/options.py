"""Typed options of the validator groups, from `--option KEY=VALUE` or a command's own flags.

Each group reads its own model (`ctx.options.runtime.nccl_iters`, an int), never a string it
parses itself. Keys are flat (`--option nccl_iters=300`) and unique across groups; an
unknown key or a value that does not parse is BadInput (exit 2) before any group runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator

from stackgate.errors import BadInput
from stackgate.manifest import MAX_CONCURRENCY
from stackgate.manifest.values import ArchStr
from stackgate.model import StrictModel
from stackgate.path_kind import kind_of, nearest_part

Port = Annotated[int, Field(ge=1, le=65535)]


def _shown(path: Path) -> str:
    """A path in an error message: a name that is not UTF-8 (surrogate escapes) shown with
    backslashes; pydantic cannot encode the raw escapes and raised UnicodeEncodeError."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


class StaticOptions(StrictModel):
    targets: tuple[ArchStr, ...] | None = Field(
        default=None, description="GPU archs to check instead of the stack's (12.0a,10.0f)."
    )
    confirm: bool = Field(
        default=True,
        description="Confirm ABI findings by loading the modules in a child process (no GPU).",
    )
    deep: bool = Field(
        default=False, description="Load every extension module, not only those with findings."
    )


class RuntimeOptions(StrictModel):
    probe_timeout: float | None = Field(
        default=None, gt=0, description="Seconds per probe (default: the stack's check_s)."
    )
    jit_timeout: float = Field(default=600.0, gt=0, description="Seconds for a FlashInfer JIT.")
    nccl_iters: int = Field(default=200, ge=1, description="All-reduce iterations per size.")
    nccl_repeats: int = Field(default=3, ge=1, description="Timed repeats per configuration.")
    ranks: int | None = Field(
        default=None,
        ge=1,
        description="Processes for the distributed probes (default: the serving profile's tp; "
        "fewer are run only when asked, and every result says so).",
    )


class ServeOptions(StrictModel):
    host: str = Field(default="127.0.0.1", description="Address the server binds to.")
    port: Port | None = Field(default=None, description="Fixed port (fail if taken).")
    log_dir: Path | None = Field(
        default=None, description="Folder for the server logs (default: OUT_DIR/serve-logs)."
    )
    reference: Path | None = Field(default=None, description="Known-good greedy outputs.")
    record_reference: Path | None = Field(default=None, description="Record outputs here.")
    jsonl: Path | None = Field(default=None, description="Append benchmark records here.")
    concurrencies: tuple[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)], ...] | None = Field(
        default=None, description="Concurrency levels instead of the profile's."
    )

    @field_validator("reference")
    @classmethod
    def _readable(cls, path: Path | None) -> Path | None:
        """A reference given is read: a missing one, a folder, a FIFO or a device is bad
        input before any server starts, not a SKIP after the launch."""
        if path is not None and not path.is_file():
            what = "no such file" if not path.exists() else "not a regular file"
            raise ValueError(f"{_shown(path)}: {what}")
        return path

    @field_validator("record_reference", "jsonl")
    @classmethod
    def _writable_file(cls, path: Path | None) -> Path | None:
        """Written at the end of a run: an existing folder, FIFO or device there, or a parent
        that is not a folder, is bad input before any server starts."""
        if path is None:
            return path
        if kind_of(path) not in (None, "file"):
            raise ValueError(f"{_shown(path)}: exists and is not a regular file")
        parent, kind = nearest_part(path.parent)
        if kind != "folder":
            raise ValueError(f"{_shown(path)}: {_shown(parent)} is not a folder")
        return path

    @field_validator("log_dir")
    @classmethod
    def _folder(cls, path: Path | None) -> Path | None:
        if path is not None and kind_of(path) not in (None, "folder"):
            raise ValueError(f"{_shown(path)}: exists and is not a folder")
        return path


class GroupOptions(StrictModel):
    static: StaticOptions = Field(default_factory=StaticOptions)
    runtime: RuntimeOptions = Field(default_factory=RuntimeOptions)
    serve: ServeOptions = Field(default_factory=ServeOptions)


# Flat key -> the section of GroupOptions that owns it.
SECTIONS: dict[str, str] = {
    key: section
    for section, info in GroupOptions.model_fields.items()
    for key in info.annotation.model_fields  # type: ignore[union-attr]
}
_LISTS = frozenset({"targets", "concurrencies"})


def option_help() -> str:
    """Every --option KEY with its group and meaning (the fields' descriptions), for --help."""
    lines = ["--option KEY=VALUE (repeatable; lists comma-separated):"]
    for section, info in GroupOptions.model_fields.items():
        model = info.annotation
        for key, field in model.model_fields.items():  # type: ignore[union-attr]
            lines.append(f"  {key:<18} {section:<8} {field.description or ''}")
    return "\n".join(lines)


# Values that name files (fields typed Path): a file name need not be UTF-8 on Linux.
_PATHS = frozenset(
    key
    for info in GroupOptions.model_fields.values()
    for key, field in info.annotation.model_fields.items()  # type: ignore[union-attr]
    if "Path" in str(field.annotation)
)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_options(items: Sequence[str]) -> GroupOptions:
    """`--option KEY=VALUE` items -> GroupOptions; BadInput naming every bad item at once."""
    problems: list[str] = []
    sections: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            problems.append(f"--option {item!r}: expected KEY=VALUE")
            continue
        section = SECTIONS.get(key)
        if section is None:
            close = difflib.get_close_matches(key, SECTIONS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(SECTIONS)}"
            problems.append(f"--option {key}: unknown option; {hint}")
            continue
        if key not in _PATHS and not _is_utf8(raw):
            # pydantic cannot put such text into its own error message (UnicodeEncodeError)
            problems.append(f"--option {key}: {_shown(Path(raw))!r} is not UTF-8 text")
            continue
        sections.setdefault(section, {})[key] = (
            tuple(v.strip() for v in raw.split(",") if v.strip()) if key in _LISTS else raw
        )
    if not problems:
        try:
            return GroupOptions.model_validate(sections)
        except ValidationError as exc:
            for e in exc.errors():
                key = str(e["loc"][1]) if len(e["loc"]) > 1 else str(e["loc"][0])
                problems.append(f"--option {key}: {e['msg']}")
    raise BadInput("invalid --option", details=problems)
