"""Password Game environment benchmark: in-process rule checks, HTTP submits, batch checks.

    python bench/env_bench.py                 # full run (about a minute on 2 cores)
    python bench/env_bench.py --quick         # smoke run (a few seconds; used by the tests)
    python bench/env_bench.py --json out.json

Measures, in one run:
1. in-process: ``check_rules(parse(pw), inst)`` for all 26 rules on a realistic mix (the solver's
   passwords and random mutations of them), in µs per password; plus each rule alone;
2. HTTP: submits per second against a real uvicorn server (a subprocess on 127.0.0.1) with N
   concurrent clients (threads, each with its own ``PasswordGameEnv``/``httpx.Client``), bounded
   by a request count and a time limit, counting errors;
3. HTTP: ``/check/batch`` checks per second with batches of 256.

Targets: 26 rules < 50 µs per password in-process; 64 concurrent clients with zero errors.
All traffic goes to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.password_game import make_instance, solve  # noqa: E402
from tasks.password_game.client import (PasswordGameEnv, find_free_port, start_server,  # noqa: E402
                                        stop_server)
from tasks.password_game.richtext import parse  # noqa: E402
from tasks.password_game.rules import NUM_RULES, RULES, check_rules  # noqa: E402

TARGET_US = 50.0
EDIT_CHARS = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !?.#/*"
              "IVXLCDM") + "🥚🐔🐛🔥🌕🏋️‍♂️"


def mutate(password: str, rng: random.Random) -> str:
    chars = list(password)
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.35 and chars:
            del chars[rng.randrange(len(chars))]
        elif op < 0.7:
            chars.insert(rng.randint(0, len(chars)), rng.choice(EDIT_CHARS))
        elif chars:
            chars[rng.randrange(len(chars))] = rng.choice(EDIT_CHARS)
    return "".join(chars)


def build_mix(n_seeds: int, n_mutations: int, rng: random.Random) -> list[tuple[int, str]]:
    """(seed, password) pairs: both solver passwords per seed, and mutations of them."""
    mix = []
    for seed in range(n_seeds):
        inst = make_instance(seed)
        good = [solve(inst, hatched=True), solve(inst, hatched=False)]
        mix += [(seed, pw) for pw in good]
        mix += [(seed, mutate(rng.choice(good), rng)) for _ in range(n_mutations)]
    rng.shuffle(mix)
    return mix


# ============================================================================ 1. in-process
def bench_in_process(mix: list[tuple[int, str]], passes: int) -> dict:
    items = [(make_instance(seed), pw) for seed, pw in mix]
    for inst, pw in items:  # warm up
        check_rules(parse(pw), inst)
    times, cpu_times = [], []
    for _ in range(passes):
        c0, t0 = time.process_time(), time.perf_counter()
        for inst, pw in items:
            check_rules(parse(pw), inst)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    per_pw = [t / len(items) * 1e6 for t in times]
    cpu_per_pw = sum(cpu_times) / len(items) / passes * 1e6
    # Each rule alone (and parse alone), on pre-parsed passwords: where the time goes.
    parsed = [(inst, parse(pw)) for inst, pw in items]
    t0 = time.perf_counter()
    for _, pw in items:
        parse(pw)
    parse_us = (time.perf_counter() - t0) / len(items) * 1e6
    rule_us = []
    for rule in RULES:
        check = rule.check
        t0 = time.perf_counter()
        for inst, pw in parsed:
            check(pw, inst, True)
        rule_us.append((time.perf_counter() - t0) / len(items) * 1e6)
    mean_len = statistics.mean(len(pw) for _, pw in items)
    return {"passwords": len(items), "passes": passes, "mean_chars": round(mean_len, 1),
            "us_per_password": round(statistics.median(per_pw), 2),
            "us_per_password_best": round(min(per_pw), 2),
            "cpu_us_per_password": round(cpu_per_pw, 2),
            "checks_per_s": round(1e6 / statistics.median(per_pw)),
            "parse_us": round(parse_us, 2), "rule_us": [round(x, 2) for x in rule_us]}


# ============================================================================ 2. HTTP submits
def bench_http_submits(base: str, mix: list[tuple[int, str]], n_clients: int,
                       max_requests: int, time_limit: float) -> dict:
    per_client = max(1, max_requests // n_clients)
    by_seed: dict[int, list[str]] = {}
    for seed, pw in mix:
        by_seed.setdefault(seed, []).append(pw)
    seeds = sorted(by_seed)
    barrier = threading.Barrier(n_clients + 1)
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []
    counts = {"submits": 0, "resets": 0}
    deadline = [0.0]
    go = threading.Event()
    ends: list[float] = []

    def client(i: int) -> None:
        rng = random.Random(i)
        seed = seeds[i % len(seeds)]
        passwords = by_seed[seed]
        mine: list[float] = []
        submits = resets = 0
        env = None
        try:
            env = PasswordGameEnv(base, max_steps=1000, timeout=30)
            env.reset(seed)
        except Exception as e:  # noqa: BLE001 - counted
            with lock:
                errors.append(f"setup: {e!r}")
        barrier.wait()
        go.wait()
        if env is None:
            return
        try:
            while submits < per_client and time.perf_counter() < deadline[0]:
                t0 = time.perf_counter()
                try:
                    _, _, done, _ = env.submit(rng.choice(passwords))
                except Exception as e:  # noqa: BLE001 - counted
                    with lock:
                        errors.append(repr(e))
                    continue
                mine.append(time.perf_counter() - t0)
                submits += 1
                if done:  # a mutation that still wins: start over
                    env.reset(seed)
                    resets += 1
        finally:
            end = time.perf_counter()
            env.close()
            with lock:
                ends.append(end)
                latencies.extend(mine)
                counts["submits"] += submits
                counts["resets"] += resets

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n_clients)]
    for t in threads:
        t.start()
    barrier.wait()  # every client has its session: start the clock
    t0 = time.perf_counter()
    deadline[0] = t0 + time_limit
    go.set()
    for t in threads:
        t.join(time_limit + 60)
    elapsed = (max(ends) if ends else time.perf_counter()) - t0
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e3, 2) \
            if latencies else float("nan")

    return {"clients": n_clients, "submits": counts["submits"], "resets": counts["resets"],
            "seconds": round(elapsed, 2), "submits_per_s": round(counts["submits"] / elapsed, 1),
            "p50_ms": pct(0.5), "p99_ms": pct(0.99), "errors": len(errors),
            "error_samples": errors[:3]}


# ============================================================================ 3. HTTP batch
def bench_http_batch(base: str, mix: list[tuple[int, str]], batch: int, requests: int,
                     time_limit: float) -> dict:
    rng = random.Random(1)
    with PasswordGameEnv(base, timeout=60) as env:
        sample = [rng.choice(mix) for _ in range(batch)]
        env.check_batch([pw for _, pw in sample], seeds=[s for s, _ in sample])  # warm-up
        done = 0
        t0 = time.perf_counter()
        while done < requests and time.perf_counter() - t0 < time_limit:
            sample = [rng.choice(mix) for _ in range(batch)]
            results = env.check_batch([pw for _, pw in sample], seeds=[s for s, _ in sample],
                                      batch_size=batch)
            assert len(results) == batch and len(results[0]["satisfied"]) == NUM_RULES
            done += 1
        elapsed = time.perf_counter() - t0
    return {"batch": batch, "requests": done, "seconds": round(elapsed, 2),
            "checks_per_s": round(done * batch / elapsed),
            "ms_per_request": round(elapsed / done * 1e3, 2)}


# ============================================================================ report
def machine() -> dict:
    info = {"nproc": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "cpu": platform.processor() or "unknown"}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        info["nproc"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    return info


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def table(result: dict) -> str:
    ip = result["in_process"]
    rows = [("measurement", "result", "target", "verdict"),
            ("in-process: parse + 26 rules, per password",
             f"{ip['us_per_password']:.1f} µs median pass (best {ip['us_per_password_best']:.1f}, "
             f"mean CPU time {ip['cpu_us_per_password']:.1f}); {ip['checks_per_s']:,} passwords/s",
             f"< {TARGET_US:.0f} µs", "PASS" if ip["us_per_password"] < TARGET_US else "FAIL")]
    for h in result["http_submits"]:
        target = "0 errors" if h["clients"] == 64 else ""
        verdict = ("PASS" if h["errors"] == 0 else "FAIL") if h["clients"] == 64 else ""
        rows.append((f"HTTP submit, {h['clients']} concurrent client(s)",
                     f"{h['submits_per_s']:,.0f} submits/s; p50 {h['p50_ms']} ms, p99 "
                     f"{h['p99_ms']} ms; {h['submits']} submits, {h['errors']} errors",
                     target, verdict))
    b = result["http_batch"]
    rows.append((f"HTTP /check/batch, {b['batch']} passwords/request",
                 f"{b['checks_per_s']:,} checks/s; {b['ms_per_request']} ms/request "
                 f"({b['requests']} requests)", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def rule_table(ip: dict, top: int = 8) -> str:
    ranked = sorted(enumerate(ip["rule_us"]), key=lambda x: -x[1])[:top]
    lines = [f"each rule alone (µs per password, pre-parsed; parse alone {ip['parse_us']} µs):"]
    for rid, us in ranked:
        lines.append(f"  rule id {rid:2d}: {us:6.2f} µs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--clients", default="1,8,64", help="concurrent HTTP clients to try")
    args = parser.parse_args(argv)
    if args.quick:
        n_seeds, n_mut, passes = 4, 30, 2
        max_requests, time_limit, batch_requests = 300, 2.0, 4
    else:
        n_seeds, n_mut, passes = 32, 60, 15
        max_requests, time_limit, batch_requests = 6000, 15.0, 40
    clients = [int(x) for x in args.clients.split(",")]

    rng = random.Random(0)
    mix = build_mix(n_seeds, n_mut, rng)
    result: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "quick": args.quick, "command": " ".join(["python", *sys.argv]),
                    "machine": machine(), "loadavg_before": _loadavg()}
    result["in_process"] = bench_in_process(mix, passes)
    port = find_free_port()
    proc = start_server("127.0.0.1", port, log_level="warning", timeout=60)
    base = f"http://127.0.0.1:{port}"
    try:
        with PasswordGameEnv(base) as env:  # build the server's instances before timing
            env.check_batch(["x"] * n_seeds, seeds=list(range(n_seeds)))
        result["http_submits"] = [bench_http_submits(base, mix, n, max_requests, time_limit)
                                  for n in clients]
        result["http_batch"] = bench_http_batch(base, mix, 256, batch_requests, time_limit)
    finally:
        stop_server(proc)
    result["loadavg_after"] = _loadavg()
    m = result["machine"]
    print(f"Password Game environment benchmark, {result['date']}; {m['nproc']} CPUs "
          f"({m['cpu']}), Python {m['python']}{' [--quick]' if args.quick else ''}; load "
          f"average {result['loadavg_before']} before, {result['loadavg_after']} after")
    print(f"mix: {result['in_process']['passwords']} passwords over {n_seeds} seeds, "
          f"{result['in_process']['mean_chars']} characters on average\n")
    print(table(result))
    print()
    print(rule_table(result["in_process"]))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    # Timings depend on the machine's load; only errors fail the run.
    return 0 if all(h["errors"] == 0 for h in result["http_submits"]) else 1


if __name__ == "__main__":
    sys.exit(main())
