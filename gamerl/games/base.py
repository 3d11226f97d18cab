"""What a game is to the trainer: the ``Task`` dataclass, and helpers the games share.

The rollout, PPO, evaluation and warm start are written once; a ``Task`` tells them, for one
game (one module each: ``password_game``, ``wordle``, ``openspiel``; the registry is
``gamerl.games.registry``):

* **instances**: what one episode is. The Password Game: a seed (``int``; under a curriculum
  over its rules a dict ``{"seed", "num_rules"}``). Wordle: a dict
  ``{"seed", "answer"}`` (held-out evaluation uses a fixed set of answers that training never
  sees: seeds alone would not hold answers out, since any 2,309 seeds cover most answers).
  OpenSpiel: a dict ``{"seed", "game", "opponent"}`` (the curriculum picks the game and opponent).
  ``start(make_env, instance) -> (env, first observation)`` opens an episode;
* **text**: the default system prompt, the action in a model's answer (``extract``: the
  password, the guess, the move) and the user message after a move (``feedback``);
* **numbers**: ``turn_stats(info)`` (a few numbers kept per turn), ``metrics(episodes, cfg)``
  (the game's own evaluation columns beside reward and success), ``badness(episode)`` in [0, 1]
  (the failure replay's priority), ``metric_descriptions`` (what its columns are, for figures)
  and ``metric_entry_labels`` (the names of a list-valued column's entries, for figures);
  ``report_columns`` (the columns of its results tables, a ``ReportColumn`` each: the benchmark
  docs' tables of its runs, the trainer's and the CLI's console table; reward, success and
  turns unless the game names its own);
* **helpers**: ``demo(cfg, rng)`` answers for the warm start (format, not skill; optional:
  ``expert_demo(cfg, rng)``, an expert's answers, skill included), and
  ``reference_agents(cfg)`` (the solver / random rows of an evaluation table, keyed by short
  names) with ``reference_labels`` (what each row is, as tables and figures print it);
* **optional** (a game may leave them out): ``record_fields(episode)``, the game's own fields of
  an episode's line in episodes.jsonl (the Password Game's rules satisfied, OpenSpiel's
  outcome); ``sample_table`` (a ``SampleTable``: the columns of the game's sample episodes in
  the validation log, what an outcome is, which episodes are the same game; without one the
  table shows instance | actions | result); ``curriculum`` (a ``CurriculumChoices``: what the
  stages of ``gamerl.core.curriculum`` may name, and the default stages; without one the game
  has no curriculum); ``presets`` (what the game changes in a preset: ``get_config``'s
  ``(task, preset)`` step, e.g. Wordle's shorter answers); and the pieces past the trainer
  (``server_port``, ``config_files``, ``wizard``, ``verl``: the run's JSON files,
  ``configure``, the verl bridge; ``pieces``).

Nothing here imports the trainer (``gamerl.core``): the games depend on this module only, and
the trainer reaches them through ``gamerl.games.get_task``. An ``Episode`` below is
``gamerl.core.rollout.Episode``.

Answer extraction (``extract_answer``, every game's rule; ``after_marker`` for the games whose
marker is not ``Password:``), in order:
1. if ``</think>`` occurs, keep only the text after its last occurrence (drops thinking);
   an unclosed ``<think>`` drops everything from it to the end;
2. if ``Password:`` occurs (any case), keep the text after its LAST occurrence;
3. take the first non-empty line, skipping lines that are only a code fence (```` ``` ````);
4. strip surrounding whitespace, then matching wrapping quotes/backticks, repeatedly.
Markup (``*``) is never stripped: it is part of the password. An answer with nothing left gives
the empty password, a valid (bad) move, never an exception.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

# The errors of a game server's sessions that the trainer must recognise, whatever the game
# (every game's HTTP client raises them): a session lost mid-episode (404: the lost-session
# replay of gamerl.core.sessions) and no room for another session (429: the rollout plays in
# waves). gamerl.core imports them from here, never from tasks/ itself.
from tasks.common.client import SessionNotFoundError, TooManySessionsError

from .pieces import ConfigFiles, VerlSpec, WizardQuestions

Instance = Any  # an int seed, or a JSON-able dict with a "seed" key
MakeEnv = Callable[..., Any]
Episode = Any  # gamerl.core.rollout.Episode (not imported: the games never import the trainer)

__all__ = ["DEFAULT_REPORT_COLUMNS", "GENERIC_METRIC_DESCRIPTIONS", "MAX_TURNS_SHOWN",
           "CurriculumChoices", "EvaluationReport", "Instance", "MakeEnv", "ReportColumn",
           "SampleTable", "SessionNotFoundError", "Task", "TooManySessionsError",
           "after_marker", "code_span", "column_label", "elide", "episode_instance",
           "eval_split", "extract_answer", "instance_key", "instance_seed", "seed_eval",
           "seed_instances",
           "seed_start", "wilson_interval"]


def instance_seed(instance: Instance) -> int:
    return int(instance["seed"]) if isinstance(instance, Mapping) else int(instance)


def episode_instance(ep: Episode) -> Any:
    """What the episode was started from: its instance, else its seed."""
    return ep.instance if ep.instance is not None else ep.seed


def instance_key(ep: Episode) -> str:
    """The episode's instance as a string that is equal for the same game (JSON, keys sorted)."""
    return json.dumps(episode_instance(ep), sort_keys=True, default=str)


def _won(ep: Episode) -> bool:
    return bool(ep.success)


@dataclass(frozen=True)
class SampleTable:
    """How a game's sample episodes show in the validation log (``gamerl.tracking.samples``
    builds the table: distinct games, outcomes mixed, cells escaped and shortened).

    ``row(episode)`` gives one cell per ``header`` entry, as plain text (``code_span`` and
    ``elide`` below help); ``outcome(episode)`` names the group an episode falls in (rows are
    shared out among the groups, so a mostly-failing policy still shows its few wins): won or
    not by default; ``key(episode)`` is equal for episodes of the same game (a game played
    several times shows once): the instance by default."""

    header: tuple[str, ...]
    row: Callable[[Episode], list[str]]
    outcome: Callable[[Episode], Any] = _won
    key: Callable[[Episode], Any] = instance_key


@dataclass(frozen=True)
class CurriculumChoices:
    """What the stages of a game's curriculum (``gamerl.core.curriculum``) may name. ``games``
    and ``default_stages`` are called when a curriculum is built, so a game's list is read only
    by runs that use one."""

    games: Callable[[], Sequence[str]]  # the games a stage may list
    opponents: tuple[str, ...]  # the opponents a stage may name; (): the game has none
    # the stages of ``curriculum: "default"``: {"name", "games", "opponent", "threshold"} each
    default_stages: Callable[[], list[dict]]
    default_opponent: Optional[str] = None  # a stage's opponent where it names none
    # cfg -> the choices of one run, where they depend on its settings (the Password Game's
    # stages play at most the run's num_rules rules); None: these choices, whatever the run
    run: Optional[Callable[[Any], "CurriculumChoices"]] = None

    def for_run(self, cfg) -> "CurriculumChoices":
        """What this run's stages may name (``run(cfg)``, else these choices)."""
        return self.run(cfg) if self.run is not None else self


def column_label(key: str) -> str:
    """A metric key as a column or axis name: ``rules_satisfied`` -> ``rules satisfied``."""
    return key.replace("_", " ")


@dataclass(frozen=True)
class ReportColumn:
    """A column of a game's results tables: those the benchmark docs print from runs'
    summary.json (``bench/doc_numbers.py spread``) and the console's
    (``gamerl.core.evaluate.format_table``, which leaves list-valued ones out): ``key``, an
    evaluation number of the summary's rows;
    ``header``, its title, ``str.format``-ed with the run's config ("rules satisfied (of
    {num_rules})"); ``fmt``, how one number is written ("{:.2f}", "{:.1%}"). A list-valued
    number (the per-rule pass rates) shows its entries side by side, each written with ``fmt``."""

    key: str
    header: str
    fmt: str = "{:.2f}"

    def title(self, config: Optional[Mapping[str, Any]] = None) -> str:
        """The header with the run's config filled in ("rules satisfied (of 12)"); without a
        config, or one that lacks a field the header names, the key's own words
        ("rules satisfied"), so a table is never left without a title."""
        try:
            return self.header.format(**(config or {}))
        except (KeyError, IndexError):
            return column_label(self.key)


# The columns of a game that names none of its own: what every evaluation has.
DEFAULT_REPORT_COLUMNS = (ReportColumn("reward", "reward"),
                          ReportColumn("success_rate", "success", "{:.1%}"),
                          ReportColumn("turns", "turns"))


@dataclass(frozen=True)
class EvaluationReport:
    """A game's own ``gamerl evaluate`` report, in place of the common table (OpenSpiel: win /
    draw / loss per game with intervals, beside random and MCTS agents).

    ``run(play, cfg, num_episodes, **options) -> rows``: ``play(cfg, num_episodes, overrides)``
    is the trainer's evaluation of the policy on held-out games (``gamerl.core.evaluate``),
    handed in so that a game imports nothing of the trainer; ``options`` are the evaluate
    command's flags named in ``flags`` (None where not given). ``format(rows)`` is the text the
    command prints; the rows are what ``--json`` writes."""

    flags: tuple[str, ...]
    run: Callable[..., dict]
    format: Callable[[dict], str]


@dataclass(frozen=True)
class Task:
    name: str
    system_prompt: str
    extract: Callable[[str], str]  # model answer text -> the action submitted
    feedback: Callable[[dict, dict, str, str], str]  # (obs, info, action, style) -> user message
    env_factory: Callable[[Any], MakeEnv]  # cfg -> make_env (in-process)
    http_env_factory: Callable[[Any, str], MakeEnv]  # (cfg, base_url) -> make_env (HTTP client)
    start: Callable[[MakeEnv, Instance], tuple[Any, dict]]  # -> (env, first observation)
    train_instances: Callable[[Any, Sequence[int], Optional[dict]], list]  # cfg, seeds, stage
    # cfg, n, overrides: the test games, or with overrides["split"] == "validation" the
    # validation games (TrainConfig.eval_seeds; never the same games)
    eval_instances: Callable[[Any, int, Optional[dict]], list]
    turn_stats: Callable[[dict], dict]  # the env's info -> numbers kept on the Turn
    metrics: Callable[[Sequence[Episode], Any], dict]  # the game's own evaluation columns
    badness: Callable[[Episode, Any], float]  # 0 (perfect) .. 1 (worst): replay priority
    demo: Callable[[Any, Any], Callable[[Episode], str]]  # (cfg, random.Random) -> answers
    reference_agents: Callable[[Any], dict[str, Callable[[Episode], str]]]
    max_turns: Callable[[Any], int]  # cfg -> turns per episode
    headline: tuple[str, ...] = ()  # metric keys in progress bars, epoch lines and figures
    # reference agent name -> what its row is. Named for what the row bounds, not "upper bound":
    # the Password Game's solver satisfies every rule but its long password pays the length
    # penalty, so a trained policy can out-earn it.
    reference_labels: Mapping[str, str] = field(default_factory=dict)
    # metric key (of ``metrics``) -> what the number is, as a figure's axis label says it
    metric_descriptions: Mapping[str, str] = field(default_factory=dict)
    # list-valued metric key -> n -> the names of its first n entries, as a figure's ticks say
    # them (the Password Game's per-rule pass rates: "1. 5+ characters", ...)
    metric_entry_labels: Mapping[str, Callable[[int], list[str]]] = field(default_factory=dict)
    # the columns of the benchmark docs' tables of its runs (``bench/doc_numbers.py spread``)
    report_columns: tuple[ReportColumn, ...] = DEFAULT_REPORT_COLUMNS
    # the game's own fields of an episode's record (episodes.jsonl); None: the generic ones only
    record_fields: Optional[Callable[[Episode], dict]] = None
    # the columns of its sample episodes; None: instance | actions | result
    sample_table: Optional[SampleTable] = None
    # what curriculum stages may name; None: the game has no curriculum
    curriculum: Optional[CurriculumChoices] = None
    # the feedback styles (TrainConfig.feedback) the game's ``feedback`` knows; a style may
    # bring its own system prompt (``system_prompts``: style -> prompt, else ``system_prompt``)
    feedback_styles: tuple[str, ...] = ("compact", "full", "latest")
    system_prompts: Mapping[str, str] = field(default_factory=dict)
    # preset name -> the settings this game changes over that preset (``get_config`` applies
    # them over the preset, under the caller's overrides); each with its reason beside it in the
    # game's module. A preset the game does not name runs as it is.
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # (cfg, random.Random) -> answers of an expert that plays the game well, turn by turn, for
    # the warm start's ``warmstart_demos="expert"`` (a small pretrained model must see the
    # answers that pay before RL can re-weight them); None: the game has none
    expert_demo: Optional[Callable[[Any, Any], Callable[[Episode], str]]] = None
    # The pieces past the trainer (gamerl/games/pieces.py says what each is for); None: the game
    # has none, and only what needs it refuses the game, in one line.
    server_port: Optional[int] = None  # its HTTP server's default port (messages' examples)
    config_files: Optional[ConfigFiles] = None  # its env_config.json keys; the files' comments
    wizard: Optional[WizardQuestions] = None  # its defaults and questions in `configure`
    verl: Optional[Callable[[], VerlSpec]] = None  # its verl bridge spec (built on first use)
    # (cfg, instance) -> a text equal for two instances exactly when they are the same game as
    # the player meets it (the Password Game's rule texts; Wordle's answer): evaluations count
    # their distinct games, so a held-out set of one game in many seeds is not read as many
    game_text: Callable[[Any, Instance], str] = lambda cfg, instance: json.dumps(
        instance, sort_keys=True, default=str)
    # its own ``gamerl evaluate`` report; None: the common table and reference rows
    evaluation_report: Optional[EvaluationReport] = None


# ----------------------------------------------------------------------------- answers

_PASSWORD_MARK = re.compile(r"password\s*:", re.IGNORECASE)
_FENCE_LINE = re.compile(r"^```[\w+-]*$")
_WRAPPERS = (("```", "```"), ("`", "`"), ('"', '"'), ("'", "'"), ("\u201c", "\u201d"),
             ("\u2018", "\u2019"))


def extract_answer(answer: str) -> str:
    """The action in a model's answer, ``Password:`` as the marker (rules in the module
    docstring)."""
    text = answer
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    marks = list(_PASSWORD_MARK.finditer(text))
    if marks:
        text = text[marks[-1].end():]
    line = ""
    for candidate in text.splitlines():
        candidate = candidate.strip()
        if candidate and not _FENCE_LINE.match(candidate):
            line = candidate
            break
    changed = True
    while changed and line:
        changed = False
        for left, right in _WRAPPERS:
            if (len(line) >= len(left) + len(right) and line.startswith(left)
                    and line.endswith(right)):
                line = line[len(left):len(line) - len(right)].strip()
                changed = True
                break
    return line


def after_marker(answer: str, marker: str) -> str:
    """``extract_answer``'s rule with ``<marker>:`` accepted like ``Password:``."""
    return extract_answer(re.sub(rf"{marker}\s*:", "Password:", answer, flags=re.IGNORECASE))


# ----------------------------------------------------------------------------- episodes by seed

def seed_start(make_env: MakeEnv, instance: Instance) -> tuple[Any, dict]:
    env = make_env()
    return env, env.reset(instance_seed(instance))


def seed_instances(cfg, seeds: Sequence[int], stage: Optional[dict] = None) -> list:
    return list(seeds)


def seed_eval(cfg, n: int, overrides: Optional[dict] = None) -> list:
    return cfg.eval_seeds(n, eval_split(overrides))


def eval_split(overrides: Optional[dict]) -> str:
    """Which held-out games an ``eval_instances`` call asks for: "test" or "validation"."""
    return (overrides or {}).get("split", "test")


# ----------------------------------------------------------------------------- sample cells

MAX_TURNS_SHOWN = 8  # longer episodes show the first turns, "…", and the last ones


def code_span(text: str) -> str:
    """Inline Markdown code that survives backticks inside it (the longer-fence rule); an empty
    text shows as ``∅``, visible, not an empty code span."""
    text = " ".join(str(text).split())
    if not text:
        return "∅"
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def elide(items: list[str], keep: int = MAX_TURNS_SHOWN) -> list[str]:
    """``items`` if there are at most ``keep``; else the first ``keep - 2``, a
    ``… (n more) …`` marker and the last two."""
    if len(items) <= keep:
        return items
    head = keep - 2
    return items[:head] + [f"… ({len(items) - keep} more) …"] + items[-2:]


# ----------------------------------------------------------------------------- numbers

def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a binomial rate (95% by default): unlike the normal
    approximation it stays inside [0, 1] and is honest at 0/n and n/n."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


# What each generic evaluation number is (``gamerl.core.evaluate.episode_metrics``), as an axis
# label says it; each task adds its own (``Task.metric_descriptions``).
GENERIC_METRIC_DESCRIPTIONS: dict[str, str] = {
    "reward": "mean episode reward (game's reward, summed)",
    "success_rate": "games won (fraction)",
    "turns": "turns per game (mean)",
}
