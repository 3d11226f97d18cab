"""The Password Game (``tasks.password_game``) on the trainer's side: everything specific to it.

* the system prompt; the password in an answer (``extract_password``: the shared rule of
  ``gamerl.games.base.extract_answer``, ``Password:`` as the marker);
* the user message after a submission (``feedback_message``):
  - turn 1 (the rollout's first message): the system prompt and the game's full observation
    text (instructions, turn counter, the revealed rules);
  - later turns, ``"compact"`` (default): one header line "Turn t of T. k of n rules hold.",
    the password restated ("Your password: ..."), then only the rules that changed the picture:
    newly revealed rules (with their verdict) and revealed rules the password now breaks; a
    broken counting rule says where the password stands ("Your digits add up to 14.":
    ``tasks.password_game.rules.broken_rule_detail``), so a small model can see what to change.
    Rules that still hold are not repeated: they are in the context already, and repeating all
    of them would make a 30-turn episode
    O(turns x rules) tokens. If the game altered the password (fire, Paul hatching) the message
    shows the altered password;
  - ``"full"``: the game's whole observation text every turn (simple, long); ``"latest"`` is
    ``"compact"`` (it already shows only what changed);
* the numbers kept per turn and what they say of an episode (``rules_satisfied``,
  ``num_revealed``, ``rule_verdicts``), the evaluation columns (rules satisfied, per-rule pass
  rates), the failure replay's priority (rules not satisfied), the episode record's fields and
  the sample table's columns (seed | passwords | rules held/revealed);
* the warm start's demonstrations: ``demo_password`` (format) and ``expert_answer`` (the
  expert of ``tasks.password_game.demos``: short passwords, then repairs), and the reference
  agents (the solver, random strings);
* ``PasswordGameSettings`` (the game's section of a TrainConfig), ``password_game_config`` (a
  TrainConfig's game settings as the game's ``GameConfig``) and
  ``password_rule_labels`` (the figures' rule names);
* the pieces past the trainer (``gamerl.games.pieces``): its server's port, its env_config.json
  keys ``num_rules`` and ``reward`` (``CONFIG_FILES``), its ``configure`` questions (``WIZARD``)
  and its verl bridge spec (``verl_spec``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal, Optional, Sequence

from tasks.password_game.demos import SPECIALS, WORDS as EXPERT_WORDS
from tasks.password_game.richtext import parse
from tasks.password_game.rules import MONTHS, SPONSORS, broken_rule_detail

from .base import (CurriculumChoices, Instance, MakeEnv, ReportColumn, SampleTable, Task,
                   code_span, elide, extract_answer, instance_seed, seed_eval)
from .pieces import ConfigFiles, VerlSpec, WizardQuestions

__all__ = ["MONTHS", "SPECIALS", "SPONSORS", "SUM25_RUNS", "SYSTEM_PROMPT", "WORDS",
           "demo_password", "expert_answer", "extract_password", "feedback_message", "make_task",
           "num_revealed", "password_game_config", "password_rule_labels", "password_solver_answer",
           "rule_verdicts", "rules_satisfied", "verl_spec"]

SYSTEM_PROMPT = ("You are playing the Password Game. Reply with your next password only, on one "
                 "line.")


def extract_password(answer: str) -> str:
    """The password in a model's answer (``gamerl.games.base``'s docstring has the rule)."""
    return extract_answer(answer)


def feedback_message(obs: dict[str, Any], info: dict[str, Any], submitted: str,
                     style: str = "compact") -> str:
    """The user message after a submission (see the module docstring)."""
    if style == "full":
        return obs["text"]
    lines = [f"Turn {obs['turn']} of {obs['max_steps']}. "
             f"{info['rules_satisfied']} of {info['num_revealed']} rules hold."]
    password = obs.get("last_password")
    if password is None:  # a game that does not report it: the password as submitted
        password = submitted
    if password != submitted:
        lines.append(f"The game changed your password to: {password}")
    else:  # restated, so a repair can start from it without searching the context
        lines.append(f"Your password: {password}")
    parsed = parse(password)
    newly = set(info.get("newly_revealed", ()))
    for rule in info["rules"]:
        if rule["id"] in newly or not rule["satisfied"]:
            mark = "[x]" if rule["satisfied"] else "[ ]"
            tag = "New: " if rule["id"] in newly else ""
            line = f"{tag}{mark} Rule {rule['id'] + 1}: {rule['text']}"
            detail = None if rule["satisfied"] else broken_rule_detail(rule["id"], parsed)
            lines.append(f"{line} {detail}" if detail else line)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- an episode's result

def rules_satisfied(ep) -> int:
    """Revealed rules the episode's last password satisfies (0 before any turn)."""
    return int(ep.turns[-1].stats.get("rules_satisfied", 0)) if ep.turns else 0


def num_revealed(ep) -> int:
    """Rules revealed after the episode's last turn (the game starts with one)."""
    return int(ep.turns[-1].stats.get("num_revealed", 1)) if ep.turns else 1


def rule_verdicts(ep) -> dict[int, bool]:
    """Final verdict per revealed rule id (rules never revealed are absent)."""
    return {r["id"]: bool(r["satisfied"]) for r in ep.final_info.get("rules", [])}


def broken_rules(ep) -> list[str]:
    """The revealed rules the final password breaks, numbered from 1 as the game's text does."""
    return [str(i + 1) for i, ok in sorted(rule_verdicts(ep).items()) if not ok]


def _record_fields(ep) -> dict:
    # "passwords" repeats the generic "actions" under the name episodes.jsonl had before tasks
    return {"rules_satisfied": rules_satisfied(ep), "num_revealed": num_revealed(ep),
            "passwords": [t.action for t in ep.turns]}


def _sample_rules(ep) -> str:
    """``4/5, breaks 5``: rules held of those revealed, the broken ones numbered from 1 as the
    game's text numbers them; ``(won)`` when every rule held."""
    verdicts = rule_verdicts(ep)
    if not verdicts and ep.turns:
        return f"{rules_satisfied(ep)}/{num_revealed(ep)}"
    text = f"{sum(verdicts.values())}/{len(verdicts)}"
    broken = broken_rules(ep)
    if broken:
        text += ", breaks " + " ".join(broken)
    if ep.success:
        text += " (won)"
    return text


def _sample_row(ep) -> list[str]:
    passwords = elide([code_span(t.action) for t in ep.turns])
    return [str(ep.seed), " → ".join(passwords) if passwords else "(none)", _sample_rules(ep)]


SAMPLE_TABLE = SampleTable(header=("seed", "passwords", "rules held/revealed"), row=_sample_row)


# ----------------------------------------------------------------------------- warm start

# The format demonstrations draw from the expert's lists (tasks.password_game.demos), the first 20
# words only: the tiny preset's measured runs used those.
WORDS = EXPERT_WORDS[:20]
# Digit runs that sum to 25, the kind a person knows by heart. With random compositions instead,
# RL must learn digit arithmetic from a sparse reward, far beyond a few CPU minutes for tiny.
SUM25_RUNS = ("997", "889", "1996", "4759", "2788")


def demo_password(rng: random.Random, num_rules: int, p: float) -> str:
    """A password with at least 5 characters; each later rule's ingredient with probability p.

    Only ingredients of rules inside the game (ids < num_rules) are used. Rule ids: 1 number,
    2 uppercase, 3 special character, 4 digits sum to 25, 5 month, 6 Roman numeral,
    7 sponsor (8 and beyond need more than an ingredient and are left to RL).
    """
    use = lambda rule: rule < num_rules and rng.random() < p  # noqa: E731
    upper = use(2)
    word = rng.choice(WORDS)
    parts = [word.capitalize() if upper else word]
    if use(5):
        month = rng.choice(MONTHS)
        parts.append(month.capitalize() if upper else month)
    if use(7):
        parts.append(rng.choice(SPONSORS))
    if use(6):
        parts.append(rng.choice(("XXXV", "VII", "V")))
    if use(1):
        if use(4):
            parts.append(rng.choice(SUM25_RUNS))
        else:
            parts.append("".join(str(rng.randint(0, 9)) for _ in range(rng.randint(1, 3))))
    if use(3):
        parts.append(rng.choice(SPECIALS))
    return " ".join(parts)


def expert_answer(cfg, rng: random.Random) -> Callable:
    """The expert's answers (``tasks.password_game.demos``) as a scripted policy: the first
    password holds the rules known ahead (each next one with ``cfg.warmstart_extra_prob``); each
    later one repairs the game's last password for the verdicts it got."""
    from tasks.password_game import make_instance
    from tasks.password_game.demos import first_password, repair

    def answer(episode) -> str:
        inst = make_instance(episode.seed)
        obs = episode.last_obs
        if not episode.turns:
            return first_password(inst, instance_rules(cfg, episode.instance), rng,
                                  cfg.warmstart_extra_prob)
        return repair(inst, obs["last_password"], [r["satisfied"] for r in obs["rules"]], rng,
                      hatched=bool(obs.get("hatched")))

    return answer


# ----------------------------------------------------------------------------- reference agents

def password_solver_answer(episode) -> str:
    """The solver's password for this game (Paul as 🐔 once he has hatched)."""
    from tasks.password_game import make_instance, solve

    return solve(make_instance(episode.seed), hatched=bool(episode.last_obs.get("hatched")))


def _random_answer(cfg) -> Callable:
    import string

    alphabet = string.ascii_letters + string.digits + "!@#$%&?-_.+=~^"

    def answer(episode) -> str:  # 5-20 letters, digits, punctuation (no markup): the floor
        rng = random.Random(f"{cfg.seed}:{episode.seed}:{len(episode.turns)}")
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 20)))

    return answer


# ----------------------------------------------------------------------------- configuration

@dataclass
class PasswordGameSettings:
    """The Password Game's settings in a run (TrainConfig's ``password_game`` section; turns per
    game are the ``game`` section's max_steps). ``password_game_config`` makes the game's own
    ``GameConfig`` of them."""
    num_rules: int = 26  # play only the first N rules (1..26)
    reward_per_rule: float = 1.0  # the original notebook's: rules - 0.01 * length, +10 at 5+
    length_penalty: float = 0.01
    episode_bonus: float = 10.0
    bonus_min_rules: int = 5
    # "absolute" (seed): every turn pays the score, which rewards stalling over long episodes;
    # "delta": every turn pays the change in score, so an episode's return is its final score.
    reward_mode: Literal["absolute", "delta"] = "absolute"


def password_game_config(cfg, num_rules: Optional[int] = None):
    """The Password Game's GameConfig from a TrainConfig (its game fields); ``num_rules``: a
    curriculum stage's rule count instead of the run's. A stage of fewer rules than
    ``bonus_min_rules`` pays the bonus for holding all of its rules: the r12 preset's bonus at 12
    rules (a win) means a win in a 6-rule stage too, not a bonus it can never earn. The run's
    own game keeps ``bonus_min_rules`` as it is."""
    from tasks.password_game import GameConfig, RewardConfig

    n = cfg.num_rules if num_rules is None else num_rules
    bonus_min_rules = cfg.bonus_min_rules if n == cfg.num_rules else min(cfg.bonus_min_rules, n)
    return GameConfig(max_steps=cfg.max_steps, num_rules=n, reward=RewardConfig(
        reward_per_rule=cfg.reward_per_rule, length_penalty=cfg.length_penalty,
        episode_bonus=cfg.episode_bonus, bonus_min_rules=bonus_min_rules, mode=cfg.reward_mode))


def password_rule_labels(n: int) -> list[str]:
    """``["1. 5+ characters", "2. a number", ...]`` for the first ``n`` rules: numbered from 1
    as the game's text numbers them (``per_rule_pass_rate[i]`` is rule ``i + 1``)."""
    from tasks.password_game.rules import NUM_RULES, rule_label

    return [rule_label(i) if i < NUM_RULES else f"{i + 1}" for i in range(n)]


# ----------------------------------------------------------------------------- curriculum
# A curriculum over the number of rules (gamerl.core.curriculum): a stage's games are
# "first-N", the game of the first N rules; a training instance of a stage is
# {"seed", "num_rules"} (a plain seed without a curriculum: the run's num_rules). The held-out
# evaluation always plays the run's num_rules, so its numbers compare with runs without one.

STAGE_PREFIX = "first-"
DEFAULT_STAGE_RULES = (6, 12, 26)  # the default stages, cut at the run's num_rules


def stage_rules(game: str) -> int:
    """``"first-6"`` -> 6."""
    return int(game[len(STAGE_PREFIX):])


def instance_rules(cfg, instance: Instance) -> int:
    """The rules an instance plays: its stage's (a dict's ``num_rules``), else the run's."""
    if isinstance(instance, dict) and "num_rules" in instance:
        return int(instance["num_rules"])
    return cfg.num_rules


def game_text(cfg, instance: Instance) -> str:
    """The texts of the rules an instance plays: what tells two games apart (the first 9 rules
    carry no per-game data, so every seed plays the same first-9-rules game)."""
    from tasks.password_game import make_instance
    from tasks.password_game.rules import rule_text

    inst = make_instance(instance_seed(instance))
    return "\n".join(rule_text(i, inst) for i in range(instance_rules(cfg, instance)))


def curriculum_choices(cfg) -> CurriculumChoices:
    """What a run's stages may name: "first-1" .. "first-{num_rules}" (no stage plays more
    rules than the held-out games do), no opponent; the default stages the first 6, 12 and 26
    rules that are fewer than num_rules, then num_rules itself, each ending at 50% success
    (over the curriculum's window of games)."""
    n = cfg.num_rules
    rules = [k for k in DEFAULT_STAGE_RULES if k < n] + [n]
    return CurriculumChoices(
        games=lambda: [f"{STAGE_PREFIX}{k}" for k in range(1, n + 1)], opponents=(),
        default_stages=lambda: [{"name": f"{STAGE_PREFIX}{k}", "games": [f"{STAGE_PREFIX}{k}"],
                                 "threshold": 0.5} for k in rules])


# The game's choices (all 26 rules); ``for_run(cfg)`` gives a run's, up to its num_rules.
PASSWORD_CURRICULUM = replace(curriculum_choices(PasswordGameSettings()), run=curriculum_choices)


# ------------------------------------------------------- the run's files, configure, verl

# env_config.json's reward keys -> the TrainConfig fields of the game's reward
REWARD_FIELDS = {"reward_per_rule": "reward_per_rule", "length_penalty": "length_penalty",
                 "episode_bonus": "episode_bonus", "bonus_min_rules": "bonus_min_rules",
                 "mode": "reward_mode"}


def _read_env(settings: dict, where: str, checks) -> dict[str, Any]:
    """env_config.json's ``num_rules`` and ``reward`` -> the TrainConfig fields they set."""
    values: dict[str, Any] = {}
    if "num_rules" in settings:
        values["num_rules"] = checks.field_value(settings["num_rules"], "num_rules",
                                                 f"{where}: num_rules")
    if "reward" in settings:
        reward = checks.reward_object(settings, list(REWARD_FIELDS), where)
        for key, name in REWARD_FIELDS.items():
            if key in reward:
                values[name] = checks.field_value(reward[key], name, f"{where}: reward.{key}")
    return values


def _write_env(cfg) -> dict[str, Any]:
    return {"num_rules": cfg.num_rules,
            "reward": {key: getattr(cfg, name) for key, name in REWARD_FIELDS.items()}}


CONFIG_FILES = ConfigFiles(
    env_keys=("num_rules", "reward"), read=_read_env, write=_write_env,
    env_comment=(
        "Password Game environment (PASSWORD_GAME_README.md). execution: local_password_game "
        "(in-process) or http (then base_url, a server from `python -m "
        "tasks.password_game.server`).",
        "num_rules: play the first N of the 26 rules. reward: score = rules held x "
        "reward_per_rule - length x length_penalty (+ episode_bonus from bonus_min_rules "
        "rules on); mode delta pays each turn's change in score (a game returns its final "
        "score), absolute pays the score every turn. Turns per game: train_config.json's "
        "game.max_steps."),
    env_holds="the Password Game's rules and reward",
    train_comments={
        "game": "max_steps: turns (passwords) per game.",
        "sampling": "Per turn: one password (the tiny preset's are 5-12 tokens; "
                    "max_new_tokens 24 leaves room for mistakes).",
        "schedule": "epochs x episodes_per_epoch training games; eval_episodes held-out games "
                    "(seeds from instances.eval_seed_start, disjoint from the training seeds).",
        "instances": "The Password Game's curriculum is over the number of rules: stages of "
                     "games \"first-N\" (the first N rules, N <= num_rules; no opponent); "
                     "\"default\": the first 6 -> 12 -> 26 up to num_rules. The held-out games "
                     "play num_rules."},
)


def _wizard_questions(cfg, wizard):
    n = wizard.question("Rules to play: the first N of the 26 (the tiny model learns 6 in "
                        "minutes)", cfg.num_rules, wizard.int_at_least(1),
                        validate=lambda n: wizard.checked(cfg, num_rules=n))
    turns = wizard.question("Turns (passwords) per game", cfg.max_steps, wizard.int_at_least(1))
    mode = wizard.question("Reward mode: delta (a game returns its final score) or absolute "
                           "(the original notebook's: every turn pays the score, which rewards "
                           "stalling)",
                           cfg.reward_mode, wizard.choice(("delta", "absolute")))
    return wizard.checked(cfg, num_rules=n, max_steps=turns, reward_mode=mode)


WIZARD = WizardQuestions(label="the Password Game", ask=_wizard_questions)


def verl_spec() -> VerlSpec:
    """The verl bridge's Password Game: ``reward.mode`` "delta" by default (the bridge pays an
    episode the sum of its turn rewards, and "absolute" summed over turns pays for stalling);
    the secret is a reference solution of all 26 rules (the solver proves every instance
    solvable)."""
    from dataclasses import asdict

    from tasks.password_game import GameConfig, LocalPasswordGameEnv, make_instance, solve

    def default_config() -> dict:
        config = asdict(GameConfig())
        config["reward"]["mode"] = "delta"
        return config

    return VerlSpec(title="Password Game", config_cls=GameConfig, default_config=default_config,
                    make_env=LocalPasswordGameEnv,
                    secret=lambda seed, config: solve(make_instance(seed), hatched=True),
                    max_turns=lambda config: config.max_steps)


# ----------------------------------------------------------------------------- the task

def _env_factory(cfg) -> MakeEnv:
    """``make_env(instance=None)``: a game of the instance's rules (its curriculum stage's),
    else the run's."""
    from tasks.password_game import LocalPasswordGameEnv

    configs = {n: password_game_config(cfg, n) for n in range(1, cfg.num_rules + 1)}
    return lambda instance=None: LocalPasswordGameEnv(configs[instance_rules(cfg, instance)])


def _http_factory(cfg, base_url: str) -> MakeEnv:
    from dataclasses import asdict

    from tasks.password_game import PasswordGameEnv

    def make_env(instance=None):
        gc = password_game_config(cfg, instance_rules(cfg, instance))
        return PasswordGameEnv(base_url, max_steps=gc.max_steps, num_rules=gc.num_rules,
                               reward=asdict(gc.reward))

    return make_env


def _start(make_env: MakeEnv, instance: Instance) -> tuple[Any, dict]:
    """A seed plays the run's rules with ``make_env()`` (any factory a user hands the trainer);
    a curriculum stage's ``{"seed", "num_rules"}`` asks the factory for that game,
    ``make_env(instance)`` (the game's own factories take it)."""
    env = make_env(instance) if isinstance(instance, dict) else make_env()
    return env, env.reset(instance_seed(instance))


def _train_instances(cfg, seeds: Sequence[int], stage: Optional[dict] = None) -> list:
    """Seeds; under a curriculum ``{"seed", "num_rules"}``, a stage game drawn per seed."""
    if stage is None:
        return list(seeds)
    games = list(stage["games"])
    return [{"seed": s,
             "num_rules": stage_rules(games[random.Random(f"game:{s}").randrange(len(games))])}
            for s in seeds]


def _turn_stats(info: dict) -> dict:
    return {"rules_satisfied": int(info["rules_satisfied"]),
            "num_revealed": int(info["num_revealed"]), "success": bool(info["success"])}


def _metrics(episodes, cfg) -> dict:
    n = max(len(episodes), 1)
    per_rule = [0.0] * cfg.num_rules
    for ep in episodes:
        for rule in ep.final_info.get("rules", []):
            if rule["satisfied"] and rule["id"] < cfg.num_rules:
                per_rule[rule["id"]] += 1
    return {"rules_satisfied": sum(rules_satisfied(ep) for ep in episodes) / n,
            "per_rule_pass_rate": [c / n for c in per_rule]}


def make_task() -> Task:
    return Task(
        name="password_game",
        system_prompt=SYSTEM_PROMPT,
        extract=extract_password, feedback=feedback_message,
        env_factory=_env_factory, http_env_factory=_http_factory, start=_start,
        train_instances=_train_instances, eval_instances=seed_eval, game_text=game_text,
        turn_stats=_turn_stats, metrics=_metrics,
        badness=lambda ep, cfg: 1.0 - rules_satisfied(ep) / instance_rules(cfg, ep.instance),
        demo=lambda cfg, rng: (lambda ep: demo_password(rng, cfg.num_rules,
                                                        cfg.warmstart_extra_prob)),
        expert_demo=expert_answer,
        reference_agents=lambda cfg: {"solver": password_solver_answer,
                                      "random": _random_answer(cfg)},
        max_turns=lambda cfg: cfg.max_steps,
        headline=("rules_satisfied",),
        reference_labels={"solver": "solver (all rules)", "random": "random strings (floor)"},
        metric_descriptions={"rules_satisfied": "rules the last password satisfies (mean)",
                             "success_rate": "games won: the last password holds every rule"},
        metric_entry_labels={"per_rule_pass_rate": password_rule_labels},
        report_columns=(ReportColumn("reward", "reward"),
                        ReportColumn("rules_satisfied", "rules satisfied (of {num_rules})"),
                        ReportColumn("success_rate", "success", "{:.1%}"),
                        ReportColumn("turns", "turns"),
                        ReportColumn("per_rule_pass_rate", "per-rule pass rate")),
        record_fields=_record_fields, sample_table=SAMPLE_TABLE, curriculum=PASSWORD_CURRICULUM,
        server_port=8000, config_files=CONFIG_FILES, wizard=WIZARD, verl=verl_spec,
    )
