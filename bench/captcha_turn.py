"""The 12-rule game's hardest turn, measured alone: given the expert's own game up to the turn its
CAPTCHA goes in, does a model's next password hold the CAPTCHA and a digit sum of 25?

    python bench/captcha_turn.py RUN/warmstart [RUN/best ...] [--games 64]

Each model plays nothing itself: the expert (``gamerl.games.password_game.expert_answer``)
plays ``--games`` games from the first of the run's validation seeds (never a training or a
test game), and on each game whose CAPTCHA has digits the model answers the CAPTCHA turn once,
greedily, from the expert's history (the repair that caps 12-rule success:
docs/experiments.md). Reports, over those turns, how often its password holds the CAPTCHA, and
the CAPTCHA with a digit sum of 25 (rules 5 and 10). The run's settings come from
``config.json`` in the model's parent directory (``--config`` to name another). About a
minute a model on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def captcha_turns(cfg, tokenizer, games: int) -> list[tuple[list[int], str, str]]:
    """``(prompt ids, CAPTCHA, the expert's answer)`` of each of ``games`` games from the start
    of the validation seeds whose CAPTCHA has digits and goes in: the expert's game up to that
    turn's answer."""
    from gamerl.core.evaluate import local_env_factory
    from gamerl.core.rollout import RolloutConfig, ScriptedPolicy, rollout
    from gamerl.games.registry import get_task
    from tasks.password_game import make_instance

    task = get_task("password_game")
    instances = task.train_instances(cfg, cfg.eval_seeds(games, split="validation"), None)
    episodes = rollout(ScriptedPolicy(tokenizer, task.expert_demo(cfg, random.Random(0))),
                       tokenizer, instances, local_env_factory(cfg),
                       RolloutConfig.from_train_config(cfg))
    out = []
    for ep in episodes:
        captcha = make_instance(ep.seed).captcha
        turn = next((t for t in ep.turns if captcha in t.action), None)
        if turn is not None and any(c.isdigit() for c in captcha):
            out.append((ep.token_ids[:turn.last_token - turn.n_tokens + 1], captcha, turn.answer))
    return out


def measure(lm, tokenizer, cfg, turns: list[tuple[list[int], str, str]],
            batch_size: int = 16) -> dict:
    """The model's greedy answer to each of ``turns`` (``captcha_turns``), played by the
    rollout's own policy (``LMPolicy``: the evaluation's decoding, the run's stop tokens),
    ``batch_size`` turns a call: how often it holds the CAPTCHA, and with a digit sum of 25."""
    import dataclasses

    from gamerl.core.rollout import LMPolicy, RolloutConfig
    from gamerl.games.password_game import extract_password
    from tasks.password_game.rules import digit_sum

    # one turn of unrelated games a call: nothing to carry into a next turn
    policy = LMPolicy(lm, tokenizer, dataclasses.replace(
        RolloutConfig.from_train_config(cfg, greedy=True, evaluation=True),
        reuse_kv_cache=False))
    copied = held = 0
    for start in range(0, len(turns), batch_size):
        batch = turns[start:start + batch_size]
        answers = policy([prompt for prompt, _, _ in batch], [])
        for (_, captcha, _), answer in zip(batch, answers):
            password = extract_password(tokenizer.decode(answer.token_ids,
                                                         skip_special_tokens=True))
            copied += captcha in password
            held += captcha in password and digit_sum(password) == 25
    n = max(1, len(turns))
    return {"games": len(turns), "captcha_copied": copied / n, "captcha_and_sum_25": held / n}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", type=Path, help="saved models (RUN/warmstart, RUN/best)")
    p.add_argument("--config", type=Path, help="the run's config.json (default: beside the model)")
    p.add_argument("--games", type=int, default=64,
                   help="games played, from the first validation seed (default 64)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    if args.games < 1:
        p.error("--games must be at least 1")
    from gamerl.config import TrainConfig

    configs = []  # (path, settings) of every model's run, checked before any model runs
    for model in args.models:
        if not (model / "config.json").is_file():
            p.error(f"{model}: no saved model (config.json) there")
        config = args.config or model.parent / "config.json"
        if not config.is_file():
            p.error(f"{config}: no run config (name one with --config)")
        cfg = TrainConfig.load(config)
        if cfg.task != "password_game" or cfg.num_rules < 10:
            p.error(f"{config}: a Password Game run with a CAPTCHA (num_rules >= 10) is needed")
        configs.append((config.resolve(), cfg))
    from gamerl.models.loading import load_policy

    results, turns_of = [], {}  # the expert's games are played once per run config
    for model, (config, cfg) in zip(args.models, configs):
        lm, tokenizer = load_policy(str(model), device="cpu")
        if config not in turns_of:
            turns_of[config] = captcha_turns(cfg, tokenizer, args.games)
        r = {"model": str(model), **measure(lm, tokenizer, cfg, turns_of[config])}
        results.append(r)
        print(f"{r['model']}: {r['games']} CAPTCHA turns with digits; CAPTCHA copied "
              f"{r['captcha_copied']:.0%}, with digit sum 25 {r['captcha_and_sum_25']:.0%}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
