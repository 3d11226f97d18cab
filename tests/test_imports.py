"""No import circle in ``tasks/`` (module level or inside functions): the Password Game's
``instance`` -> ``solver`` -> ``rules`` -> ``instance`` circle is gone for good."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

def _module_graph(package: Path) -> dict[str, set[str]]:
    """Every ``tasks`` module -> the ``tasks`` modules it imports, at module level or inside
    functions (``ast.walk`` sees both)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                deps.add(target)
                deps.update(f"{target}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = deps
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_import_cycles_in_tasks():
    graph = _module_graph(REPO / "tasks")
    assert "tasks.password_game.rules" in graph and graph["tasks.password_game.solver"]
    assert _cycles(graph) == []
