"""No import cycle between the product's packages, read from the source as it is.

Every `import` / `from ... import` of stackgate/, builder/ and validators/ (module level and
inside functions alike: a lazy import is still an import) becomes an arrow between two places,
and no group of places may reach each other. A place is checked at three grains:

- the three top packages (stackgate, builder, validators);
- a subpackage right under a top package (validators.static, validators.lockcheck,
  builder.lock, ...: everything below it counts as it), or a module loose in a top package
  (stackgate.model), which is its own place;
- a package folder (its __init__ and the modules loose in it: stackgate's loose modules are
  one place, stackgate.host another), so a subpackage that uses its parent's loose modules
  is never used by another of them (stackgate.host reads stackgate.model, so no loose module
  of stackgate may read stackgate.host).

Imports under `if TYPE_CHECKING:` never run: the first two grains leave them out. The folder
grain counts them, as the house review's package-cycle count does
(benchmarks/house_walk/house_counts.py): a type named across a circle still ties the two
packages together for a reader.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "house_walk"))
from rooms import _imports  # noqa: E402  the one import-statement reader (house counts use it too)

TOPS = ("stackgate", "builder", "validators")

Graph = dict[str, set[str]]


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package's __init__)."""
    out: dict[str, tuple[Path, bool]] = {}
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def module_graph(root: Path, *, type_checking: bool = False) -> Graph:
    """module -> the product's modules it imports (a name resolves to its longest module)."""
    modules = _modules(root)
    graph: Graph = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = graph.setdefault(name, set())
        for target in _imports(tree, name, is_package, type_checking=type_checking):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return graph


def place_graph(modules: Graph, place: Callable[[str], str]) -> Graph:
    out: Graph = {}
    for source, targets in modules.items():
        here = place(source)
        arrows = out.setdefault(here, set())
        arrows.update(p for p in map(place, targets) if p != here)
    return out


def circles(graph: Graph) -> list[list[str]]:
    """The groups of two or more places that reach each other (Tarjan's strongly connected
    components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(groups)


def top_package(module: str) -> str:
    return module.split(".")[0]


def subpackage_or_loose(packages: Iterable[str]) -> Callable[[str], str]:
    names = set(packages)

    def place(module: str) -> str:
        parts = module.split(".")
        second = ".".join(parts[:2])
        return second if len(parts) > 1 and second in names else module

    return place


def _packages(root: Path) -> set[str]:
    return {name for name, (_, is_package) in _modules(root).items() if is_package}


def package_folder(packages: Iterable[str]) -> Callable[[str], str]:
    names = set(packages)
    return lambda module: module if module in names else module.rpartition(".")[0]


GRAINS: dict[str, Callable[[set[str]], Callable[[str], str]]] = {
    "top packages": lambda _: top_package,
    "subpackages": subpackage_or_loose,
    "package folders": package_folder,
}
TYPE_CHECKING_COUNTS = {"package folders"}


def grain_circles(root: Path, grain: str) -> tuple[Graph, Callable[[str], str], list[list[str]]]:
    """(the module graph, the place of a module, the circles between places) at `grain`."""
    modules = module_graph(root, type_checking=grain in TYPE_CHECKING_COUNTS)
    place = GRAINS[grain](_packages(root))
    return modules, place, circles(place_graph(modules, place))


def _arrows_between(graph: Graph, group: list[str], place: Callable[[str], str]) -> list[str]:
    """The module imports that make the circle, for the failure message."""
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if place(source) in group and place(target) in group and place(source) != place(target)
    )


@pytest.mark.parametrize("grain", GRAINS)
def test_the_product_has_no_import_cycle_between_packages(grain: str) -> None:
    modules, place, found = grain_circles(ROOT, grain)
    assert len(modules) > 200, len(modules)  # the real tree was read
    assert "validators.elf.cached_facts" in modules["validators.lockcheck.member_facts"]
    assert "stackgate.model" in modules["stackgate.host.gpus"]
    assert not found, [(g, _arrows_between(modules, g, place)[:8]) for g in found]


# The ELF/GPU facts and their caches live in one lower package: the installed-env check and
# the pre-install lock reader both read it, it reads neither, and the env check never reads
# the lock reader (which runs the env check's own checks over the facts of a lock's wheels).
LAYERS: dict[str, tuple[str, ...]] = {
    "validators.elf": ("validators.static", "validators.lockcheck"),
    "validators.static": ("validators.lockcheck",),
}
FACTS = ("ObjectFacts", "CachedFacts", "FileFactsCache", "FactsCache", "ElfObject", "GpuCode")


def layer_breaches(graph: Graph, place: Callable[[str], str]) -> list[str]:
    """The imports (type-checking ones too) from a lower place into one it must not read."""
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if place(target) in LAYERS.get(place(source), ())
    )


def test_the_facts_package_sits_below_static_and_lockcheck() -> None:
    modules = module_graph(ROOT, type_checking=True)
    breaches = layer_breaches(modules, subpackage_or_loose(_packages(ROOT)))
    assert not breaches, breaches
    assert "validators.elf.facts_cache" in modules["validators.lockcheck.scan"]
    assert "validators.elf.file_facts_cache" in modules["validators.static.run"]
    defined = {
        node.name: name
        for name, (path, _) in _modules(ROOT).items()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.ClassDef) and node.name in FACTS
    }
    assert set(defined) == set(FACTS), defined
    assert all(m.startswith("validators.elf.") for m in defined.values()), defined


def test_a_facts_module_reading_the_checks_above_it_is_a_breach(tmp_path: Path) -> None:
    """A lazy import from the facts package into static (or from static into lockcheck) is
    found, though it closes no circle."""
    _tree(
        tmp_path,
        {
            "validators/elf/cached_facts.py": "def f():\n    import validators.static.abi_check\n",
            "validators/static/abi_check.py": "import json\n",
            "validators/static/run.py": "import validators.lockcheck.scan\n",
            "validators/lockcheck/scan.py": "import json\n",
        },
    )
    modules = module_graph(tmp_path, type_checking=True)
    assert _circles(tmp_path, "package folders") == []
    assert layer_breaches(modules, subpackage_or_loose(_packages(tmp_path))) == [
        "validators.elf.cached_facts -> validators.static.abi_check",
        "validators.static.run -> validators.lockcheck.scan",
    ]


def _tree(root: Path, files: dict[str, str]) -> None:
    for top in TOPS:
        (root / top).mkdir(parents=True, exist_ok=True)
        (root / top / "__init__.py").touch()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in path.relative_to(root).parents:
            if folder.parts:
                (root / folder / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")


def _circles(root: Path, grain: str = "subpackages") -> list[list[str]]:
    return grain_circles(root, grain)[2]


def test_a_cycle_through_a_lazy_and_a_relative_import_is_found(tmp_path: Path) -> None:
    """The check reads what the code does: a function-level import and a relative one
    close a circle between two subpackages, three modules deep."""
    _tree(
        tmp_path,
        {
            "validators/static/group.py": "from validators.lockcheck.deep import x\n",
            "validators/lockcheck/deep/__init__.py": "from .inner import x\n",
            "validators/lockcheck/deep/inner.py": (
                "def x():\n    from validators.static import group\n    return group\n"
            ),
        },
    )
    assert _circles(tmp_path) == [["validators.lockcheck", "validators.static"]]


@pytest.mark.parametrize("grain", GRAINS)
def test_type_checking_imports_and_modules_of_one_package(tmp_path: Path, grain: str) -> None:
    """Modules of one package may import each other; a subpackage may use its parent's loose
    modules; an import only the type checker sees closes a circle at the folder grain alone."""
    _tree(
        tmp_path,
        {
            "validators/static/facts.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from validators.lockcheck.check import Lock\n"
            ),
            "validators/lockcheck/check.py": "import validators.static.facts\n",
            "stackgate/host/gpus.py": "from stackgate import model\n",
            "stackgate/model.py": "import json\n",
            "validators/fleet/kube.py": "from validators.fleet import spec\n",
            "validators/fleet/spec.py": "from validators.fleet import kube\n",
        },
    )
    type_only = [["validators.lockcheck", "validators.static"]]
    assert _circles(tmp_path, grain) == (type_only if grain in TYPE_CHECKING_COUNTS else [])


def test_a_loose_module_using_a_subpackage_that_uses_the_parent_is_a_folder_cycle(
    tmp_path: Path,
) -> None:
    """stackgate.build_record -> stackgate.host.gpus -> stackgate.model closes no circle of
    modules, but one between the folders stackgate and stackgate.host; likewise a folder
    nested in a subpackage and its parent."""
    _tree(
        tmp_path,
        {
            "stackgate/build_record.py": "from stackgate.host import gpus\n",
            "stackgate/host/gpus.py": "from stackgate import model\n",
            "stackgate/model.py": "import json\n",
            "validators/static/elf/read.py": "from validators.static import verdict\n",
            "validators/static/verdict.py": "from validators.static.elf import read\n",
        },
    )
    assert _circles(tmp_path, "subpackages") == []
    assert _circles(tmp_path, "package folders") == [
        ["stackgate", "stackgate.host"],
        ["validators.static", "validators.static.elf"],
    ]


def test_a_cycle_between_top_packages_is_found(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "builder/lock/origin.py": "import validators.gate.flow\n",
            "validators/gate/flow.py": "from builder.lock import origin\n",
        },
    )
    assert circles(place_graph(module_graph(tmp_path), top_package)) == [["builder", "validators"]]
