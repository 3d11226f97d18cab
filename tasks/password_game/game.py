"""The Password Game as a seeded, turn-based environment (the one source of truth for the rules).

Protocol (shared by every game in ``tasks/``): ``reset(seed) -> observation`` and
``step(action) -> StepResult(observation, reward, done, info)``. Observations and infos are plain
JSON-able dicts, so the in-process environment and the HTTP server return identical objects.

Turn structure, as on neal.fun but one submission per turn:
* rules appear one at a time; after a submission every revealed rule is checked, and while all of
  them hold the next rule is revealed and checked too (one good password can reveal several);
* rule 19 (fire) sets the password on fire when it appears, so it fails on that turn and the next
  password must be free of 🔥;
* rule 22 (Paul hatches) turns the 🥚 in the password into 🐔 when it appears;
* the episode ends on success (all 26 revealed and satisfied) or after ``max_steps`` submissions.
"""

from __future__ import annotations

import json
import math
import random
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..common.protocol import GameOver, StepResult  # the protocol's shared types
from .instance import MAX_SEED, Instance, check_seed, make_instance
from .richtext import parse
from .rules import CHICKEN, EGG, FIRE, NUM_RULES, RULE_FIRE, RULE_HATCH, RULES, check_rules
from .solver import solve

INSTRUCTIONS = (
    "You are playing the Password Game. Write a password that satisfies every rule shown. Rules "
    "appear one at a time: when all shown rules hold, the next one appears. Formatting: **bold**, "
    "*italic*, \\* for a literal asterisk. Length counts plain characters."
)


@dataclass
class RewardConfig:
    """The seed's reward: ``rules_satisfied * reward_per_rule - length * length_penalty``, plus
    ``episode_bonus`` when at least ``bonus_min_rules`` revealed rules hold.

    ``mode="absolute"`` (the seed's) pays that score after every submission. Summed over an
    episode it pays for stalling: 25 rules held for 30 turns earns more than winning early.
    ``mode="delta"`` pays the change in score instead (potential-based shaping: the episode's
    return is the final score, and the incentive to stall is gone).
    """

    reward_per_rule: float = 1.0
    length_penalty: float = 0.01
    episode_bonus: float = 10.0
    bonus_min_rules: int = 5
    mode: Literal["absolute", "delta"] = "absolute"

    def __post_init__(self) -> None:
        for name in ("reward_per_rule", "length_penalty", "episode_bonus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"reward.{name} must be a finite number, got {value!r}")
        if self.mode not in ("absolute", "delta"):
            raise ValueError("reward.mode must be 'absolute' or 'delta'")

    def score(self, rules_satisfied: int, length: int) -> float:
        s = rules_satisfied * self.reward_per_rule - length * self.length_penalty
        if rules_satisfied >= self.bonus_min_rules:
            s += self.episode_bonus
        return s


@dataclass
class GameConfig:
    """``max_steps`` submissions per episode; ``num_rules`` < 26 plays only the first rules (a
    shorter game for curricula and quick tests: winning means satisfying those)."""

    max_steps: int = 30
    reward: RewardConfig = field(default_factory=RewardConfig)
    num_rules: int = NUM_RULES

    def __post_init__(self) -> None:
        if isinstance(self.reward, dict):
            self.reward = RewardConfig(**self.reward)
        if self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        if not 1 <= self.num_rules <= NUM_RULES:
            raise ValueError(f"num_rules must be in [1, {NUM_RULES}]")


def set_on_fire(password: str, seed: int) -> str:
    """The password with three 🔥 inserted at seed-chosen places (what the player sees burn).

    Never next to an asterisk or a backslash, so the fire cannot split or escape any markup.
    """
    rng = random.Random(seed ^ 0xF12E)
    chars = list(password)
    for _ in range(3):
        safe = [i for i in range(len(chars) + 1)
                if (i == 0 or chars[i - 1] not in "*\\") and (i == len(chars) or chars[i] != "*")]
        chars.insert(rng.choice(safe) if safe else len(chars), FIRE)
    return "".join(chars)


class PasswordGame:
    """One episode at a time. Not thread-safe (the server holds one per session)."""

    def __init__(self, config: GameConfig | None = None) -> None:
        self.config = config or GameConfig()
        self.instance: Instance | None = None
        self.turn = 0
        self.n_revealed = 0
        self.hatched = False
        self.done = False
        self.success = False
        self.last_password: str | None = None
        self.last_verdicts: list[bool] = []
        self.last_score = 0.0

    # ------------------------------------------------------------------ protocol
    def reset(self, seed: int | None = None) -> dict[str, Any]:
        seed = secrets.randbelow(MAX_SEED + 1) if seed is None else check_seed(seed)
        self.instance = make_instance(seed)
        self.turn, self.n_revealed, self.hatched = 0, 1, False
        self.done = self.success = False
        self.last_password, self.last_verdicts, self.last_score = None, [], 0.0
        return self.observation()

    def step(self, password: str) -> StepResult:
        inst = self._require_instance()
        if self.done:
            raise GameOver("the episode has ended; call reset()")
        if not isinstance(password, str):
            raise TypeError("password must be a string")
        self.turn += 1
        newly_revealed: list[int] = []
        on_fire = False
        parsed = parse(password)
        verdicts = check_rules(parsed, inst, self.n_revealed, self.hatched)
        while all(verdicts) and self.n_revealed < self.config.num_rules:
            new_rule = self.n_revealed
            self.n_revealed += 1
            newly_revealed.append(new_rule)
            if new_rule in (RULE_HATCH, RULE_FIRE):
                if new_rule == RULE_HATCH:  # the egg hatches inside the password
                    self.hatched = True
                    password = password.replace(EGG, CHICKEN)
                else:  # the fire starts as the rule appears
                    password = set_on_fire(password, inst.seed)
                    on_fire = True
                # The password changed: check every revealed rule again. On fire, rule 19
                # fails, so the loop stops here: the fire costs a turn, as it should.
                parsed = parse(password)
                verdicts = check_rules(parsed, inst, self.n_revealed, self.hatched)
            else:  # same password: only the new rule needs checking
                verdicts.append(RULES[new_rule].check(parsed, inst, self.hatched))
        self.last_password, self.last_verdicts = password, verdicts
        rules_satisfied = sum(verdicts)
        length = len(parsed.plain)
        self.success = self.n_revealed == self.config.num_rules and rules_satisfied == self.n_revealed
        truncated = not self.success and self.turn >= self.config.max_steps
        self.done = self.success or truncated
        score = self.config.reward.score(rules_satisfied, length)
        reward = score if self.config.reward.mode == "absolute" else score - self.last_score
        self.last_score = score
        info = {
            "rules": self._rule_rows(verdicts),
            "rules_satisfied": rules_satisfied,
            "num_revealed": self.n_revealed,
            "newly_revealed": newly_revealed,
            "on_fire": on_fire,
            "success": self.success,
            "truncated": truncated,
            "length": length,
            "score": score,
            "turn": self.turn,
            "seed": inst.seed,
        }
        return StepResult(self.observation(), float(reward), self.done, info)

    def feedback(self, password: str) -> dict[str, Any]:
        """Verdicts of the revealed rules for ``password``; changes nothing, reveals nothing."""
        inst = self._require_instance()
        if not isinstance(password, str):
            raise TypeError("password must be a string")
        parsed = parse(password)
        verdicts = check_rules(parsed, inst, self.n_revealed, self.hatched)
        return {"rules": self._rule_rows(verdicts), "rules_satisfied": sum(verdicts),
                "all_satisfied": all(verdicts), "length": len(parsed.plain)}

    # ------------------------------------------------------------------ views
    def observation(self) -> dict[str, Any]:
        inst = self._require_instance()
        verdicts = self.last_verdicts + [None] * (self.n_revealed - len(self.last_verdicts))
        rules = self._rule_rows(verdicts)
        return {
            "seed": inst.seed,
            "turn": self.turn,
            "max_steps": self.config.max_steps,
            "num_rules": self.config.num_rules,
            "num_revealed": self.n_revealed,
            "rules": rules,
            "last_password": self.last_password,
            "hatched": self.hatched,
            "done": self.done,
            "success": self.success,
            "text": self._render(rules),
        }

    def state(self) -> dict[str, Any]:
        inst = self._require_instance()
        return {**self.observation(), "instance": instance_summary(inst), "score": self.last_score}

    def _rule_rows(self, verdicts: list[bool | None]) -> list[dict[str, Any]]:
        inst = self._require_instance()
        return [{"id": i, "text": RULES[i].text(inst, self.hatched), "satisfied": v}
                for i, v in enumerate(verdicts)]

    def _render(self, rules: list[dict[str, Any]]) -> str:
        lines = [INSTRUCTIONS, f"Turn {self.turn} of {self.config.max_steps}."]
        if self.last_password is not None:
            lines.append(f"Your last password: {self.last_password}")
        lines.append("Rules:")
        mark = {True: "[x]", False: "[ ]", None: "[?]"}
        for r in rules:
            lines.append(f"{mark[r['satisfied']]} Rule {r['id'] + 1}: {r['text']}")
        if self.success:
            lines.append("All rules satisfied: you win!")
        elif self.done:
            lines.append("Out of turns.")
        return "\n".join(lines)

    def _require_instance(self) -> Instance:
        if self.instance is None:
            raise RuntimeError("call reset() first")
        return self.instance


def instance_summary(inst: Instance) -> dict[str, Any]:
    """The instance's data as JSON (for state endpoints and debugging)."""
    # A JSON round trip turns tuples into lists, so the local state() equals the server's.
    return json.loads(json.dumps({**asdict(inst), "date": inst.date.isoformat(), "moon": inst.moon}))


def check_password(password: str, seed: int, n_revealed: int = NUM_RULES) -> dict[str, Any]:
    """Stateless check of a password against rules ``0 .. n_revealed-1`` of instance ``seed``.

    With all 26 rules revealed Paul has hatched, so rule 16 wants 🐔; no fire is started.
    """
    inst = make_instance(check_seed(seed))
    if not 0 <= n_revealed <= NUM_RULES:
        raise ValueError(f"n_revealed must be in [0, {NUM_RULES}]")
    hatched = n_revealed > RULE_HATCH
    parsed = parse(password)
    verdicts = check_rules(parsed, inst, n_revealed, hatched)
    return {"seed": seed, "rules": [{"id": i, "text": RULES[i].text(inst, hatched), "satisfied": v}
                                    for i, v in enumerate(verdicts)],
            "rules_satisfied": sum(verdicts), "all_satisfied": all(verdicts),
            "length": len(parsed.plain)}


def corpus_texts(seeds: range = range(64)) -> list[str]:
    """Text a tokenizer for this game should know: observations with every rule, and solutions.

    Used to train the embedded tiny model's tokenizer (gamerl), so that rule texts, emoji and
    markup become short token sequences.
    """
    texts: list[str] = []
    for seed in seeds:
        game = PasswordGame()
        game.reset(seed)
        game.n_revealed = NUM_RULES  # show every rule's text once
        texts.append(game.observation()["text"])
        texts.append(solve(game.instance, hatched=False))
        texts.append(solve(game.instance, hatched=True))
    return texts
