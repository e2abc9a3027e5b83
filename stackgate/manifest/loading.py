"""Load a manifest from TOML and report every problem at once, each as `file: dotted.path: msg`.

Three passes, all run, their findings merged: TOML syntax (stops there: nothing else can be
read), the pydantic model (types, unknown keys with "did you mean", bad versions), and cross
references on the raw data (indexes named by packages, patch files and their sha256, serving
profiles named elsewhere). Any finding raises ManifestError (exit 2); nothing is touched.
"""

from __future__ import annotations

import difflib
import itertools
import re
import tomllib
import types
import typing
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from stackgate.credentials import find_token, has_credentials, index_env_names, redact
from stackgate.errors import BadInput, ManifestError, Problem
from stackgate.files import read_text_bounded, sha256_file
from stackgate.manifest import Manifest
from stackgate.manifest.files import inside_folder, sha256_regular
from stackgate.manifest.migrate import migrate
from stackgate.paths import display_path, resolve_stack
from stackgate.validator_groups import specs

MAX_MANIFEST_BYTES = 1 << 20
_PROFILE = "serving profile"
_COPIED = "would be copied into locks, images and records"
FieldProblem = tuple[str, str]  # the dotted path of a field, what is wrong with it


@dataclass(frozen=True)
class LoadedStack:
    """A validated manifest with where it came from and the raw bytes it was read from."""

    path: Path
    manifest: Manifest
    raw: dict[str, Any]
    # what reading an older schema_version changed (stackgate.manifest.migrate), one line each
    notes: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        return self.path.parent

    def patch_path(self, relative: str) -> Path:
        return self.folder / relative

    def file_sha256(self) -> str:
        """sha256 of the manifest file as it is on disk now: the one manifest digest that run
        reports, records and image labels carry (a regular file, read in chunks)."""
        return sha256_file(self.path)


def load_stack(stack: str | Path) -> LoadedStack:
    """Resolve STACK (name or path), parse and validate it, or raise ManifestError."""
    path = resolve_stack(str(stack))
    shown = display_path(path)
    raw = read_toml(path, shown)

    migrated, notes = migrate(raw)
    data = _apply_extends(migrated)
    found: list[Iterable[FieldProblem]] = []
    manifest: Manifest | None = None
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        found.append(format_validation_errors(exc))
    found += [_cross_references(raw, path), control_characters(raw)]
    found += [_file_references(raw, path), _credentials(raw)]
    if manifest is not None and manifest.name != path.stem:
        found.append([("name", f"'{manifest.name}' must match the file name '{path.stem}'")])
    problems = [Problem(shown, *p) for p in itertools.chain(*found)]
    if problems or manifest is None:
        raise ManifestError(problems)
    return LoadedStack(path=path, manifest=manifest, raw=raw, notes=tuple(notes))


def read_toml(path: Path, shown: str) -> dict[str, Any]:
    """The manifest's TOML: a regular UTF-8 file of at most MAX_MANIFEST_BYTES, not nested so
    deep that the parser recurses out of stack."""
    try:
        text = read_text_bounded(path, MAX_MANIFEST_BYTES)
    except BadInput as exc:
        raise ManifestError([Problem("", "", exc.message)]) from None
    try:
        return tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer past 4,300 digits
        raise ManifestError([Problem(shown, "", f"invalid TOML: {exc}")]) from None
    except RecursionError:
        raise ManifestError([Problem(shown, "", "invalid TOML: nested too deeply")]) from None


def _apply_extends(raw: dict[str, Any]) -> dict[str, Any]:
    """Serving profiles may say `extends = "other"`: a shallow merge, the child's keys win."""
    serving = raw.get("serving")
    if not isinstance(serving, dict):
        return raw
    merged: dict[str, Any] = {}
    for name, profile in serving.items():
        if isinstance(profile, dict) and isinstance(profile.get("extends"), str):
            base = serving.get(profile["extends"])
            child = {k: v for k, v in profile.items() if k != "extends"}
            if isinstance(base, dict) and "extends" not in base:
                env = {**base.get("env", {}), **child.get("env", {})}
                merged[name] = {**base, **child, "env": env}
                continue
            merged[name] = child
        else:
            merged[name] = profile
    return {**raw, "serving": merged}


def format_validation_errors(exc: ValidationError) -> Iterator[FieldProblem]:
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"] if p != "[key]"]
        is_key = "[key]" in err["loc"]
        where = ".".join(loc) or "(top level)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        kind = err["type"]
        if kind == "extra_forbidden":
            known = _known_fields(err["loc"][:-1])
            msg = _unknown("key", loc[-1], known, "known keys")
        elif kind == "missing":
            msg = "required field is missing"
        elif is_key:
            msg = f"key '{loc[-1]}': {msg}"
        elif kind.endswith("_type") or kind in {"literal_error", "enum"}:
            got = err.get("input")
            msg = f"{msg} (got {type(got).__name__} {got!r})"
        yield where, msg


def _unwrap(tp: Any) -> list[Any]:
    """Concrete candidate types inside Optional / Annotated / unions."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(tp):
            out.extend(_unwrap(arg))
        return out
    return [tp]


def _known_fields(loc: tuple[int | str, ...]) -> list[str]:
    """Field names of the model found at `loc` (for did-you-mean); [] when unknown."""
    current: list[Any] = [Manifest]
    for part in loc:
        nxt: list[Any] = []
        for tp in current:
            origin = typing.get_origin(tp)
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                field = tp.model_fields.get(str(part))
                if field is not None:
                    nxt.extend(_unwrap(field.annotation))
            elif origin is dict:
                nxt.extend(_unwrap(typing.get_args(tp)[1]))
            elif origin is list:
                nxt.extend(_unwrap(typing.get_args(tp)[0]))
        current = nxt
    for tp in current:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return sorted(tp.model_fields)
    return []


def _cross_references(raw: dict[str, Any], path: Path) -> Iterator[FieldProblem]:
    """References between sections, checked on the raw data so they report with type errors."""
    indexes = raw.get("indexes", {})
    index_names = sorted(indexes) if isinstance(indexes, dict) else []
    packages = raw.get("packages", {})
    if isinstance(packages, dict):
        for pkg_name, pin in packages.items():
            if not isinstance(pin, dict):
                continue
            index = pin.get("index")
            if isinstance(index, str) and index not in index_names:
                why = _unknown("index", index, index_names, "declared indexes")
                yield f"packages.{pkg_name}.index", why
            if "git" in pin and "ref" not in pin:
                yield f"packages.{pkg_name}.ref", "git needs a ref (a tag or a commit)"
            patches = pin.get("patches", [])
            if isinstance(patches, list):
                for i, patch in enumerate(patches):
                    yield from _check_patch(f"packages.{pkg_name}.patches.{i}", patch, path)

    serving = raw.get("serving", {})
    profile_names = sorted(serving) if isinstance(serving, dict) else []
    if isinstance(serving, dict):
        for name, profile in serving.items():
            if isinstance(profile, dict) and isinstance(profile.get("extends"), str):
                base = profile["extends"]
                if base not in profile_names or base == name:
                    others = [p for p in profile_names if p != name]
                    yield f"serving.{name}.extends", _unknown(_PROFILE, base, others, "profiles")
                elif isinstance(serving[base], dict) and "extends" in serving[base]:
                    yield (
                        f"serving.{name}.extends",
                        f"'{base}' extends another profile; one level only",
                    )
    validation = raw.get("validation", {})
    if isinstance(validation, dict):
        wanted = validation.get("serve_profile")
        if isinstance(wanted, str) and wanted not in profile_names:
            yield "validation.serve_profile", _unknown(_PROFILE, wanted, profile_names, "profiles")
        required = validation.get("required")
        if isinstance(required, list) and not isinstance(wanted, str):
            for spec in specs(r for r in required if isinstance(r, str)):
                if spec.needs_serve_profile:
                    yield (
                        "validation.serve_profile",
                        f"required when '{spec.name}' is in validation.required",
                    )


def _check_patch(where: str, patch: Any, manifest_path: Path) -> Iterator[FieldProblem]:
    if not isinstance(patch, dict) or not isinstance(patch.get("path"), str):
        return
    file, why = inside_folder(manifest_path.parent, patch["path"])
    if file is None:
        yield f"{where}.path", f"'{patch['path']}' {why}"
        return
    if not file.exists():
        yield (
            f"{where}.path",
            f"patch file '{patch['path']}' not found (looked in {display_path(file)})",
        )
        return
    got, why = sha256_regular(file)
    if got is None:
        yield f"{where}.path", f"'{patch['path']}': {why}"
        return
    want = patch.get("sha256")
    if isinstance(want, str) and len(want) == 64 and got != want:
        yield f"{where}.sha256", f"'{patch['path']}' has sha256 {got}, the manifest pins {want}"


def _file_references(raw: dict[str, Any], path: Path) -> Iterator[FieldProblem]:
    """Other files the manifest names must lie inside its folder too (read later)."""
    serving = raw.get("serving", {})
    if not isinstance(serving, dict):
        return
    for name, profile in serving.items():
        ref = profile.get("correctness_reference") if isinstance(profile, dict) else None
        if isinstance(ref, str):
            _file, why = inside_folder(path.parent, ref)
            if why is not None:
                yield f"serving.{name}.correctness_reference", f"'{ref}' {why}"


# An environment variable named like a secret (HF_TOKEN, AWS_SECRET_ACCESS_KEY, WANDB_API_KEY,
# DB_PASSWORD); SGLANG_MAX_TOKENS is not one (TOKEN must be a whole `_` part).
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)(?:_|$)"
)


def _secret_name(name: str) -> bool:
    """A key or command-line flag named like a secret, in any case and with `-` or `_`
    (`HF_TOKEN`, `hf_token`, `Hf-Token`, `--api-key`); `--api-key-file` names a file."""
    upper = name.strip("-").upper().replace("-", "_")
    return bool(_SECRET_NAME.search(upper)) and not upper.endswith(_NAMES_A_PLACE)


_NAMES_A_PLACE = ("_FILE", "_PATH", "_DIR", "_ENV", "_VAR")


def _secret_flags(where: str, items: list[Any]) -> Iterator[FieldProblem]:
    """`["--api-key", "X"]` and `["--hf-token=X"]` in an argv-like list (extra_args, command)."""
    for i, item in enumerate(items):
        if not (isinstance(item, str) and item.startswith("-")):
            continue
        flag, eq, inline = item.partition("=")
        if not _secret_name(flag):
            continue
        after = items[i + 1] if i + 1 < len(items) else None
        if eq:
            value = inline
        else:  # the next item is the value unless it is the next flag
            value = after if isinstance(after, str) and not after.startswith("-") else ""
        if value:
            yield (
                f"{where}.{i}",
                f"'{flag}' passes a secret on the command line, which would be "
                "copied into locks, images, run evidence and records; give it to the engine "
                "through the environment that runs the stack",
            )


def _secrets_anywhere(raw: dict[str, Any]) -> Iterator[FieldProblem]:
    """Any string value holding a credential URL or a recognisable token, any key named like a
    secret (environment tables, in any case) with a non-empty value, and any command-line flag
    named like one with a value, wherever they sit. Values are never shown."""
    todo: list[tuple[str, Any]] = [("", raw)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                sub = f"{where}.{key}" if where else str(key)
                if _secret_name(str(key)) and isinstance(item, str) and item:
                    why = "set it in the environment that runs the stack"
                    yield sub, f"a variable named like a secret {_COPIED}; {why}"
                    continue
                todo.append((sub, item))
        elif isinstance(value, list):
            yield from _secret_flags(where, value)
            todo.extend((f"{where}.{i}", item) for i, item in enumerate(value))
        elif isinstance(value, str) and (kind := find_token(value)) is not None:
            yield where, f"holds what looks like a {kind} token, which {_COPIED}"
        elif isinstance(value, str) and "://" in value and has_credentials(value):
            if where.rsplit(".", 1)[-1] in ("url", "git") and where.split(".")[0] in (
                "indexes", "packages",
            ):  # fmt: skip
                continue  # said by _credentials with the variables to use instead
            yield where, f"'{redact(value)}' holds credentials, which {_COPIED}"


def _credentials(raw: dict[str, Any]) -> Iterator[FieldProblem]:
    """A manifest is committed and copied into locks, images and records: no credentials."""
    yield from _secrets_anywhere(raw)
    for section, key in (("indexes", "url"), ("packages", "git")):
        table = raw.get(section, {})
        if not isinstance(table, dict):
            continue
        for name, entry in table.items():
            url = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(url, str) and has_credentials(url):
                user_var, pass_var = index_env_names(name)
                how = (
                    f"set {user_var} and {pass_var} (or use netrc / a keyring)"
                    if section == "indexes"
                    else "give them to git (a credential helper or ~/.netrc)"
                )
                why = f"'{redact(url)}' holds credentials, which {_COPIED}; remove them and {how}"
                yield f"{section}.{name}.{key}", why


# Control (Cc: C0, DEL, C1), format (Cf: bidi overrides and isolates, zero-width characters,
# the byte-order mark: "trojan source" text reads differently from what it is), line and
# paragraph separators (Zl, Zp) and surrogates (Cs). Tabs pass.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _bad_char(text: str) -> str | None:
    if text.isascii() and text.isprintable():
        return None
    for c in text:
        if c != "\t" and unicodedata.category(c) in _BAD_CATEGORIES:
            return f"U+{ord(c):04X}"
    return None


def control_characters(raw: dict[str, Any]) -> Iterator[FieldProblem]:
    """Every key and string value holding a control character (a newline in a description
    would start a line of its own in a rendered Containerfile or shell script). Tabs pass."""
    todo: list[tuple[str, Any]] = [("", raw)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                sub = f"{where}.{key}" if where else str(key)
                if (bad := _bad_char(str(key))) is not None:
                    yield repr(sub), f"key contains a control character ({bad})"
                todo.append((sub, item))
        elif isinstance(value, list):
            todo.extend((f"{where}.{i}", item) for i, item in enumerate(value))
        elif isinstance(value, str) and (bad := _bad_char(value)) is not None:
            yield where, f"contains a control character ({bad}); one line of printable text"


def _unknown(kind: str, word: str, choices: list[str], what: str) -> str:
    """`unknown <kind> 'word'`, then the closest choice or, when none is close, all of them."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"unknown {kind} '{word}'; did you mean '{close[0]}'?"
    return f"unknown {kind} '{word}'; {what}: {', '.join(choices) or 'none'}"
