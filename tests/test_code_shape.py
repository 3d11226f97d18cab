"""The trainer reads as named steps: no function or method in ``gamerl/`` is longer than
``MAX_FUNCTION_LINES`` lines (``end_lineno - lineno + 1`` of its ``def``, docstring included).
A longer one is split into small functions whose names say what they do (CleanRL / verl
style), as ``rollout`` (``play_turn``, ``end_if_out_of_room``, ...), ``ppo_policy_loss``
(``importance_ratio``, ``clipped_surrogate``, ``ratio_diagnostics``) and ``Trainer._open``
were."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gamerl"
MAX_FUNCTION_LINES = 80


def _functions(path: Path) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, lines)`` of every function and method in ``path``,
    nested ones included (``Class.method``, ``outer.inner``)."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text("utf-8")), "")
    return found


def test_no_function_in_the_package_is_over_80_lines():
    files = sorted(PACKAGE.rglob("*.py"))
    assert {"rollout.py", "ppo.py", "trainer.py", "configure.py"} <= {p.name for p in files}
    functions = {f"{p.relative_to(PACKAGE.parent)}::{name} (line {line})": n
                 for p in files for name, line, n in _functions(p)}
    assert any("rollout.py::rollout " in f for f in functions)  # the walk sees them
    assert any("trainer.py::Trainer._open " in f for f in functions)
    too_long = {f: n for f, n in functions.items() if n > MAX_FUNCTION_LINES}
    assert not too_long, (f"functions over {MAX_FUNCTION_LINES} lines (split them into named "
                          f"steps): {too_long}")
