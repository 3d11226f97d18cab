"""Why a Password Game run's games fail, from its training episodes (RUN/episodes.jsonl).

    python bench/password_failures.py checkpoints/r12_s0 [checkpoints/r12_s1 ...] [--epochs 2]

Each game of the last ``--epochs`` epochs (the policy's own samples, on training seeds) gets
the first reason on this list that fits its last password: won; stopped before the CAPTCHA rule
(rule 10) was revealed; the CAPTCHA never in a password; the CAPTCHA dropped again; the digit
sum broken with the CAPTCHA in, the password's own digits never changed after the CAPTCHA went
in, or changed; the Wordle answer (rule 11) missing; anything else. It also splits the wins by
whether the game's CAPTCHA has digits, the case where rule 5 needs a repair. Reads the games
back from their seeds (``tasks.password_game``); no model runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.password_game import make_instance  # noqa: E402
from tasks.password_game.rules import digit_sum  # noqa: E402

CAPTCHA_RULE = 10  # rules numbered from 1, as the game's text numbers them
REASONS = ("won", "stopped before the CAPTCHA rule", "CAPTCHA never in a password",
           "CAPTCHA dropped again", "digit sum broken, own digits never changed",
           "digit sum broken, own digits changed", "Wordle answer missing", "other")


def _own_digits(password: str, captcha: str) -> list[str]:
    return re.findall(r"\d+", password.replace(captcha, " "))


def failure_reason(episode: dict, inst) -> str:
    """The first of REASONS that fits ``episode`` (a line of RUN/episodes.jsonl) of the game
    ``inst`` (``make_instance`` of its seed)."""
    if episode["success"]:
        return REASONS[0]
    if episode["num_revealed"] < CAPTCHA_RULE:
        return REASONS[1]
    passwords, captcha = episode["passwords"], inst.captcha
    first = next((i for i, p in enumerate(passwords) if captcha in p), None)
    if first is None:
        return REASONS[2]
    last = passwords[-1]
    if captcha not in last:
        return REASONS[3]
    if digit_sum(last) != 25:
        runs = _own_digits(passwords[first], captcha)
        changed = any(_own_digits(p, captcha) != runs for p in passwords[first:])
        return REASONS[5] if changed else REASONS[4]
    if inst.wordle not in last.lower():
        return REASONS[6]
    return REASONS[7]


def breakdown(run_dir: Path, epochs: int) -> dict:
    episodes = [json.loads(line) for line in (run_dir / "episodes.jsonl").open()]
    last = max(e["epoch"] for e in episodes)
    episodes = [e for e in episodes if e["epoch"] > last - epochs]
    reasons: Counter = Counter()
    split: dict[str, list[int]] = {"CAPTCHA with digits": [0, 0], "CAPTCHA without digits": [0, 0]}
    for e in episodes:
        inst = make_instance(e["seed"])
        reasons[failure_reason(e, inst)] += 1
        key = ("CAPTCHA with digits" if any(c.isdigit() for c in inst.captcha)
               else "CAPTCHA without digits")
        split[key][0] += int(e["success"])
        split[key][1] += 1
    return {"run": str(run_dir), "epochs": sorted({e["epoch"] for e in episodes}),
            "games": len(episodes), "reasons": {r: reasons[r] for r in REASONS if reasons[r]},
            "won_of": split}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="run directories with episodes.jsonl")
    p.add_argument("--epochs", type=int, default=2, help="the last N epochs' games (default 2)")
    p.add_argument("--json", type=Path, help="also write the breakdowns here")
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error("--epochs must be at least 1")
    for run in args.runs:
        if not (run / "episodes.jsonl").is_file():
            p.error(f"{run}: no episodes.jsonl (a Password Game run directory?)")
    results = [breakdown(run, args.epochs) for run in args.runs]
    for r in results:
        print(f"{r['run']}: {r['games']} games of epochs {r['epochs'][0]}-{r['epochs'][-1]}")
        for reason, n in r["reasons"].items():
            print(f"  {n:4d}  {reason}")
        for key, (won, n) in r["won_of"].items():
            print(f"  won {won} of {n} games with a {key}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
