"""Read an engine's command-line flags out of its source by AST (never importing it).

SGLang 0.5.9: `ServerArgs.add_cli_args` in sglang/srt/server_args.py calls
`parser.add_argument("--flag", ...)` with literal option strings.

SGLang 0.5.17: most flags come from `ServerArgs` fields annotated `A[type, help or Arg(...)]`
(`add_cli_args_from_dataclass`: field `tp_size` -> `--tp-size`, `Arg(aliases=[...])` adds
names, `Arg(no_cli=True)` none); a few are still literal add_argument calls (deprecated
aliases such as `--cuda-graph-max-bs`). Both are read here.

vLLM 0.32.0: two sources, both read here.
- `add_argument(...)` calls with literal option strings (vllm/engine/arg_utils.py
  `EngineArgs.add_cli_args`, vllm/entrypoints/launchers/cli_args.py `make_arg_parser`).
- Flags generated from a config dataclass: `BaseFrontendArgs.add_cli_args` (cli_args.py)
  loops over `get_kwargs(cls)` and adds `f"--{key.replace('_', '-')}"` for every field of the
  class; subclasses (FrontendArgs) inherit it. `_compute_kwargs` (arg_utils.py) gives a bool
  field `argparse.BooleanOptionalAction`, which also adds `--no-<flag>`; so does an explicit
  add_argument with that action. The rule is mirrored from reading that code, not copied.
"""

from __future__ import annotations

import ast


def _option_strings(call: ast.Call) -> list[str]:
    return [
        a.value
        for a in call.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
    ]


def _is_boolean_optional(call: ast.Call) -> bool:
    return any(
        keyword.arg == "action"
        and isinstance(keyword.value, ast.Attribute)
        and keyword.value.attr == "BooleanOptionalAction"
        for keyword in call.keywords
    )


def literal_flags(source: str) -> set[str]:
    """Every literal option string of an add_argument call (and --no-x for a
    BooleanOptionalAction)."""
    flags: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr != "add_argument":
            continue
        names = _option_strings(node)
        flags.update(names)
        if _is_boolean_optional(node):
            flags.update(f"--no-{n[2:]}" for n in names if n.startswith("--"))
    return flags


def _generates_from_fields(cls: ast.ClassDef) -> bool:
    """A class whose add_cli_args turns each field name into --name (the f-string with
    key.replace('_', '-'))."""
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == "add_cli_args":
            for node in ast.walk(item):
                if isinstance(node, ast.JoinedStr):
                    parts = node.values
                    if (
                        parts
                        and isinstance(parts[0], ast.Constant)
                        and parts[0].value == "--"
                        and any(
                            isinstance(p, ast.FormattedValue)
                            and isinstance(p.value, ast.Call)
                            and isinstance(p.value.func, ast.Attribute)
                            and p.value.func.attr == "replace"
                            for p in parts[1:]
                        )
                    ):
                        return True
    return False


def _is_bool(annotation: ast.expr) -> bool:
    return isinstance(annotation, ast.Name) and annotation.id == "bool"


def dataclass_field_flags(source: str) -> set[str]:
    """Flags of every class in `source` that generates them from its fields, or inherits
    that from a class of the same module."""
    classes = {n.name: n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)}

    def chain(cls: ast.ClassDef) -> list[ast.ClassDef]:
        out = [cls]
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                out += chain(classes[base.id])
        return out

    flags: set[str] = set()
    for cls in classes.values():
        lineage = chain(cls)
        if not any(_generates_from_fields(c) for c in lineage):
            continue
        for c in lineage:
            for item in c.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    if item.target.id.startswith("_"):
                        continue
                    flag = f"--{item.target.id.replace('_', '-')}"
                    flags.add(flag)
                    if _is_bool(item.annotation):
                        flags.add(f"--no-{flag[2:]}")
    return flags


def annotated_field_flags(source: str, class_name: str, marker: str = "A") -> set[str]:
    """SGLang 0.5.17's generated flags: `--name` for each `name: A[...]` field of the class,
    plus the literal `aliases` of an `Arg(...)` in the annotation; `no_cli=True` fields none."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    flags: set[str] = set()
    for item in cls.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        ann = item.annotation
        if not (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name)):
            continue
        if ann.value.id != marker:
            continue
        parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        names = [f"--{item.target.id.replace('_', '-')}"]
        for part in parts:
            if not (isinstance(part, ast.Call) and isinstance(part.func, ast.Name)):
                continue
            for kw in part.keywords:
                if kw.arg == "no_cli" and isinstance(kw.value, ast.Constant) and kw.value.value:
                    names = []
                elif kw.arg == "aliases" and isinstance(kw.value, ast.List | ast.Tuple):
                    names += [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
        flags.update(n for n in names if isinstance(n, str))
    return flags
