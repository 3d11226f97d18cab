"""Command line: mark a guess, print the solver's guesses, measure the solver, or play.

    python -m tasks.wordle feedback --answer abbey --guess babes --json
    python -m tasks.wordle solve --answer crane          # one guess per line, the last is the answer
    python -m tasks.wordle solve --seed 7
    python -m tasks.wordle solve --all [--json]          # the solver over all 2,309 answers
    python -m tasks.wordle play [--seed 7] [--hard]      # guesses from stdin
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

from ..common.protocol import seed_argument
from ..common.terminal import ask_nonempty
from .game import WordleConfig, feedback, make_instance, normalize_guess
from .words import answer_index, answers, emoji


def cmd_feedback(args: argparse.Namespace) -> int:
    try:
        marks = feedback(args.answer, args.guess)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"marks": marks}))
    else:
        print(f"{normalize_guess(args.guess).upper()}  {emoji(marks)}  {' '.join(marks)}")
    return 0


def cmd_solve(args: argparse.Namespace) -> int:
    from .solver import default_solver

    solver = default_solver()
    if args.all:
        return _solve_all(solver, args.json)
    if args.answer is not None:
        answer = normalize_guess(args.answer)
        if answer not in answer_index():
            print(f"error: {args.answer!r} is not one of the {len(answers())} answers",
                  file=sys.stderr)
            return 2
    else:
        answer = make_instance(args.seed).answer
    for guess in solver.solve(answer):
        print(guess)
    return 0


def _solve_all(solver, as_json: bool) -> int:
    start = time.perf_counter()
    lengths = [len(solver.solve(a)) for a in answers()]
    cold = time.perf_counter() - start
    start = time.perf_counter()
    for a in answers():
        solver.solve(a)
    warm = time.perf_counter() - start
    hist = dict(sorted(collections.Counter(lengths).items()))
    result = {"answers": len(lengths), "average": sum(lengths) / len(lengths),
              "max": max(lengths), "win_rate_6": sum(n <= 6 for n in lengths) / len(lengths),
              "histogram": hist, "seconds_cold": round(cold, 3), "seconds_warm": round(warm, 4),
              "ms_per_game_cold": round(1000 * cold / len(lengths), 3),
              "ms_per_game_warm": round(1000 * warm / len(lengths), 4),
              "opening": solver.opening,
              "needs_6": [a for a, n in zip(answers(), lengths) if n >= 6]}
    if as_json:
        print(json.dumps(result))
    else:
        print(f"{result['answers']} answers, opening {solver.opening.upper()}: average "
              f"{result['average']:.4f} guesses, max {result['max']}, won within 6: "
              f"{100 * result['win_rate_6']:.2f}%")
        print("histogram: " + ", ".join(f"{k}: {v}" for k, v in hist.items()))
        print(f"time: {cold:.2f} s cold ({result['ms_per_game_cold']} ms/game, memo filling), "
              f"{warm:.3f} s warm ({result['ms_per_game_warm']} ms/game)")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    from .env import LocalWordleEnv

    env = LocalWordleEnv(WordleConfig(hard_mode=args.hard))
    obs = env.reset(args.seed)
    print(f"Wordle, seed {obs['seed']}. Type a 5-letter word and press Enter; ':hint' asks the "
          f"solver, ':quit' ends.\n")
    print(obs["text"])
    done = False
    while not done:
        line = ask_nonempty("\nguess> ")
        if line is None or line.strip() == ":quit":
            break
        if line.strip() == ":hint":
            from .solver import default_solver

            history = list(zip(obs["guesses"], obs["marks"]))
            print(f"the solver would guess {default_solver().next_guess(history, args.hard).upper()}")
            continue
        obs, reward, done, info = env.submit(line)
        print(f"\n{obs['text']}\nreward {reward:+.2f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.wordle", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("feedback", help="the marks of a guess against an answer")
    p.add_argument("--answer", required=True)
    p.add_argument("--guess", required=True)
    p.add_argument("--json", action="store_true", help='print {"marks": [...]}')
    p.set_defaults(func=cmd_feedback)
    p = sub.add_parser("solve", help="the solver's guesses, one per line, ending with the answer")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--answer")
    g.add_argument("--seed", type=seed_argument)
    g.add_argument("--all", action="store_true", help="solve every answer and print statistics")
    p.add_argument("--json", action="store_true", help="with --all: statistics as JSON")
    p.set_defaults(func=cmd_solve)
    p = sub.add_parser("play", help="play in the terminal (guesses from stdin)")
    p.add_argument("--seed", type=seed_argument, default=None)
    p.add_argument("--hard", action="store_true", help="hard mode")
    p.set_defaults(func=cmd_play)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
