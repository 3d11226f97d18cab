"""No import circle in ``tasks/`` or ``gamerl/`` (module level or inside functions): the Password
Game's ``instance`` -> ``solver`` -> ``rules`` -> ``instance`` circle and gamerl's
``games`` -> ``rollout``/``warmstart`` -> ``evaluate`` -> ``games`` circle are gone for good.
And the trainer, and everything in ``gamerl/core/`` and ``gamerl/tracking/``, reaches the games
only through the registry (``gamerl.games.get_task``)."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

def _module_graph(package: Path) -> dict[str, set[str]]:
    """Every module of ``package`` -> the modules of ``package`` it imports, at module level or
    inside functions (``ast.walk`` sees both, ``if TYPE_CHECKING:`` blocks too). Importing
    ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``: those packages count too, except
    the importer's own (they are already being imported when it runs)."""
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
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        parents = {".".join(d.split(".")[:i]) for d in deps for i in range(1, d.count(".") + 1)}
        graph[name] = (deps | parents) - own
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


def test_no_import_cycles_in_gamerl():
    graph = _module_graph(REPO / "gamerl")
    assert "gamerl.games.registry" in graph["gamerl.core.rollout"]
    assert _cycles(graph) == []


GAME_MODULES = {"gamerl.games.password_game", "gamerl.games.wordle", "gamerl.games.openspiel",
                "gamerl.games.openspiel_eval"}
TRAINER_MODULES = ("gamerl.core.rollout", "gamerl.core.trainer", "gamerl.core.epoch",
                   "gamerl.core.evaluate", "gamerl.core.warmstart", "gamerl.core.replay")


def test_trainer_imports_no_game_module():
    """The rollout, trainer, evaluation, warm start and replay name no game: they go through
    ``get_task``, so a new game is one module and one registry line."""
    graph = _module_graph(REPO / "gamerl")
    for module in TRAINER_MODULES:
        if module in graph:
            assert not graph[module] & GAME_MODULES, module
            games = {d for d in _raw_imports(module)
                     if d.startswith("tasks.") and not d.startswith("tasks.common")}
            assert not games, (module, games)  # tasks.common: the client errors every game has


def test_games_import_nothing_of_the_trainer():
    """Dependencies point one way: the trainer uses the games, never the reverse. OpenSpiel's
    evaluation table runs the trainer's evaluation through a function the command line hands
    it (``Task.evaluation_report``), not an import."""
    graph = _module_graph(REPO / "gamerl")
    games = [m for m in graph if m.startswith("gamerl.games")]
    assert "gamerl.games.openspiel_eval" in games
    for module in games:
        assert not any(d.startswith("gamerl.core") for d in graph[module]), module


GAME_INDEPENDENT_PACKAGES = ("gamerl.core", "gamerl.tracking")
# What of gamerl.games the game-independent code may import: the Task dataclass and its
# helpers, and the registry that hands out a run's Task.
GAMES_SHARED = {"gamerl.games", "gamerl.games.base", "gamerl.games.registry"}


def test_core_and_tracking_import_no_game():
    """No module under ``gamerl/core/`` or ``gamerl/tracking/`` imports a game: neither a game's
    module in ``gamerl.games`` (``password_game``, ``wordle``, ``openspiel``, ``openspiel_eval``,
    and any game added later: everything but ``base`` and ``registry``) nor a game package of
    ``tasks/`` (``tasks.password_game``, ``tasks.wordle``, ``tasks.openspiel``, ...), at module
    level or inside functions. They reach a game through ``get_task(cfg.task)`` and its ``Task``.

    ``tasks.common`` is no game but what every game's HTTP server and client share; still,
    ``gamerl/core/`` imports no ``tasks`` module at all (``test_core_imports_no_tasks_module``):
    the client errors it catches (a lost session, too many sessions) come from
    ``gamerl.games.base``."""
    graph = _module_graph(REPO / "gamerl")
    checked = sorted(m for m in graph if m.startswith(GAME_INDEPENDENT_PACKAGES))
    assert {"gamerl.core.curriculum", "gamerl.core.rollout", "gamerl.tracking.samples",
            "gamerl.tracking.figures"} <= set(checked)
    assert "tasks.common.client" in _all_imports("gamerl.games.base")  # the check sees it
    for module in checked:
        games = {d for d in graph[module] if d.startswith("gamerl.games") and d not in GAMES_SHARED}
        assert not games, (module, games)
        game_packages = {d for d in _all_imports(module)
                         if d.split(".")[0] == "tasks" and d.split(".")[:2] != ["tasks", "common"]}
        assert not game_packages, (module, game_packages)


def test_core_imports_no_tasks_module():
    """No module under ``gamerl/core/`` imports a ``tasks`` module, ``tasks.common`` included,
    at module level or inside functions: the trainer reaches the games' code only through
    ``gamerl.games`` (the registry, and ``base``, which re-exports the client errors the rollout
    and the lost-session replay catch: ``SessionNotFoundError``, ``TooManySessionsError``)."""
    core = sorted(m for m in _module_graph(REPO / "gamerl") if m.startswith("gamerl.core"))
    assert {"gamerl.core.rollout", "gamerl.core.sessions", "gamerl.core.trainer"} <= set(core)
    for module in core:
        tasks = {d for d in _all_imports(module) if d.split(".")[0] == "tasks"}
        assert not tasks, (module, tasks)


def _all_imports(module: str) -> set[str]:
    """Every absolute name ``module`` imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``:
    ``c`` may be a module), at module level or inside functions."""
    path = REPO.joinpath(*module.split(".")).with_suffix(".py")
    if not path.exists():
        path = REPO.joinpath(*module.split("."), "__init__.py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _raw_imports(module: str) -> set[str]:
    path = REPO.joinpath(*module.split(".")).with_suffix(".py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_settings_and_run_directories_import_nothing_of_the_trainer():
    """gamerl/runs owns the run directory's names (the warm start's progress directory too),
    and gamerl/config the curriculum's stage schema: neither reads anything from gamerl/core,
    which would load torch and the trainer to check a setting or read a name."""
    graph = _module_graph(REPO / "gamerl")
    below = [m for m in graph if m.startswith(("gamerl.runs", "gamerl.config"))]
    assert {"gamerl.runs.rundir", "gamerl.config.train_config"} <= set(below)
    for module in below:
        assert not any(d.startswith("gamerl.core") for d in graph[module]), module
