"""The layers, read from the source: who may import whom at module level.

``analysis`` is pure functions over automata and imports nothing else of
tokendfa; ``runtime`` (loading and serving) imports only the error, limit,
regular-file and closing-distance modules of ``analysis``; ``builder`` and ``lazy`` never import
``runtime.index``; the lazy engine takes from the builder only its
configuration at module level; and no two modules import each other at
module level, directly or around a cycle. The package's own ``__init__``
importing its submodules is not counted. Checked over every import, in calls
too: ``runtime`` imports the lazy engine only inside its calls, and no layer
imports another's private (underscore) names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (("index", "tokendfa"), ("analysis", "tokendfa.analysis"))


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _module_level_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """tokendfa modules imported by the statements run at import time
    (not inside functions, not under ``if TYPE_CHECKING``)."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    statements = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Try):
            statements += node.body + [s for h in node.handlers for s in h.body]
        else:
            statements.append(node)
    imported = set()
    for node in statements:
        if isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                imported.add(candidate if candidate in known else base)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    return {m for m in imported if m in known and m != name}


GRAPH = {name: _module_level_imports(name, path, _modules()) for name, path in _modules().items()}


def test_the_layout_is_read():
    assert {"tokendfa.analysis.dfa", "tokendfa.builder.fast", "tokendfa.runtime.index", "tokendfa.lazy.index",
            "tokendfa.schema.keywords", "tokendfa.vocab.vocabulary"} <= set(GRAPH)


def _every_import(name: str, path: Path) -> list[tuple[str, str, bool]]:
    """``(module, imported name, at module level)`` for each ``from`` import of
    a tokendfa module anywhere in the file (inside functions too)."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            if base.startswith("tokendfa"):
                found += [(base, alias.name, id(node) in top) for alias in node.names]
    return found


IMPORTS = {name: _every_import(name, path) for name, path in _modules().items()}


def _layer(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_layer_imports_another_layers_private_names():
    wrong = sorted((module, f"{base}.{imported}") for module, found in IMPORTS.items()
                   for base, imported, _ in found
                   if imported.startswith("_") and _layer(base) != _layer(module))
    assert wrong == []


def test_builder_and_lazy_engine_never_import_the_runtime_index():
    """Not even inside a call: the runtime passes its ``Index`` class down."""
    wrong = sorted((module, base) for module, found in IMPORTS.items()
                   if module.startswith(("tokendfa.builder", "tokendfa.lazy"))
                   for base, imported, _ in found
                   if base.startswith("tokendfa.runtime.index") or f"{base}.{imported}" == "tokendfa.runtime.index")
    assert wrong == []


def test_runtime_imports_the_lazy_engine_only_inside_calls():
    """Loading an index file never loads the lazy engine (nor, through it,
    the builder); ``Index.from_regex`` and ``from_schema`` import it when called."""
    lazy = [(module, top) for module, found in IMPORTS.items() if module.startswith("tokendfa.runtime")
            for base, _, top in found if _layer(base) == "tokendfa.lazy"]
    assert lazy and not any(top for _, top in lazy)


@pytest.mark.parametrize("layer, allowed", [
    ("tokendfa.analysis", ("tokendfa.analysis",)),
    ("tokendfa.runtime", ("tokendfa.runtime", "tokendfa.analysis.errors", "tokendfa.analysis.limits",
                          "tokendfa.analysis.regular_files", "tokendfa.analysis.closing")),
    ("tokendfa.vocab", ("tokendfa.vocab", "tokendfa.analysis")),
    ("tokendfa.schema", ("tokendfa.schema", "tokendfa.analysis")),
    ("tokendfa.builder", ("tokendfa.builder", "tokendfa.analysis", "tokendfa.vocab", "tokendfa.runtime.arrays")),
    ("tokendfa.lazy", ("tokendfa.lazy", "tokendfa.analysis", "tokendfa.vocab", "tokendfa.runtime.arrays",
                       "tokendfa.runtime.serving", "tokendfa.builder.config")),
])
def test_each_layer_imports_only_what_its_docstring_allows(layer, allowed):
    wrong = sorted((module, target) for module, targets in GRAPH.items() if module.startswith(layer)
                   for target in targets
                   if not any(target == a or target.startswith(a + ".") for a in allowed))
    assert wrong == []


def test_no_import_cycle_at_module_level():
    state: dict[str, int] = {}
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target]
                # a package and its own submodules (``__init__`` re-exporting) are one unit
                if not all(m.startswith(cycle[0]) or cycle[0].startswith(m) for m in cycle):
                    cycles.append(" -> ".join(cycle))
            elif not state.get(target):
                visit(target, path)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if not state.get(module):
            visit(module, [])
    assert cycles == []
