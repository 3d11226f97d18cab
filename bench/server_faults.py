"""Fault injection against the game servers (issue 13, items 6-10), printing the results table of
docs/reliability.md ("## Game servers").

    python bench/server_faults.py                          # this tree's servers (about 2 minutes)
    python bench/server_faults.py --before-root /tmp/old   # also the code in /tmp/old: before/now
    python bench/server_faults.py --json faults.json

``--before-root`` is a directory holding another version's ``tasks/`` (for example
``git archive <commit> tasks | tar -x -C /tmp/old``); each case then runs against both, one after
the other, with the servers' default settings. Every server is a subprocess started here on
127.0.0.1; every case is bounded in requests and seconds and stops by itself; nothing else is
contacted. What each case does:

* 6 flood: a player takes a turn every 5 s (4 turns) while two threads create Password Game
  sessions as fast as they can, all from 127.0.0.1 without a token; then a second trainer (its
  own ``X-Client-Token``) starts a session. The server is scaled down by 4 from the defaults,
  ``--max-sessions 256`` and (where the version has it) ``--max-sessions-per-client 64``, so that
  the flood fills it within one think time on a slow machine too (52 sessions/s; at the default
  1024 it would need 205/s, which a loaded 2-vCPU host does not always reach);
* 7 slow clients: 16 sockets announce a 5 MiB body and send all but 1 KiB of it, 16 send half a
  request head, 200 connect and send nothing; we watch for 40 s when the server closes them and
  its resident memory (VmRSS);
* 8 stall: 45 concurrent submits to one OpenSpiel MCTS session (Othello, 400 simulations, about
  0.8 s per search here; illegal answers played at random, so that every submit searches until
  the game ends) while ``/health`` is polled; and one session created at the largest MCTS budget
  the server accepts;
* 9 delete: a submit in flight (an MCTS reply), a second submit 0.1 s later, DELETE at 0.2 s;
* 10 text: verdicts of look-alike passwords through ``/check``, a CESU-8 body, and
  ``python -m tasks.password_game check --json`` with an ASCII stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
sys.path.insert(0, str(REPO))

from procmem import status_bytes  # noqa: E402  (bench/, the script's folder)
from tasks.common.client import find_free_port, stop_server, wait_for_server  # noqa: E402
from tasks.password_game import make_instance  # noqa: E402  (the same in every version)


# ============================================================================ servers
def start(root: Path, module: str, *args: str) -> tuple[subprocess.Popen, str]:
    """``python -m <module>`` from ``root`` on a free loopback port; (process, base URL)."""
    port = find_free_port()
    env = {**os.environ, "PYTHONPATH": str(root)}
    log = tempfile.NamedTemporaryFile(prefix="faults_", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", module, "--host", HOST, "--port", str(port),
                             "--log-level", "warning", *args], cwd=root, env=env,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    proc.log_path = log.name  # type: ignore[attr-defined]  (stop_server removes it)
    base = f"http://{HOST}:{port}"
    wait_for_server(base, 60, proc=proc)
    return proc, base


def rss_mb(pid: int) -> float:
    rss = status_bytes("VmRSS", pid)
    return float("nan") if rss is None else rss / 2**20


def closed(sock: socket.socket) -> bool:
    """Has the server closed this connection (reading whatever it sent first)?"""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


# ============================================================================ 6: session flood
def supports(root: Path, module: str, flag: str) -> bool:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-m", module, "--help"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=60).stdout
    return flag in out


def case_flood(root: Path) -> dict[str, Any]:
    module = "tasks.password_game.server"
    quota = (["--max-sessions-per-client", "64"]
             if supports(root, module, "--max-sessions-per-client") else [])
    proc, base = start(root, module, "--max-sessions", "256", *quota)
    stop = threading.Event()
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def flood() -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            while not stop.is_set():
                code = str(http.post("/sessions", json={"max_steps": 5}).status_code)
                with lock:
                    counts[code] = counts.get(code, 0) + 1

    try:
        with httpx.Client(base_url=base, timeout=30) as player:
            sid = player.post("/sessions", json={"seed": 3}).json()["session_id"]
            threads = [threading.Thread(target=flood) for _ in range(2)]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            turns = []
            for turn in range(4):
                time.sleep(5)  # the player thinks for 5 s per turn
                r = player.post(f"/sessions/{sid}/submit", json={"password": f"Hello{turn}!"})
                turns.append(r.status_code)
                if r.status_code != 200:
                    turns.append(r.json().get("detail", "")[:120])
                    break
            stop.set()
            for t in threads:
                t.join(30)
            elapsed = time.monotonic() - t0
            health = player.get("/health").json()
            fresh = player.post("/sessions", json={"seed": 3},
                                headers={"X-Client-Token": "another-trainer"}).status_code
        created = counts.get("200", 0)
        return {"player_turns": turns, "flood_requests": counts, "flood_seconds": round(elapsed, 1),
                "flood_created_per_s": round(created / elapsed, 1),
                "sessions_after": health["sessions"], "token_client_new_session": fresh}
    finally:
        stop.set()
        stop_server(proc)


# ============================================================================ 7: slow clients
def case_slow_clients(root: Path, watch: float = 40.0) -> dict[str, Any]:
    proc, base = start(root, "tasks.password_game.server")
    port = int(base.rsplit(":", 1)[1])
    groups: dict[str, list[socket.socket]] = {"body": [], "head": [], "idle": []}
    try:
        httpx.get(base + "/health")
        rss = {"start": rss_mb(proc.pid)}
        body_size = 5 * 1024 * 1024
        for _ in range(16):
            s = socket.create_connection((HOST, port))
            s.sendall(b"POST /check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % body_size)
            s.sendall(b" " * (body_size - 1024))
            groups["body"].append(s)
        for _ in range(16):
            s = socket.create_connection((HOST, port))
            s.sendall(b"POST /check HTTP/1.1\r\nHost: x\r\n")
            groups["head"].append(s)
        for _ in range(200):
            groups["idle"].append(socket.create_connection((HOST, port)))
        t0 = time.monotonic()
        time.sleep(1)
        rss["held"] = rss_mb(proc.pid)
        t1 = time.monotonic()
        try:
            r = httpx.get(base + "/health", timeout=10)
            probe = f"{r.status_code} in {time.monotonic() - t1:.2f} s"
        except httpx.HTTPError as e:
            probe = f"{type(e).__name__} after {time.monotonic() - t1:.2f} s"
        closed_at: dict[str, list[float]] = {name: [] for name in groups}
        open_ = {name: list(socks) for name, socks in groups.items()}
        while time.monotonic() - t0 < watch and any(open_.values()):
            for name, socks in open_.items():
                for s in list(socks):
                    if closed(s):
                        socks.remove(s)
                        closed_at[name].append(round(time.monotonic() - t0, 1))
            time.sleep(0.2)
        rss["watched"] = rss_mb(proc.pid)
        for socks in groups.values():
            for s in socks:
                s.close()
        time.sleep(2)
        rss["after_close"] = rss_mb(proc.pid)
        health = httpx.get(base + "/health", timeout=10).status_code
        return {
            "watch_s": watch, "health_probe_while_held": probe, "health_after": health,
            "rss_mb": {k: round(v, 1) for k, v in rss.items()},
            **{f"{name}_closed": f"{len(closed_at[name])}/{len(groups[name])}"
               + (f" at {min(closed_at[name])}-{max(closed_at[name])} s" if closed_at[name]
                  else "") for name in groups},
        }
    finally:
        for socks in groups.values():
            for s in socks:
                s.close()
        stop_server(proc)


# ============================================================================ 8: one client stalls the server
def case_stall(root: Path) -> dict[str, Any]:
    proc, base = start(root, "tasks.openspiel.server")
    try:
        out: dict[str, Any] = {}
        with httpx.Client(base_url=base, timeout=120) as http:
            r = http.post("/sessions", json={"game": "othello", "opponent": "mcts", "seed": 1,
                                             "mcts_simulations": 400,
                                             "illegal_move_policy": "random"})
            sid = r.json()["session_id"]
        codes: list[int] = []
        lat: list[float] = []
        lock = threading.Lock()

        def submit() -> None:
            with httpx.Client(base_url=base, timeout=120) as http:
                t = time.monotonic()
                code = http.post(f"/sessions/{sid}/submit", json={"move": "?"}).status_code
                with lock:
                    codes.append(code)
                    lat.append(time.monotonic() - t)

        threads = [threading.Thread(target=submit) for _ in range(45)]
        health: list[float] = []
        t0 = time.monotonic()
        for t in threads:
            t.start()
        with httpx.Client(base_url=base, timeout=120) as http:
            while any(t.is_alive() for t in threads) and time.monotonic() - t0 < 120:
                t1 = time.monotonic()
                http.get("/health")
                health.append(time.monotonic() - t1)
                time.sleep(0.05)
        for t in threads:
            t.join(120)
        out["submits"] = {str(c): codes.count(c) for c in sorted(set(codes))}
        out["burst_s"] = round(time.monotonic() - t0, 2)
        out["slowest_submit_s"] = round(max(lat), 2)
        out["health_max_s"] = round(max(health), 3)
        out["health_probes"] = len(health)

        limits = httpx.get(base + "/health").json()["limits"]
        sims = limits.get("max_mcts_simulations", 5000)
        playouts = limits.get("max_mcts_playouts", sims * 100)
        biggest = {"mcts_simulations": sims, "mcts_rollouts": max(1, min(100, playouts // sims))}
        # Othello costs ~10x a tic-tac-toe playout: at an old maximum (500,000 playouts) it would
        # search for minutes, so it is only timed where the budget has a ceiling.
        games = ("tic_tac_toe", "othello") if sims * biggest["mcts_rollouts"] <= 10_000 \
            else ("tic_tac_toe",)
        for game in games:
            body = {"game": game, "opponent": "mcts", "model_seat": 1, "seed": 1, **biggest}
            t1 = time.monotonic()
            try:
                code = httpx.post(base + "/sessions", json=body, timeout=60).status_code
                took = f"{code} in {time.monotonic() - t1:.1f} s"
            except httpx.TimeoutException:
                took = "no answer in 60 s (client gave up)"
            out[f"max_budget_{game}"] = (f"{biggest['mcts_simulations']}x"
                                         f"{biggest['mcts_rollouts']}: {took}")
        if "max_mcts_playouts" in limits:  # what the old maximum budget gets from this server
            r = httpx.post(base + "/sessions", json={"opponent": "mcts", "model_seat": 1,
                                                     "mcts_simulations": 5000,
                                                     "mcts_rollouts": 100}, timeout=60)
            out["old_max_budget_5000x100"] = r.status_code
        return out
    finally:
        stop_server(proc)


# ============================================================================ 9: DELETE vs turns in flight
def case_delete(root: Path) -> dict[str, Any]:
    proc, base = start(root, "tasks.openspiel.server")
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            sid = http.post("/sessions", json={
                "game": "connect_four", "opponent": "mcts", "seed": 1, "mcts_simulations": 1000,
                "illegal_move_policy": "random"}).json()["session_id"]
        events: list[tuple[float, str]] = []
        t0 = time.monotonic()

        def call(name: str, method: str, path: str, body: Any = None) -> None:
            with httpx.Client(base_url=base, timeout=60) as http:
                r = http.request(method, path, json=body)
                events.append((round(time.monotonic() - t0, 2), f"{name} {r.status_code}"))

        threads = []
        for delay, args in ((0.0, ("submit A", "POST", f"/sessions/{sid}/submit", {"move": "?"})),
                            (0.1, ("submit B", "POST", f"/sessions/{sid}/submit", {"move": "?"})),
                            (0.2, ("DELETE", "DELETE", f"/sessions/{sid}"))):
            time.sleep(max(0.0, t0 + delay - time.monotonic()))
            threads.append(threading.Thread(target=call, args=args))
            threads[-1].start()
        for t in threads:
            t.join(60)
        after = httpx.post(f"{base}/sessions/{sid}/submit", json={"move": "?"}).status_code
        return {"order": [f"{e} at {t} s" for t, e in sorted(events)], "submit_after": after}
    finally:
        stop_server(proc)


# ============================================================================ 10: text
def case_text(root: Path) -> dict[str, Any]:
    proc, base = start(root, "tasks.password_game.server")
    seed_k = next(s for s in range(10_000) if "k" in make_instance(s).banned)
    pairs = [  # (what, rule id, seed, text a person reads one way, a look-alike)
        ("café NFC vs NFD, rule 19 (id 18)", 18, 3, "c**a**f\u00e9", "c**a**fe\u0301"),
        ("ķ NFC vs NFD, rule 25 (id 24)", 24, seed_k, "\u0137", "k\u0327"),
        ("Kelvin sign vs K, rule 3 (id 2)", 2, 3, "K", "\u212a"),
        ("Kelvin sign vs K, rule 4 (id 3)", 3, 3, "aK", "a\u212a"),
        ("ZWJ inside 'may', rule 6 (id 5)", 5, 3, "may", "ma\u200dy"),
        ("soft hyphen, rule 4 (id 3)", 3, 3, "abcd1", "ab\u00adcd1"),
        ("left-to-right mark inside 'shell', rule 8 (id 7)", 7, 3, "shell", "sh\u200eell"),
    ]
    try:
        out: dict[str, Any] = {}
        with httpx.Client(base_url=base, timeout=30) as http:
            for what, rule, seed, a, b in pairs:
                va, vb = (http.post("/check", json={"seed": seed, "password": p})
                          .json()["rules"][rule]["satisfied"] for p in (a, b))
                out[what] = f"{va} / {vb}" + (" (differ)" if va != vb else "")
            r = http.post("/check", content=b'{"seed": 3, "password": "\xed\xa0\x80"}',
                          headers={"content-type": "application/json"})
            out["CESU-8 surrogate in the body"] = r.status_code
        env = {**os.environ, "PYTHONPATH": str(root), "PYTHONIOENCODING": "ascii"}
        cli = subprocess.run([sys.executable, "-m", "tasks.password_game", "check", "--seed", "7",
                              "--password", "Hello1!", "--json"], cwd=root, env=env,
                             capture_output=True, timeout=60)
        err = cli.stderr.decode(errors="replace").strip().splitlines()
        out["check --json, ASCII stdout"] = (f"exit {cli.returncode}"
                                             + (f": {err[-1][:60]}" if cli.returncode else ""))
        return out
    finally:
        stop_server(proc)


CASES: dict[str, tuple[str, Callable[[Path], dict[str, Any]]]] = {
    "6": ("session flood evicts an active game", case_flood),
    "7": ("slow clients hold sockets and memory", case_slow_clients),
    "8": ("one client stalls the server", case_stall),
    "9": ("DELETE and turns in flight", case_delete),
    "10": ("text edge cases", case_text),
}


# ============================================================================ report
def machine() -> dict[str, Any]:
    return {"date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            "nproc": os.cpu_count(), "loadavg_start": os.getloadavg(),
            "python": platform.python_version(), "platform": platform.platform(),
            "cpu": next((line.split(":", 1)[1].strip() for line in
                         Path("/proc/cpuinfo").read_text().splitlines()
                         if line.startswith("model name")), platform.processor())}


def cell(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {cell(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-root", type=Path, help="another version's tree (holds tasks/)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, e.g. 6,9")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    args = parser.parse_args(argv)
    roots = {"now": REPO}
    if args.before_root:
        roots = {"before": args.before_root.resolve(), **roots}
    report: dict[str, Any] = {"machine": machine(), "roots": {k: str(v) for k, v in roots.items()},
                              "cases": {}}
    for key in args.cases.split(","):
        title, run = CASES[key]
        report["cases"][key] = {"title": title}
        for label, root in roots.items():
            print(f"[{key}] {title}: {label} ({root}) ...", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            report["cases"][key][label] = run(root)
            print(f"    {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    report["machine"]["loadavg_end"] = os.getloadavg()
    labels = list(roots)
    print(f"| item | case | {' | '.join(labels)} |")
    print(f"|---|---|{'---|' * len(labels)}")
    for key, res in report["cases"].items():
        row = [cell(res[label]).replace("|", "/") for label in labels]
        print(f"| {key} | {res['title']} | {' | '.join(row)} |")
    print(f"\nmachine: {cell(report['machine'])}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
