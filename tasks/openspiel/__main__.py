"""Command line: list the games, play one in the terminal, or measure a bot against another.

    python -m tasks.openspiel games [--json]
    python -m tasks.openspiel play --game tic_tac_toe [--opponent mcts] [--seed S] [--seat 1]
    python -m tasks.openspiel match --game tic_tac_toe --agent mcts --opponent random -n 20
"""

from __future__ import annotations

import argparse
import json
import sys

from ..common.protocol import seed_argument
from ..common.terminal import ask_nonempty
from .games import GAMES, list_games


def _seat(text: str) -> object:
    if text == "random":
        return text
    if text in ("0", "1"):
        return int(text)
    raise argparse.ArgumentTypeError("seat must be 0, 1 or random")


def cmd_games(args: argparse.Namespace) -> int:
    games = list_games()
    if args.json:
        print(json.dumps(games, indent=2))
        return 0
    for g in games:
        params = ", ".join(f"{k}={v}" for k, v in g["params"].items())
        print(f"{g['name']:<14} {g['difficulty']:<7} {g['title']}"
              f"{'  (' + params + ')' if params else ''}")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    from .env import LocalOpenSpielEnv

    env = LocalOpenSpielEnv(args.game, opponent=args.opponent, model_seat=args.seat,
                            mcts_simulations=args.simulations,
                            illegal_move_policy=args.policy)
    obs = env.reset(args.seed)
    print(f"{args.game}, seed {obs['seed']}. Type a move and press Enter; ':quit' ends.\n")
    print(obs["text"])
    done = False
    while not done:
        line = ask_nonempty("\nmove> ")
        if line is None:
            print()
            break
        if line.strip() == ":quit":
            break
        obs, reward, done, info = env.submit(line)
        print()
        print(obs["text"])
        if done:
            print(f"reward {reward:+.3g}")
    return 0


def cmd_match(args: argparse.Namespace) -> int:
    import time

    from .match import play_match

    t0 = time.perf_counter()
    result = play_match(args.game, args.agent, args.opponent, args.n, args.seed,
                        mcts_simulations=args.simulations)
    result["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.openspiel", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("games", help="list the supported games")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_games)
    p = sub.add_parser("play", help="play a game in the terminal (moves from stdin)")
    p.add_argument("--game", choices=list(GAMES), default="tic_tac_toe")
    p.add_argument("--opponent", choices=["random", "mcts"], default="random")
    p.add_argument("--simulations", type=int, default=200, help="MCTS simulations per move")
    p.add_argument("--seat", type=_seat, default=0, help="0, 1 or random")
    p.add_argument("--seed", type=seed_argument, default=None)
    p.add_argument("--policy", choices=["retry", "random", "loss"], default="retry",
                   help="what an illegal move does")
    p.set_defaults(func=cmd_play)
    p = sub.add_parser("match", help="bot against bot through the text interface")
    p.add_argument("--game", choices=list(GAMES), default="tic_tac_toe")
    p.add_argument("--agent", choices=["random", "mcts"], default="mcts")
    p.add_argument("--opponent", choices=["random", "mcts"], default="random")
    p.add_argument("-n", type=int, default=20)
    p.add_argument("--seed", type=seed_argument, default=0)
    p.add_argument("--simulations", type=int, default=200)
    p.set_defaults(func=cmd_match)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
