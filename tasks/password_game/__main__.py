"""Command line: check a password, print a solution, play in the terminal, or run a demo episode.

Rules are numbered 1..26 here, as in the game's text and on neal.fun (the API's ``id`` is 0-based).

    python -m tasks.password_game check --seed 7 --password 'Hello1!' --json
    python -m tasks.password_game solve --seed 7
    python -m tasks.password_game play --seed 7
    python -m tasks.password_game demo --seed 7        # scripted episode against the HTTP server
"""

from __future__ import annotations

import argparse
import json
import sys

from ..common.protocol import seed_argument
from ..common.terminal import ask_nonempty
from .game import GameConfig, check_password
from .instance import make_instance
from .rules import NUM_RULES
from .solver import solve


def print_json(payload: object) -> None:
    """JSON on stdout, as is where stdout's encoding holds every character, else with ``\\u``
    escapes (the same JSON), rather than a ``UnicodeEncodeError`` on a stdout that is not UTF-8."""
    text = json.dumps(payload, ensure_ascii=False)
    try:
        text.encode(sys.stdout.encoding or "utf-8")
    except UnicodeEncodeError:
        text = json.dumps(payload, ensure_ascii=True)
    print(text)


def cmd_check(args: argparse.Namespace) -> int:
    result = check_password(args.password, args.seed, args.revealed)
    if args.json:
        print_json({"rules": result["rules"]})
    else:
        for r in result["rules"]:
            print(f"{'PASS' if r['satisfied'] else 'FAIL'}  rule {r['id'] + 1:2d}: {r['text']}")
        print(f"{result['rules_satisfied']}/{len(result['rules'])} rules satisfied, "
              f"length {result['length']}")
    return 0


def cmd_solve(args: argparse.Namespace) -> int:
    print(solve(make_instance(args.seed), hatched=not args.egg))
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    from .env import LocalPasswordGameEnv

    env = LocalPasswordGameEnv(GameConfig(max_steps=args.max_steps))
    obs = env.reset(args.seed)
    print(f"Password Game, seed {obs['seed']}. Type a password and press Enter. "
          f"':feedback PASSWORD' checks without using a turn, ':solution' shows one, ':quit' ends.\n")
    print(obs["text"])
    done = False
    while not done:
        line = ask_nonempty("\npassword> ")
        if line is None or line.strip() == ":quit":
            break
        if line.startswith(":feedback "):
            fb = env.get_feedback(line[len(":feedback "):])
            for r in fb["rules"]:
                print(f"{'PASS' if r['satisfied'] else 'FAIL'} rule {r['id'] + 1}")
            continue
        if line.strip() == ":solution":
            print(solve(env.game.instance, hatched=env.game.hatched))
            continue
        obs, reward, done, info = env.submit(line)
        print(f"\n{obs['text']}\nreward {reward:.2f}, rules satisfied {info['rules_satisfied']}"
              f"/{info['num_revealed']}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """A scripted episode against the real HTTP server, started here as a subprocess."""
    from .client import PasswordGameEnv, PortInUseError, start_server, stop_server

    try:
        proc = start_server(args.host, args.port)
    except PortInUseError as e:
        # Without this check the demo played against whatever server held the port.
        print(f"demo: port {e.port} on {e.host} is already in use by another server; the demo "
              f"starts its own, so stop that one or pass a free --port", file=sys.stderr)
        return 2
    try:
        with PasswordGameEnv(f"http://{args.host}:{args.port}") as env:
            obs = env.reset(seed=args.seed)
            inst = make_instance(obs["seed"])
            print(f"Demo episode, seed {obs['seed']}, server http://{args.host}:{args.port}\n")
            # A player who learns the rules as they appear: a few naive passwords, then the
            # solver's (Paul as an egg until the game hatches him).
            naive = ["hello", "Hello1!", "Hello1!996"]
            done, turn = False, 0
            while not done:
                password = naive[turn] if turn < len(naive) else solve(inst, hatched=obs["hatched"])
                obs, reward, done, info = env.submit(password)
                turn += 1
                broken = [r["id"] + 1 for r in info["rules"] if not r["satisfied"]]
                print(f"turn {turn}: {password}\n  revealed {info['num_revealed']}/{NUM_RULES}, "
                      f"satisfied {info['rules_satisfied']}, reward {reward:.2f}, "
                      f"broken rules {broken}{' (fire!)' if info['on_fire'] else ''}")
            print(f"\n{'WON' if info['success'] else 'not won'} in {info['turn']} turns")
            return 0 if info["success"] else 1
    finally:
        stop_server(proc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.password_game", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="check a password against all rules of a seed")
    p.add_argument("--seed", type=seed_argument, required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--revealed", type=int, default=NUM_RULES, choices=range(NUM_RULES + 1),
                   metavar=f"0..{NUM_RULES}", help="check only the first N rules")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("solve", help="print a password that satisfies all 26 rules")
    p.add_argument("--seed", type=seed_argument, required=True)
    p.add_argument("--egg", action="store_true",
                   help="Paul as an unhatched egg (the password to submit before rule 23 appears)")
    p.set_defaults(func=cmd_solve)
    p = sub.add_parser("play", help="play in the terminal")
    p.add_argument("--seed", type=seed_argument, default=None)
    p.add_argument("--max-steps", type=int, default=30)
    p.set_defaults(func=cmd_play)
    p = sub.add_parser("demo", help="scripted demo episode against the HTTP server")
    p.add_argument("--seed", type=seed_argument, default=0)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(func=cmd_demo)
    args = parser.parse_args(argv)
    # Rule texts and passwords hold emoji: on a stdout that cannot encode them, print escapes
    # (\U0001f95a) instead of dying with UnicodeEncodeError. --json output never needs this.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
