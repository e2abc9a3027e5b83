"""What a valid value in a manifest is: versions, specifiers, requirements, GPU archs, names,
digests, relative paths, engine names, environment variables, git URLs. Each is a string
type with its check (pydantic AfterValidator) and a message that says what was expected;
stackgate.manifest builds the manifest's models from them.
"""

from __future__ import annotations

import re
from typing import Annotated

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, WithJsonSchema

from stackgate.engines import ENGINE_NAMES
from stackgate.errors import BadInput
from stackgate.manifest.files import relative_problem

_ARCH_RE = re.compile(r"^(?P<major>\d{1,2})\.(?P<minor>\d)(?P<suffix>[af]?)\Z")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*\Z")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
_PY_RE = re.compile(r"^3\.\d{1,2}\Z")


def _version(value: str) -> str:
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(f"'{value}' is not a valid PEP 440 version") from None
    return value


def _specifier(value: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError(f"'{value}' is not a valid version specifier") from None
    return value


def _requirement(value: str) -> str:
    try:
        Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"'{value}' is not a valid requirement: {exc}") from None
    return value


_SM_RE = re.compile(r"(?:sm|compute)_(?P<major>\d{1,2})(?P<minor>\d)(?P<suffix>[af]?)\Z")


def _arch(value: str) -> str:
    if not _ARCH_RE.match(value):
        sm = _SM_RE.match(value)
        hint = (
            f"; did you mean '{sm['major']}.{sm['minor']}{sm['suffix']}'?"
            if sm
            else ", e.g. '12.0a', '9.0a', '10.0f', '8.9'"
        )
        raise ValueError(
            f"'{value}' is not a GPU arch; write major.minor with an optional a/f suffix{hint}"
        )
    return value


def parse_arch(value: str, *, where: str = "--targets") -> str:
    """A GPU arch given on a command line: '12.0a'; anything else is BadInput (exit 2)."""
    try:
        return _arch(value)
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None


def _name(value: str) -> str:
    if not _NAME_RE.match(value):
        raise ValueError(f"'{value}' must be lower-case letters, digits, '.', '_' or '-'")
    return value


def _sha256(value: str) -> str:
    if not _SHA256_RE.match(value):
        raise ValueError("must be 64 lower-case hex digits (sha256)")
    return value


def _python(value: str) -> str:
    if not _PY_RE.match(value):
        raise ValueError(f"'{value}' is not a Python minor version such as '3.12'")
    return value


VersionStr = Annotated[str, AfterValidator(_version)]
SpecifierStr = Annotated[str, AfterValidator(_specifier)]
RequirementStr = Annotated[str, AfterValidator(_requirement)]
ArchStr = Annotated[str, AfterValidator(_arch)]
NameStr = Annotated[str, AfterValidator(_name)]
Sha256Str = Annotated[str, AfterValidator(_sha256)]
PythonStr = Annotated[str, AfterValidator(_python)]


def _relative(value: str) -> str:
    why = relative_problem(value)
    if why is not None:
        raise ValueError(why)
    return value


RelPathStr = Annotated[str, AfterValidator(_relative)]


def _engine(value: str) -> str:
    if value not in ENGINE_NAMES:
        raise ValueError(f"unknown engine '{value}'; known: {', '.join(ENGINE_NAMES)}")
    return value


# The names come from the engine registry (stackgate.engines); the schema lists them.
EngineName = Annotated[
    str,
    AfterValidator(_engine),
    WithJsonSchema({"type": "string", "enum": list(ENGINE_NAMES)}),
]


def _env_names(values: dict[str, str]) -> dict[str, str]:
    problems: list[str] = []
    bad = [repr(k) for k in values if not _ENV_NAME_RE.match(k)]
    if bad:
        problems.append(f"not valid environment variable names: {', '.join(bad)}")
    # execve takes C strings: a NUL cannot be passed, and Python refuses to start a process
    # whose environment holds one ("embedded null byte").
    nul = [repr(k) for k, v in values.items() if "\0" in v]
    if nul:
        problems.append(f"values hold a NUL byte: {', '.join(nul)}")
    # `$NAME` / `${NAME}`: an image's ENV line expands it at build time, the venv's profile
    # sets the text as written: one manifest would make two environments. Refused in both.
    refs = [f"{k} ({m.group(0)})" for k, v in values.items() if (m := _ENV_REF_RE.search(v))]
    if refs:
        problems.append(
            f"values refer to variables: {', '.join(refs)}; an image would expand them and a "
            "venv keep them as text; write each value in full"
        )
    if problems:
        raise ValueError("; ".join(problems))
    return values


_ENV_REF_RE = re.compile(r"\$(?:\{[^}]*\}?|[A-Za-z_][A-Za-z0-9_]*)")


def _git_url(value: str) -> str:
    # `git clone <url>`: a URL starting with '-' is read as an option (--upload-pack=... runs
    # a program), the git CVE-2017-1000117 class. Only URLs git treats as URLs are taken.
    if value.startswith("-") or not re.match(r"(https?|ssh|git|file)://|[\w.-]+@[\w.-]+:|/", value):
        raise ValueError(
            f"'{value}' is not a git URL (https://, ssh://, git://, file:// or user@host:path)"
        )
    return value


EnvVars = Annotated[dict[str, str], AfterValidator(_env_names)]
GitUrlStr = Annotated[str, AfterValidator(_git_url)]


def arch_cc(arch: str) -> tuple[int, int, str]:
    """'12.0a' -> (12, 0, 'a')."""
    match = _ARCH_RE.match(arch)
    if match is None:
        raise ValueError(f"not a GPU arch: {arch}")
    return int(match["major"]), int(match["minor"]), match["suffix"]
