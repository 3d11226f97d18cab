"""The Password Game's expert (tasks/password_game/demos.py): the warm start's demonstrations for a
real model. They must hold what they claim on the real game, for many seeds; repairs keep what
held; played through the game they score near the solver, far above the zero-shot SmolLM2 (2.84
of 6 rules, 0% success: docs/benchmarks.md). Wordle's expert (tasks/wordle/solver.py::expert_guess)
as the warm start plays it; its own games are checked in tests/test_wordle.py."""

from __future__ import annotations

import random
import re

import pytest
from conftest import trained_answers  # pytest (prepend import mode) puts tests/ on sys.path

from tasks.password_game import make_instance
from tasks.password_game.demos import KNOWN_AHEAD, MAX_REPAIRED_RULE, first_password, repair
from tasks.password_game.game import GameConfig, PasswordGame, RewardConfig
from tasks.password_game.richtext import parse
from tasks.password_game.rules import broken_rule_detail, check_rules, digit_sum

SEEDS = range(300)


@pytest.mark.parametrize("num_rules", [6, 12])
def test_first_password_with_p1_holds_every_rule_known_ahead(num_rules):
    rng = random.Random(0)
    known = [r for r in KNOWN_AHEAD if r < num_rules]
    for seed in SEEDS:
        inst = make_instance(seed)
        pw = first_password(inst, num_rules, rng, p=1.0)
        verdicts = check_rules(parse(pw), inst, num_rules)
        assert all(verdicts[r] for r in known), (seed, pw, verdicts)
        assert len(pw) <= 60, pw  # short: a word and the ingredients, no markup


def test_first_password_holds_a_prefix_and_varies():
    rng = random.Random(1)
    held, passwords = [], set()
    for seed in SEEDS:
        inst = make_instance(seed)
        pw = first_password(inst, 6, rng, p=0.5)
        verdicts = check_rules(parse(pw), inst, 6)
        assert verdicts[0], pw  # rule 1, the one shown, always holds
        held.append(next((i for i, v in enumerate(verdicts) if not v), 6))
        passwords.add(pw)
    assert len(passwords) > 120  # varied: words, digit runs, months, specials drawn per game
    assert 0 < sum(h == 6 for h in held) < len(held)  # some complete, some leave work


def _play(num_rules: int, max_steps: int, p: float, seeds=SEEDS):
    """The expert's episodes through the real game: (final info, [(password, verdicts)])."""
    rng = random.Random(2)
    for seed in seeds:
        game = PasswordGame(GameConfig(max_steps=max_steps, num_rules=num_rules,
                                       reward=RewardConfig(mode="delta")))
        game.reset(seed)
        pw, turns = first_password(game.instance, num_rules, rng, p), []
        while True:
            step = game.step(pw)
            verdicts = [r["satisfied"] for r in step.info["rules"]]
            turns.append((step.observation["last_password"], verdicts))
            if step.done:
                break
            pw = repair(game.instance, step.observation["last_password"], verdicts, rng,
                        step.observation["hatched"])
        yield game.instance, step.info, turns


def test_repairs_keep_what_held_and_fix_what_broke():
    """Each repair holds every rule revealed so far (those that held and those that broke), and
    keeps the previous password's parts: only digits and numerals may be rewritten, and a
    word's first letter capitalised (rule 3)."""
    repaired = 0
    for inst, _, turns in _play(12, 5, 0.5):
        for (before, verdicts), (after, _) in zip(turns, turns[1:]):
            now = check_rules(parse(after), inst, len(verdicts))
            assert all(now), (before, verdicts, after, now)
            kept = [part.lower() for part in before.split()
                    if not re.fullmatch(r"[0-9IVXLCDM]+", part)]
            assert all(part in after.lower().split() for part in kept), (before, after)
            repaired += not all(verdicts)
    assert repaired > 300


def test_digit_repair_counts_the_captcha():
    """Rule 10 appends the CAPTCHA; when its digits push the sum past 25, the same repair
    rewrites the expert's own digit run, in place, and leaves the CAPTCHA alone: the run's
    nines become the complements of the CAPTCHA's digits, in order (a lookup, no sum)."""
    seen = 0
    for seed in range(400):
        inst = make_instance(seed)
        if not any(c.isdigit() for c in inst.captcha):
            continue
        pw = "Garden 997 ! may XXXV pepsi"
        verdicts = check_rules(parse(pw), inst, 10)
        assert verdicts[:9] == [True] * 9 and not verdicts[9]
        after = repair(inst, pw, verdicts, random.Random(seed))
        assert inst.captcha in after and digit_sum(after) == 25, after
        assert after.startswith("Garden "), after
        # 997's nines become 9 minus each CAPTCHA digit (one digit: the first nine only)
        run = "".join(str(9 - int(c)) for c in inst.captcha if c.isdigit()).ljust(2, "9") + "7"
        assert after == f"Garden {run} ! may XXXV pepsi {inst.captcha}", (inst.captcha, after)
        seen += 1
    assert seen > 50


def test_digit_run_repair_is_the_smallest_change():
    """A run that can take the change is changed from its last digit by what the sum is off
    (the repair a model can read off "your digits add up to 31"); one that cannot becomes a
    new run."""
    from tasks.password_game.demos import _adjust_run

    assert _adjust_run("997", -6) == "991"
    assert _adjust_run("997", -11) == "950"
    assert _adjust_run("42", 3) == "45"
    assert _adjust_run("988", 0) == "988"
    assert _adjust_run("42", 19) is None and _adjust_run("1", -2) is None
    inst = make_instance(0)

    def repaired(pw: str) -> str:
        return repair(inst, pw, check_rules(parse(pw), inst, 5), random.Random(0))

    assert repaired("Garden 9979 !") == "Garden 9970 !"  # 34: nine too many
    after = repaired("Garden 88 !")  # 16: 88 cannot reach 25 by its own digits
    assert re.fullmatch(r"Garden [0-9]+ !", after) and digit_sum(after) == 25, after


@pytest.mark.parametrize("num_rules,max_steps,p,rules_min,success_min", [
    (6, 3, 0.9, 5.3, 0.65),    # measured over 1,000 games: 5.40 rules, 71% success
    (12, 5, 0.95, 10.3, 0.6),  # measured over 1,000 games: 10.70 rules, 70% success
])
def test_demonstrations_score_near_the_solver(num_rules, max_steps, p, rules_min, success_min):
    results = [info for _, info, _ in _play(num_rules, max_steps, p)]
    rules = sum(i["rules_satisfied"] for i in results) / len(results)
    success = sum(i["success"] for i in results) / len(results)
    assert rules >= rules_min and success >= success_min, (rules, success)


def test_a_later_rule_is_repaired_with_the_solvers_password():
    inst = make_instance(5)
    verdicts = [True] * 13 + [False]  # rule 14 (the country) breaks: past what the expert adds
    assert len(verdicts) - 1 > MAX_REPAIRED_RULE
    after = repair(inst, "anything", verdicts, random.Random(0))
    assert all(check_rules(parse(after), inst, 14))


def test_broken_rule_detail_says_where_the_password_stands():
    assert broken_rule_detail(4, parse("Hello1!")) == "Your digits add up to 1."
    assert broken_rule_detail(0, parse("abc")) == "Yours has 3."
    assert broken_rule_detail(8, parse("XIV may")) == "Your Roman numerals multiply to 14."
    assert broken_rule_detail(8, parse("may")) == "Your password has no Roman numeral."
    assert broken_rule_detail(25, parse("**a***b*")) == "Yours has 1 italic and 1 bold characters."
    assert broken_rule_detail(2, parse("hello")) is None  # nothing to count


def _return(game_config, seed: int, passwords: list[str]) -> float:
    game = PasswordGame(game_config)
    game.reset(seed)
    return sum(game.step(pw).reward for pw in passwords)


def test_the_smollm2_presets_returns_favour_trying_over_stalling():
    """With delta rewards an episode's return is its final score, and with bonus_min_rules=6
    the +10 pays a win only: a repair that fails costs a few length-penalty cents against the
    stall, one that wins pays 12 more. Hand-computed: score = rules - 0.01 * length (+10 won)."""
    from gamerl.config import get_config

    gc = get_config("smollm2-135m").game_config()
    stall = _return(gc, 7, ["Hello1!", "Hello1!", "Hello1!"])  # 4 of 5 rules, every turn
    failed = _return(gc, 7, ["Hello1!", "Hello99!", "Hello99!"])  # digits 18: still 4 of 5
    won = _return(gc, 7, ["Hello1!", "Hello997!", "Hello997!may"])  # 5 of 6, then all 6
    assert stall == pytest.approx(4 - 0.07)
    assert failed == pytest.approx(4 - 0.08)
    assert won == pytest.approx(6 + 10 - 0.12)
    # trying pays as soon as it wins once in (12.05 / 0.01 + 1) tries
    assert (won - stall) / (stall - failed) > 1000


def test_expert_demonstrations_train_on_the_answers_only(tiny_dir):
    """The warm start's examples (gamerl.core.warmstart.demonstrations) with the expert: whole
    episodes in the model's chat template; the loss mask covers exactly each turn's password
    and the <|im_end|> that closes it, never the prompt or the game's feedback."""
    from gamerl.config import get_config
    from gamerl.core.warmstart import demonstrations
    from gamerl.models import load_policy

    _, tok = load_policy(str(tiny_dir), device="cpu")
    cfg = get_config("smollm2-135m", model=str(tiny_dir), warmstart_examples=24)
    assert cfg.warmstart_demos == "expert"
    examples = demonstrations(cfg, tok, seed=0)
    assert len(examples) == 24
    multi_turn = 0
    for ids, mask in examples:
        assert len(ids) == len(mask) and mask[0] == 0
        # the masked spans, each one answer: "<password><|im_end|>"
        answers = trained_answers(tok, ids, mask)
        assert all(a.endswith("<|im_end|>") for a in answers), answers
        passwords = [a.removesuffix("<|im_end|>") for a in answers]
        text = tok.decode(ids)
        # every answer after the first is a repair of the password the feedback restated
        for before, after in zip(passwords, passwords[1:]):
            assert f"Your password: {before}" in text
            assert set(before.lower().split()) - set(after.lower().split()) <= {
                w for w in before.split() if w.isdigit() or set(w) <= set("IVXLCDM")}
        assert "<|im_start|>user" not in "".join(answers)
        multi_turn += len(passwords) > 1
    assert multi_turn >= 4  # repairs are shown, not only first passwords


def test_wordle_expert_demonstrations_keep_the_marks(tiny_dir):
    """Wordle's expert as the SmolLM2 preset's warm start plays it (``feedback="latest"``):
    whole games in the chat template, the loss on the guesses only (each guess and the
    <|im_end|> closing it); the first guesses are the openers, every later guess keeps every
    mark the game showed, and most games end before the sixth guess (won)."""
    from gamerl.config import get_config
    from gamerl.core.warmstart import demonstrations
    from gamerl.models import load_policy
    from tasks.wordle import score_guess
    from tasks.wordle.solver import EXPERT_OPENERS

    _, tok = load_policy(str(tiny_dir), device="cpu")
    cfg = get_config("smollm2-135m", task="wordle", model=str(tiny_dir), warmstart_examples=16)
    assert cfg.warmstart_demos == "expert" and cfg.feedback == "latest"
    short = 0
    for ids, mask in demonstrations(cfg, tok, seed=0):
        spans = trained_answers(tok, ids, mask)
        assert all(a.endswith("<|im_end|>") for a in spans), spans
        guesses = [a.removesuffix("<|im_end|>") for a in spans]
        assert guesses[:2] == list(EXPERT_OPENERS) or len(guesses) <= 3, guesses
        won = len(guesses) < 6  # a game ends early only when won: the last guess is the answer
        for i, guess in enumerate(guesses[2:] if won else [], start=2):
            assert all(score_guess(guess, g) == score_guess(guesses[-1], g)  # keeps the marks
                       for g in guesses[:i]), guesses
        assert tok.decode(ids).count("In place: ") == len(guesses) - 1
        short += won
    assert short >= 12
