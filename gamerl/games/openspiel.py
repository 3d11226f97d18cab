"""OpenSpiel's games (``tasks.openspiel``) on the trainer's side: everything specific to them.

The run's ``task_config`` with defaults (``openspiel_settings``; ``OPENSPIEL_ENV_KEYS``,
``OPENSPIEL_DEFAULTS``); the system prompt; the move in an answer (``extract_move``); the
position after a move (``openspiel_feedback``); instances (game and opponent per episode, as the
curriculum stages say); the numbers kept per turn and an episode's ``outcome``, win/draw/loss
rates per game with Wilson intervals, the failure replay's priority; random legal moves as
warm-start demonstrations and as the reference agent; the episode record's outcome and the
sample table's columns (game | seat | moves | outcome); what curriculum stages may name and the
default easy -> medium -> hard stages (``OPENSPIEL_CURRICULUM``); the pieces past the trainer
(``gamerl.games.pieces``): its server's port, its env_config.json keys and their checks
(``CONFIG_FILES``) and its ``configure`` defaults and questions (``WIZARD``); it has no verl
bridge spec. What it changes in a preset: ``OPENSPIEL_PRESETS``. The evaluation table against
random and MCTS agents is ``gamerl.games.openspiel_eval``, the game's ``evaluation_report``.
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable, Mapping, Optional, Sequence

from tasks.openspiel.games import OPPONENTS  # the game table's module: no pyspiel import

from .base import (MAX_TURNS_SHOWN, CurriculumChoices, EvaluationReport, Instance, MakeEnv,
                   ReportColumn, SampleTable, Task, after_marker, code_span, elide, eval_split,
                   instance_seed, wilson_interval)
from .openspiel_eval import evaluate_openspiel, format_outcome_table
from .pieces import ConfigFiles, WizardQuestions, task_config_reader, task_config_writer

__all__ = ["OPENSPIEL_CURRICULUM", "OPENSPIEL_DEFAULTS", "OPENSPIEL_ENV_KEYS",
           "OPENSPIEL_PRESETS", "OPENSPIEL_REWARD_KEYS", "OPPONENTS", "default_curriculum_stages",
           "extract_move", "make_task", "openspiel_env_settings", "openspiel_feedback",
           "openspiel_settings", "outcome", "supported_games"]

OPENSPIEL_ENV_KEYS = ("games", "opponent", "model_seat", "mcts_simulations", "mcts_uct_c",
                      "mcts_rollouts", "illegal_move_policy", "max_illegal_retries", "reward")
OPENSPIEL_DEFAULTS = {"games": ["tic_tac_toe"], "opponent": "random", "model_seat": "random",
                      "mcts_simulations": 50, "illegal_move_policy": "retry",
                      "max_illegal_retries": 2}


def openspiel_settings(cfg) -> dict:
    """The task_config of an OpenSpiel run with defaults filled in (unknown keys raise)."""
    settings = {**OPENSPIEL_DEFAULTS, **dict(cfg.task_config or {})}
    unknown = set(settings) - set(OPENSPIEL_ENV_KEYS)
    if unknown:
        raise ValueError(f"openspiel task_config: unknown keys {sorted(unknown)}; "
                         f"known: {list(OPENSPIEL_ENV_KEYS)}")
    from tasks.openspiel import GAMES

    games = settings["games"]
    if isinstance(games, str):
        games = [games]
    bad = [g for g in games if g not in GAMES]
    if bad or not games:
        raise ValueError(f"openspiel games {bad or games}: choose from {sorted(GAMES)}")
    settings["games"] = list(games)
    return settings


def extract_move(answer: str) -> str:
    """The move in a model's answer: ``base.extract_answer``'s rule with ``Move:`` as a marker.
    The game's parser is tolerant of case and spacing (``tasks.openspiel.moves``)."""
    return after_marker(answer, "move")


def openspiel_feedback(obs: Mapping[str, Any], info: Mapping[str, Any], action: str,
                       style: str = "compact") -> str:
    """The observation after a move; ``compact`` (and ``latest``: no shorter view here) drops the
    game/rules header (already in the first message) and the closing "Answer with exactly one
    legal move" line (the system prompt and the first message say it), and keeps the position, any
    notice (the opponent's move, an illegal answer), whose turn it is and the legal moves. It keeps
    the list of moves so far only in games of imperfect information (poker, liar's dice: the
    betting is not on the board). In the board games the position says everything, and the list,
    repeated every turn, made a 12-turn conversation grow quadratically (connect_four, hex, othello
    and breakthrough ran 4.5-5.6k tokens with it; tests/test_game_training.py checks the
    budget)."""
    text = obs["text"]
    if style == "full" or "Position (your view):" not in text:
        return text
    from tasks.openspiel import GAMES

    spec = GAMES.get(obs.get("game"))
    drop = ["Answer with exactly one legal move"]
    if spec is not None and spec.perfect_information:
        drop.append("Moves so far:")
    lines = text[text.index("Position (your view):"):].split("\n")
    return "\n".join(line for line in lines if not any(line.startswith(d) for d in drop))


# ----------------------------------------------------------------------------- an episode's result

def outcome(ep) -> Optional[str]:
    """"win" / "draw" / "loss" once the game ended, else None."""
    return ep.turns[-1].stats.get("outcome") if ep.turns else None


def _record_fields(ep) -> dict:
    result = outcome(ep)
    return {} if result is None else {"outcome": result}


# ----------------------------------------------------------------------------- sample table

def _sample_game(ep) -> str:
    if isinstance(ep.instance, dict) and ep.instance.get("game"):
        return str(ep.instance["game"])
    return str((ep.last_obs or {}).get("game", "?"))


def _sample_moves(ep) -> list[str]:
    """The game's move history (``you`` / ``opp`` / chance), with the model's illegal attempts
    (turns the game did not play) marked ``✗``; the turns' actions when there is no history."""
    history = (ep.last_obs or {}).get("history")
    illegal = [t.action for t in ep.turns if t.stats.get("illegal")]
    if history is None:
        return [f"you: {'✗ ' if t.stats.get('illegal') else ''}{t.action}" for t in ep.turns]
    out = []
    for h in history:
        by, move = h.get("by"), str(h.get("move", "?"))
        out.append(f"[{move}]" if by == "chance" else f"{'you' if by == 'you' else 'opp'}: {move}")
    if illegal:
        out.append("illegal tries: " + ", ".join(code_span(a) for a in illegal))
    return out


def _sample_outcome(ep) -> str:
    result = outcome(ep)
    if result is None:
        return "unfinished (context full)" if ep.context_exhausted else "unfinished"
    return result


def _sample_key(ep) -> str:
    # the same game, seed and opponent is the same episode, whatever else the instance holds
    if isinstance(ep.instance, dict):
        return json.dumps({k: ep.instance.get(k) for k in ("game", "seed", "opponent")},
                          sort_keys=True, default=str)
    return json.dumps([_sample_game(ep), ep.seed], default=str)


def _sample_row(ep) -> list[str]:
    seat = (ep.last_obs or {}).get("player")
    moves = elide(_sample_moves(ep), keep=2 * MAX_TURNS_SHOWN)  # two entries a turn
    return [_sample_game(ep), "?" if seat is None else str(seat),
            " · ".join(moves) if moves else "(none)", _sample_outcome(ep)]


# rows shared out among win / draw / loss / unfinished, not just won or not
SAMPLE_TABLE = SampleTable(header=("game", "seat", "moves", "outcome"), row=_sample_row,
                           outcome=_sample_outcome, key=_sample_key)


# ----------------------------------------------------------------------------- curriculum



def supported_games() -> list[str]:
    """The OpenSpiel games a curriculum stage may name (tasks.openspiel.games.GAMES, the same
    list as tasks.openspiel.game.supported_games(), read without importing pyspiel)."""
    from tasks.openspiel.games import GAMES

    return list(GAMES)


def default_curriculum_stages() -> list[dict]:
    """easy: the two simple games against a random bot; medium: four harder games (the three
    chance/poker-style ones and hex 5x5, the shortest board game) against a random bot; hard:
    every game against MCTS. Thresholds fall as the opposition gets stronger."""
    return [
        {"name": "easy", "games": ["tic_tac_toe", "kuhn_poker"], "opponent": "random",
         "threshold": 0.60},
        {"name": "medium", "games": ["connect_four", "leduc_poker", "liars_dice", "hex"],
         "opponent": "random", "threshold": 0.50},
        {"name": "hard", "games": supported_games(), "opponent": "mcts", "threshold": 0.40},
    ]


OPENSPIEL_CURRICULUM = CurriculumChoices(games=supported_games, opponents=OPPONENTS,
                                         default_stages=default_curriculum_stages,
                                         default_opponent="random")


# ------------------------------------------------------------ the run's files, configure

OPENSPIEL_REWARD_KEYS = ("scale", "illegal_move_penalty", "legal_move_bonus")


def openspiel_env_settings(games: Sequence[str], opponent: str = "random",
                           mcts_simulations: Optional[int] = None) -> dict:
    """A task_config with every environment setting written out (so the file shows them)."""
    return {**OPENSPIEL_DEFAULTS, "games": list(games), "opponent": opponent,
            "mcts_simulations": mcts_simulations or OPENSPIEL_DEFAULTS["mcts_simulations"],
            "reward": {"scale": None, "illegal_move_penalty": 0.0, "legal_move_bonus": 0.0}}


def _check_env(s: dict, where: str, checks) -> None:
    """env_config.json's OpenSpiel keys: each value checked, naming the file and the key; the
    reward's "_comment" dropped."""
    import math

    from tasks.openspiel.games import GAMES

    def bad(key: str, expected: str) -> ValueError:
        return ValueError(f"{where}: {key}: expected {expected}, got {json.dumps(s[key])}")

    def is_int(v: Any, low: int) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= low

    if "games" in s:
        games = [s["games"]] if isinstance(s["games"], str) else s["games"]
        if not isinstance(games, list) or not games or not all(isinstance(g, str) for g in games):
            raise bad("games", "a non-empty list of game names")
        unknown = [g for g in games if g not in GAMES]
        if unknown:
            raise ValueError(f"{where}: games: unknown game {unknown[0]!r}; supported games: "
                             + ", ".join(GAMES))
    if "opponent" in s and s["opponent"] not in OPPONENTS:
        raise bad("opponent", " or ".join(repr(o) for o in OPPONENTS))
    if "model_seat" in s and (s["model_seat"] not in (0, 1, "random")
                              or isinstance(s["model_seat"], bool)):
        raise bad("model_seat", "0, 1 or \"random\"")
    for key, low in (("mcts_simulations", 1), ("mcts_rollouts", 1), ("max_illegal_retries", 0)):
        if key in s and not is_int(s[key], low):
            raise bad(key, f"an integer >= {low}")
    if "mcts_uct_c" in s and not (isinstance(s["mcts_uct_c"], (int, float))
                                  and not isinstance(s["mcts_uct_c"], bool)
                                  and math.isfinite(s["mcts_uct_c"]) and s["mcts_uct_c"] >= 0):
        raise bad("mcts_uct_c", "a number >= 0")
    if "illegal_move_policy" in s and s["illegal_move_policy"] not in ("retry", "random", "loss"):
        raise bad("illegal_move_policy", "\"retry\", \"random\" or \"loss\"")
    if "reward" in s:
        reward = s["reward"]
        if not isinstance(reward, dict):
            raise bad("reward", "an object {" + ", ".join(OPENSPIEL_REWARD_KEYS) + "}")
        checks.check_keys(reward, OPENSPIEL_REWARD_KEYS, f"{where}: reward")
        for key in OPENSPIEL_REWARD_KEYS:
            v = reward.get(key, 0.0)
            if v is None and key == "scale":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{where}: reward.{key}: expected a number"
                                 + (" or null (the game's own scale)" if key == "scale" else "")
                                 + f", got {json.dumps(v)}")
        s["reward"] = checks.without_comment(reward)


CONFIG_FILES = ConfigFiles(
    env_keys=OPENSPIEL_ENV_KEYS, read=task_config_reader(_check_env),
    write=task_config_writer(OPENSPIEL_ENV_KEYS),
    env_comment=(
        "OpenSpiel environment (tasks/openspiel/README.md). execution: local_openspiel "
        "(in-process) or http (then base_url, a server from `python -m "
        "tasks.openspiel.server`).",
        "opponent random | mcts; model_seat 0 | 1 | random; illegal_move_policy retry | "
        "random | loss. With the curriculum on, training plays the stage's games and "
        "opponent, and these games and opponent are the held-out evaluation's."),
    env_holds="the games",
    train_comments={
        "game": "max_steps caps the turns of an episode (illegal-move retries included).",
        "sampling": "Per turn: an OpenSpiel move is a few tokens (max_new_tokens 8).",
        "schedule": "epochs x episodes_per_epoch training games; eval_episodes held-out games "
                    "per game.",
        "instances": "OpenSpiel's \"default\" curriculum: easy -> medium -> hard "
                     "(default_curriculum_stages in gamerl/games/openspiel.py)."},
    check=openspiel_settings,
)


def _wizard_defaults(cfg, model: str):
    """The wizard's OpenSpiel defaults: LoRA (rank 8 for tiny, 16 otherwise; alpha 2 x rank),
    the default curriculum, failure replay 0.3 of 1000, 8 new tokens per move and the easy
    stage's games against the random bot."""
    rank = 8 if model == "tiny" else 16
    return cfg.replace(lora=True, lora_rank=rank, lora_alpha=2 * rank, curriculum="default",
                       replay_fraction=0.3, replay_capacity=1000, max_new_tokens=8,
                       task_config=openspiel_env_settings(default_curriculum_stages()[0]["games"]))


def _parse_games(answer: str) -> list[str]:
    from tasks.openspiel.games import GAMES

    games = []
    for name in (g.strip().lower() for g in answer.replace(" ", ",").split(",")):
        if name and name not in games:
            games.append(name)
    if not games:
        raise ValueError("name at least one game")
    unknown = [g for g in games if g not in GAMES]
    if unknown:
        raise ValueError(f"unknown game{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(unknown)}; choose from: {', '.join(GAMES)}")
    return games


def _wizard_questions(cfg, wizard):
    from tasks.openspiel.games import GAMES

    wizard.say(f"  games: {', '.join(GAMES)}")
    games = wizard.question("Games to play (comma-separated)", list(cfg.task_config["games"]),
                            _parse_games)
    opponent = wizard.question("Opponent: random or mcts", "random",
                               wizard.choice(("random", "mcts")))
    sims = None
    if opponent == "mcts":
        sims = wizard.question("MCTS simulations per move",
                               OPENSPIEL_DEFAULTS["mcts_simulations"], wizard.int_at_least(1))
    cfg = wizard.checked(cfg, task_config=openspiel_env_settings(games, opponent, sims))
    curriculum = wizard.question("Curriculum: easy -> medium -> hard stages, advancing on the "
                                 "win rate? (training then plays the stages' games; the games "
                                 "above are the held-out evaluation's)", True, wizard.yes_no)
    return wizard.checked(cfg, curriculum="default" if curriculum else None)


WIZARD = WizardQuestions(label="board and card games", defaults=_wizard_defaults,
                         ask=_wizard_questions)


# ----------------------------------------------------------------------------- the task

# What OpenSpiel changes in a preset (gamerl/config/presets.py's PRESETS; ``get_config``
# applies these over the preset, under the caller's overrides). Its rewards are O(1) already
# (reward_scale 1: the Password Game's 0.1 or 0.02 would shrink them).
OPENSPIEL_PRESETS: dict[str, dict[str, Any]] = {
    # tiny: tic-tac-toe against the random bot, seat drawn per game (docs/how-to/openspiel.md).
    # Moves are a few tokens; 12 turns cover 5 moves and the retries of illegal ones, and the
    # longest games of the curriculum's later stages stay under 4096 tokens. An illegal answer
    # costs 0.5 on its own tokens: with the win/loss return alone (a retry ends in a random
    # legal move) PPO had no reason to stop them.
    "tiny": dict(max_new_tokens=8, max_steps=12, max_context_tokens=4096, reward_scale=1.0,
                 warmstart_steps=100, epochs=10,
                 task_config={"games": ["tic_tac_toe"], "opponent": "random",
                              "reward": {"illegal_move_penalty": 0.5}}),
    "qwen3-0.6b": dict(max_new_tokens=8, max_steps=64, lora=True, reward_scale=1.0),
}


def _env_kwargs(settings: dict, instance: Mapping) -> dict:
    kw = {k: settings[k] for k in ("model_seat", "mcts_simulations", "mcts_uct_c",
                                   "mcts_rollouts", "illegal_move_policy",
                                   "max_illegal_retries", "reward") if k in settings}
    kw["opponent"] = instance.get("opponent", settings["opponent"])
    return kw


def _env_factory(cfg) -> MakeEnv:
    from tasks.openspiel.env import LocalOpenSpielEnv

    settings = openspiel_settings(cfg)
    return lambda instance=None: LocalOpenSpielEnv(
        (instance or {}).get("game", settings["games"][0]), **_env_kwargs(settings, instance or {}))


def _http_factory(cfg, base_url: str) -> MakeEnv:
    from tasks.openspiel.client import OpenSpielEnv

    settings = openspiel_settings(cfg)
    return lambda instance=None: OpenSpielEnv(
        base_url, game=(instance or {}).get("game", settings["games"][0]),
        **_env_kwargs(settings, instance or {}))


def _start(make_env: MakeEnv, instance: Instance) -> tuple[Any, dict]:
    env = make_env(instance)
    return env, env.reset(instance_seed(instance))


def _train_instances(cfg, seeds: Sequence[int], stage: Optional[dict] = None) -> list:
    settings = openspiel_settings(cfg)
    games = list((stage or {}).get("games") or settings["games"])
    opponent = (stage or {}).get("opponent") or settings["opponent"]
    return [{"seed": s, "game": games[random.Random(f"game:{s}").randrange(len(games))],
             "opponent": opponent} for s in seeds]


def _eval_instances(cfg, n: int, overrides: Optional[dict] = None) -> list:
    """``n`` held-out games PER GAME of the run (or of ``overrides["games"]``)."""
    settings = openspiel_settings(cfg)
    games = list((overrides or {}).get("games") or settings["games"])
    opponent = (overrides or {}).get("opponent") or settings["opponent"]
    seeds = cfg.eval_seeds(n, eval_split(overrides))
    return [{"seed": s, "game": g, "opponent": opponent} for g in games for s in seeds]


def _turn_stats(info: dict) -> dict:
    return {"illegal": bool(info.get("illegal_move")), "outcome": info.get("outcome"),
            "success": info.get("outcome") == "win"}


def _metrics(episodes, cfg) -> dict:
    n = max(len(episodes), 1)
    turns = [t for ep in episodes for t in ep.turns]
    out: dict[str, Any] = {}
    for key in ("win", "draw", "loss"):
        out[f"{key}_rate"] = sum(outcome(ep) == key for ep in episodes) / n
    out["illegal_rate"] = sum(t.stats.get("illegal", False) for t in turns) / max(len(turns), 1)
    per_game: dict[str, dict] = {}
    for ep in episodes:
        g = per_game.setdefault(ep.instance["game"], {"win": 0, "draw": 0, "loss": 0,
                                                      "unfinished": 0, "games": 0})
        g[outcome(ep) or "unfinished"] += 1
        g["games"] += 1
    for g in per_game.values():
        g["win_ci"] = list(wilson_interval(g["win"], g["games"]))
    out["per_game"] = per_game
    return out


def _badness(ep, cfg) -> float:
    return {"win": 0.0, "draw": 0.5, "loss": 1.0}.get(outcome(ep), 1.0)


def _demo(cfg, rng: random.Random) -> Callable:
    # a random legal move: the format and legality, not skill
    return lambda ep: rng.choice(ep.last_obs.get("legal_moves") or ["?"])


def _reference_agents(cfg) -> dict:
    def random_answer(ep) -> str:
        rng = random.Random(f"{cfg.seed}:{ep.seed}:{len(ep.turns)}")
        return rng.choice(ep.last_obs.get("legal_moves") or ["?"])

    return {"random": random_answer}


def make_task() -> Task:
    return Task(
        name="openspiel",
        system_prompt="You are playing a board or card game. Reply with your move only, "
                      "written exactly as in the list of legal moves.",
        extract=extract_move, feedback=openspiel_feedback,
        env_factory=_env_factory, http_env_factory=_http_factory, start=_start,
        train_instances=_train_instances, eval_instances=_eval_instances,
        turn_stats=_turn_stats, metrics=_metrics, badness=_badness, demo=_demo,
        reference_agents=_reference_agents, max_turns=lambda cfg: cfg.max_steps,
        headline=("win_rate", "illegal_rate"),
        reference_labels={"random": "random legal moves"},
        metric_descriptions={"success_rate": "games won against the opponent (a draw is not)",
                             "win_rate": "games won (fraction)",
                             "draw_rate": "games drawn (fraction)",
                             "loss_rate": "games lost (fraction)",
                             "illegal_rate": "illegal answers (fraction of turns)"},
        report_columns=(ReportColumn("reward", "reward"),
                        ReportColumn("win_rate", "won", "{:.1%}"),
                        ReportColumn("draw_rate", "drawn", "{:.1%}"),
                        ReportColumn("loss_rate", "lost", "{:.1%}"),
                        ReportColumn("illegal_rate", "illegal answers", "{:.1%}"),
                        ReportColumn("turns", "turns")),
        record_fields=_record_fields, sample_table=SAMPLE_TABLE, curriculum=OPENSPIEL_CURRICULUM,
        server_port=8002, config_files=CONFIG_FILES, wizard=WIZARD, presets=OPENSPIEL_PRESETS,
        evaluation_report=EvaluationReport(flags=("opponent", "games"), run=_outcome_rows,
                                           format=format_outcome_table),
    )


def _outcome_rows(play, cfg, num_episodes: Optional[int], *, opponent: Optional[str] = None,
                  games: Optional[str] = None) -> dict:
    """``gamerl evaluate``'s report: win / draw / loss per game (100 games each by default),
    ``games`` a comma-separated list."""
    return evaluate_openspiel(play, cfg, openspiel_settings(cfg), num_episodes or 100, opponent,
                              games=games.split(",") if games else None)
