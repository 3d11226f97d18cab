"""What reading passwords as a person sees them costs (tasks/password_game/text.py).

    python bench/text_overhead.py

In one process, on bench/env_bench.py's mix of passwords (the solver's and random 1-3 character
mutations of them, emoji and joiners included), times ``parse`` with and without
``text.visible`` (swapped for the identity), and ``parse`` + all 26 rules with it, alternating
the variants; prints the best pass of each in µs per password. In-process only, no network.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from env_bench import build_mix  # noqa: E402
from tasks.password_game import make_instance, richtext  # noqa: E402
from tasks.password_game.rules import check_rules  # noqa: E402


def best_us(fn, items, passes: int = 9) -> float:
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, (time.perf_counter() - t0) / len(items) * 1e6)
    return best


def main() -> None:
    mix = build_mix(32, 30, random.Random(0))
    passwords = [pw for _, pw in mix]
    instances = {seed: make_instance(seed) for seed, _ in mix}
    real = richtext.visible
    results: dict[str, list[float]] = {"parse": [], "parse, no normalisation": [],
                                       "parse + 26 rules": []}
    for _ in range(3):
        richtext.visible = real
        results["parse"].append(best_us(richtext.parse, passwords))
        results["parse + 26 rules"].append(
            best_us(lambda sp: check_rules(richtext.parse(sp[1]), instances[sp[0]]), mix, 5))
        richtext.visible = lambda text: text
        results["parse, no normalisation"].append(best_us(richtext.parse, passwords))
    richtext.visible = real
    non_ascii = sum(not pw.isascii() for pw in passwords)
    print(f"{len(passwords)} passwords ({non_ascii} not ASCII), best pass of 3 x 9:")
    for name, values in results.items():
        print(f"  {name:26s} {min(values):6.2f} µs/password")
    print(f"  normalisation costs        {min(results['parse']) - min(results['parse, no normalisation']):6.2f} µs/password")


if __name__ == "__main__":
    main()
