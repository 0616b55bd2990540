"""The layers of ``kgplm/`` as its own import statements draw them (module level and inside functions).

Run ``python tests/test_import_layers.py`` for the report: the import circles, the imports of
:mod:`kgplm.methods` from below it, and the private names imported across modules.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kgplm"
#: layers that sit below the methods: none of them may import kgplm.methods
BELOW_METHODS = (
    "kgplm.kg",
    "kgplm.text",
    "kgplm.models",
    "kgplm.training",
    "kgplm.finetuning",
    "kgplm.evaluation",
    "kgplm.registry",
)


def module_names(package: Path = PACKAGE) -> dict[str, Path]:
    names = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_edges(package: Path = PACKAGE) -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """``module → modules it imports`` (``kgplm`` modules only; ``from package import module`` counts as the
    module; imports under ``if TYPE_CHECKING`` are left out) and ``(module, private name)`` pairs for
    every ``_name`` imported from another module."""
    modules = module_names(package)
    edges: dict[str, set[str]] = defaultdict(set)
    private = []
    for name, path in modules.items():
        package_name = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package_name.split(".")[: len(package_name.split(".")) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                targets = []
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
                    if alias.name.startswith("_") and not alias.name.startswith("__") and full not in modules:
                        private.append((name, f"{base}.{alias.name}"))
            else:
                continue
            edges[name] |= {target for target in targets if target in modules and target != name}
    return edges, private


def _runtime_nodes(tree: ast.AST):
    """Every node except those under an ``if TYPE_CHECKING:`` block."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(set(edges) | {t for targets in edges.values() for t in targets}):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def up_imports_of_methods(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (module, target)
        for module, targets in edges.items()
        for target in targets
        if module.startswith(BELOW_METHODS) and target.startswith("kgplm.methods")
    )


def test_the_circle_finder_finds_a_circle_and_only_circles():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(edges) == [["a", "b", "c"]]


def test_no_import_circle_among_the_graph_modules():
    edges, _ = import_edges()
    assert [circle for circle in circles(edges) if any(m.startswith("kgplm.kg") for m in circle)] == []


def test_nothing_below_the_methods_imports_them():
    edges, _ = import_edges()
    assert up_imports_of_methods(edges) == []


def test_no_private_name_is_imported_across_modules():
    _, private = import_edges()
    assert private == []


def main() -> int:
    edges, private = import_edges()
    print(f"modules: {len(module_names())}, import edges: {sum(len(t) for t in edges.values())}")
    found = circles(edges)
    print(f"import circles: {len(found)}")
    for circle in found:
        print("  " + " ↔ ".join(circle))
    up = up_imports_of_methods(edges)
    print(f"imports of kgplm.methods from {', '.join(BELOW_METHODS)}: {len(up)}")
    for module, target in up:
        print(f"  {module} → {target}")
    print(f"private names imported across modules: {len(private)}")
    for module, name in private:
        print(f"  {module} ← {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
