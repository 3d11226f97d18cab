"""Fault injection for training runs and checkpoints (issue 13): what a run does when its
checkpoint is damaged or crafted, when it is killed mid-write, when a second process attaches,
and when the game server loses its sessions.

    python bench/train_faults.py                                  # every case, this checkout
    python bench/train_faults.py --cases lock,crafted_rng         # some of them
    python bench/train_faults.py --json bench/results/train_faults.json
    git archive 31f20fe | tar -x -C /tmp/base                     # the code before the fix...
    python bench/train_faults.py --repo /tmp/base --json before.json   # ...measured the same way

Everything goes through ``python -m gamerl`` (train, evaluate) on the tiny model with the
smallest settings, so the same script measures any checkout, before or after the fix. Faults are
injected by a small driver that patches the process before calling ``gamerl.cli.main``: SIGKILL
(no clean-up, as a dead machine) at the n-th rename of a checkpoint into place, at the n-th write
of a file into a temporary checkpoint, at the n-th warm-start step. Damage is done to the files
between runs. Every case reports what it observed (exit status, what changed in the run
directory, which epoch or step a resumed run continued at, leftovers); nothing is asserted.
Bounded: each command has a timeout; the whole run takes 15-30 minutes on 2 loaded CPU cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

# The driver: patches for the fault, then the CLI. Uses only names both old and new code have.
DRIVER = r"""
import json, os, signal, sys
spec = json.loads(sys.argv[1])
kill = spec.get("kill") or {}
def die():
    os.kill(os.getpid(), signal.SIGKILL)
if kill.get("at") == "install":  # the n-th rename of a temp dir onto NAME
    real_replace, seen = os.replace, [0]
    def replace(src, dst, *a, **k):
        if os.path.basename(str(dst)) == kill["name"] and ".tmp-" in os.path.basename(str(src)):
            seen[0] += 1
            if seen[0] == kill["n"]:
                die()
        return real_replace(src, dst, *a, **k)
    os.replace = replace
if kill.get("at") == "write":  # the n-th torch.save of FILE into a temp dir of NAME
    import torch
    real_save, seen = torch.save, [0]
    def save(obj, f, *a, **k):
        p = str(f)
        if os.path.basename(p) == kill["file"] and f"/.{kill['name']}.tmp-" in p:
            seen[0] += 1
            if seen[0] == kill["n"]:
                die()
        return real_save(obj, f, *a, **k)
    torch.save = save
if spec.get("count_steps") or kill.get("at") == "warmstart_step":
    import gamerl.core.warmstart as ws
    real_loss, n = ws.sft_loss, [0]
    def loss(*a, **k):
        n[0] += 1
        if spec.get("count_steps"):
            with open(spec["count_steps"], "w") as f:
                f.write(str(n[0]))
        if kill.get("at") == "warmstart_step" and n[0] == kill["n"]:
            die()
        return real_loss(*a, **k)
    ws.sft_loss = loss
from gamerl.cli import main
sys.exit(main(spec["argv"]))
"""

SMALL = ["--preset", "tiny", "--episodes-per-epoch", "4", "--eval-episodes", "4",
         "--wandb-mode", "disabled", "--no-progress", "--device", "cpu",
         "--set", "num_rules=4", "--set", "max_steps=2", "--set", "max_new_tokens=12",
         "--set", "minibatch_size=4", "--set", "ppo_epochs=1"]
NO_WARMSTART = ["--set", "warmstart=false"]


class Bench:
    def __init__(self, repo: Path, python: str, work: Path):
        self.repo, self.python, self.work = repo, python, work
        self.env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1", "WANDB_SILENT": "true",
                    "GAMERL_TINY_DIR": str(work / "tiny")}
        self.has_ws_checkpoints = "warmstart_checkpoint_seconds" in (
            repo / "gamerl" / "config.py").read_text()
        subprocess.run([python, "-c", "import sys; from gamerl.models import build_tiny; "
                        "build_tiny(sys.argv[1])", str(work / "tiny")], env=self.env,
                       check=True, capture_output=True, cwd=work)

    def gamerl(self, argv, *, kill=None, count_steps=None, timeout=600, cwd=None):
        """Run ``python -m gamerl ARGV`` (through the driver); returns a result dict."""
        spec = {"argv": [str(a) for a in argv], "kill": kill,
                "count_steps": str(count_steps) if count_steps else None}
        t0 = time.time()
        try:
            p = subprocess.run([self.python, "-c", DRIVER, json.dumps(spec)], env=self.env,
                               cwd=cwd or self.work, capture_output=True, text=True,
                               timeout=timeout)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, out, err = "timeout", str(e.stdout or ""), str(e.stderr or "")
        return {"exit": code, "seconds": round(time.time() - t0, 1), "stdout": out,
                "stderr": err}

    def train(self, out, *extra, **kw):
        return self.gamerl(["train", "--out", out, *SMALL, *extra], **kw)


def snapshot(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def changed(before: dict, after: dict) -> list[str]:
    """Top-level names whose files were removed, added or rewritten."""
    names = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    return sorted({n.split("/")[0] for n in names})


def state(ckpt: Path) -> dict:
    try:
        return json.loads((ckpt / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return {}


def last_line(text: str, *needles: str) -> str:
    lines = [ln for ln in text.splitlines() if any(n in ln for n in needles)]
    return lines[-1][:300] if lines else ""


def continued_at(res: dict) -> str:
    return last_line(res["stdout"] + res["stderr"], "continuing at epoch", "starting from scratch")


def leftovers(run: Path) -> dict:
    tmps = [p for p in run.iterdir() if ".tmp-" in p.name or p.name.endswith(".old")]
    size = sum(f.stat().st_size for p in tmps for f in p.rglob("*") if f.is_file())
    return {"leftover_dirs": sorted(p.name for p in tmps), "leftover_bytes": size}


def outcome(res: dict) -> dict:
    return {"exit": res["exit"], "seconds": res["seconds"],
            "message": last_line(res["stderr"] + res["stdout"], "refus", "Error", "error:",
                                 "in use", "already holds", "resumed from", "continuing")}


# ----------------------------------------------------------------------------- the cases


def base_run(b: Bench) -> Path:
    run = b.work / "base"
    if not (run / "summary.json").exists():
        res = b.train(run, "--epochs", "3", *NO_WARMSTART)
        assert res["exit"] == 0, res["stderr"][-3000:]
    return run


def copy_base(b: Bench, name: str) -> Path:
    dst = b.work / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(base_run(b), dst)
    return dst


def resume_case(b: Bench, name: str, damage) -> dict:
    run = copy_base(b, name)
    damage(run)
    best_before = state(run / "best")
    before = snapshot(run)
    res = b.train(run, "--resume", "--epochs", "4", *NO_WARMSTART)
    return {**outcome(res), "changed": changed(before, snapshot(run)),
            "best_epoch_before": best_before.get("best_epoch"),
            "best_epoch_after": state(run / "best").get("best_epoch"),
            "continued": continued_at(res)}


def case_resume_damaged_state(b):
    return resume_case(b, "resume_damaged_state",
                       lambda run: (run / "last" / "trainer_state.json").unlink())


def case_fresh_over_partial(b):
    """Killed before its first checkpoint (logs, baseline, no checkpoint), then started again
    without --resume."""
    run = copy_base(b, "fresh_over_partial")
    for name in ("last", "best"):
        shutil.rmtree(run / name)
    (run / "summary.json").unlink()
    before = snapshot(run)
    res = b.train(run, "--epochs", "1", *NO_WARMSTART)
    return {**outcome(res), "changed": changed(before, snapshot(run))}


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _reseal(ckpt: Path) -> None:
    """Rewrite a manifest to match the files, as an attacker could (if there is one)."""
    mf = ckpt / "manifest.json"
    if mf.exists():
        m = json.loads(mf.read_text())
        m["files"] = {p.name: {"size": p.stat().st_size,
                               "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                      for p in ckpt.iterdir() if p.is_file() and p.name != "manifest.json"}
        mf.write_text(json.dumps(m))


def crafted_case(b, name, filename, reseal):
    import torch

    marker = b.work / f"{name}.pwned"
    marker.unlink(missing_ok=True)

    def damage(run):
        payload = {"python": _Payload(marker)} if filename == "rng.pt" else \
            {"state": {0: _Payload(marker)}, "param_groups": []}
        torch.save(payload, run / "last" / filename)
        if reseal:
            _reseal(run / "last")

    out = resume_case(b, name, damage)
    return {**out, "code_ran": marker.exists()}


def case_crafted_rng(b):
    return crafted_case(b, "crafted_rng", "rng.pt", reseal=False)


def case_crafted_optimizer(b):
    return crafted_case(b, "crafted_optimizer", "optimizer.pt", reseal=True)


def case_crafted_verl(b):
    """launch.sh with a verl checkpoint whose extra_state runs code when unpickled."""
    import torch

    marker = b.work / "crafted_verl.pwned"
    ck = b.work / "verl_ckpt"
    shutil.rmtree(ck, ignore_errors=True)
    actor = ck / "global_step_5" / "actor"
    actor.mkdir(parents=True)
    torch.save({"w": torch.zeros(2)}, actor / "model_world_size_1_rank_0.pt")
    torch.save({"rng": _Payload(marker)}, actor / "extra_state_world_size_1_rank_0.pt")
    (ck / "latest_checkpointed_iteration.txt").write_text("5")
    data = b.work / "verl_data"
    data.mkdir(exist_ok=True)
    for name in ("train.parquet", "val.parquet"):
        (data / name).write_bytes(b"")
    t0 = time.time()
    p = subprocess.run(["bash", str(b.repo / "gamerl/integrations/verl/launch.sh"), "grpo",
                        f"trainer.default_local_dir={ck}"], capture_output=True, text=True,
                       timeout=300, env={**b.env, "PYTHON": b.python, "DATA_DIR": str(data)})
    reached_verl = "verl" in last_line(p.stderr, "No module named")
    return {"exit": p.returncode, "seconds": round(time.time() - t0, 1),
            "message": last_line(p.stderr, "refusing", "No module named", "Error"),
            "reached_verl_unpickling": reached_verl, "code_ran": marker.exists()}


def case_missing_optimizer(b):
    return resume_case(b, "missing_optimizer", lambda run: (run / "last" / "optimizer.pt").unlink())


def case_overwritten_weights(b):
    def damage(run):
        model = run / "last" / "model.safetensors"
        with open(model, "r+b") as f:
            f.seek(model.stat().st_size // 2)
            f.write(bytes(4096))
    return resume_case(b, "overwritten_weights", damage)


def killed_then_resumed(b, name, kill, epochs="4"):
    run = b.work / name
    shutil.rmtree(run, ignore_errors=True)
    first = b.train(run, "--epochs", epochs, *NO_WARMSTART, kill=kill)
    after_kill = {"killed": first["exit"] == -signal.SIGKILL, **leftovers(run),
                  "last_epoch_on_disk": state(run / "last").get("epoch")}
    res = b.train(run, "--resume", "--epochs", epochs, *NO_WARMSTART)
    return {"after_kill": after_kill, **outcome(res), "continued": continued_at(res),
            "after_resume": leftovers(run)}


def case_kill_between_renames(b):
    """SIGKILL between the two renames of last/'s second save: .last.old (epoch 1) and a
    complete .last.tmp-* (epoch 2)."""
    return killed_then_resumed(b, "kill_between_renames", {"at": "install", "name": "last", "n": 2})


def case_kill_during_write(b):
    """SIGKILL while last/'s second save writes optimizer.pt into its temp dir."""
    return killed_then_resumed(b, "kill_during_write",
                               {"at": "write", "name": "last", "file": "optimizer.pt", "n": 2})


WS = ["--set", "warmstart=true", "--set", "warmstart_steps=40", "--set",
      "warmstart_examples=64", "--set", "warmstart_batch_size=4"]


def warmstart_case(b, name, kill):
    run = b.work / name
    shutil.rmtree(run, ignore_errors=True)
    # 1 s: the tiny warm start runs a few steps a second, so the default 60 s would never save
    extra = ["--set", "warmstart_checkpoint_seconds=1"] if b.has_ws_checkpoints else []
    counter = b.work / f"{name}.steps"
    first = b.train(run, "--epochs", "1", *WS, *extra, kill=kill, count_steps=counter)
    steps_before_kill = int(counter.read_text()) if counter.exists() else 0
    after_kill = {"killed": first["exit"] == -signal.SIGKILL, "seconds": first["seconds"],
                  "steps_run": steps_before_kill, **leftovers(run)}
    counter.unlink(missing_ok=True)
    res = b.train(run, "--resume", "--epochs", "1", *WS, *extra, count_steps=counter)
    return {"after_kill": after_kill, **outcome(res),
            "steps_redone_after_resume": int(counter.read_text()) if counter.exists() else 0,
            "continued": last_line(res["stderr"], "warm start: continuing"),
            "after_resume": leftovers(run)}


def case_warmstart_kill_step(b):
    """SIGKILL at warm-start step 25 of 40 (checkpoints every 1 s where the code has them)."""
    return warmstart_case(b, "warmstart_kill_step", {"at": "warmstart_step", "n": 25})


def case_warmstart_kill_write(b):
    """SIGKILL as the finished warm start is renamed into place."""
    return warmstart_case(b, "warmstart_kill_write", {"at": "install", "name": "warmstart",
                                                      "n": 1})


def case_second_process(b):
    """``train --resume`` without --out (picks the newest tiny-* directory) while that run is
    still training in it."""
    cwd = b.work / "lockcase"
    shutil.rmtree(cwd, ignore_errors=True)
    (cwd / "checkpoints").mkdir(parents=True)
    run = cwd / "checkpoints" / "tiny-20250101-000000"
    spec = {"argv": ["train", "--out", str(run), *SMALL, "--epochs", "30", *NO_WARMSTART]}
    first = subprocess.Popen([b.python, "-c", DRIVER, json.dumps(spec)], env=b.env, cwd=cwd,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while not (run / "last" / "trainer_state.json").exists() and time.time() < deadline:
            time.sleep(0.2)
        res = b.gamerl(["train", "--resume", *SMALL, "--epochs", "30", *NO_WARMSTART],
                       cwd=cwd, timeout=90)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    rows = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines() if ln]
    epochs = [r["epoch"] for r in rows if r.get("kind") == "epoch"]
    return {**outcome(res), "attached": "resumed from" in res["stdout"],
            "epochs_logged": len(epochs), "epochs_logged_twice": len(epochs) - len(set(epochs))}


def _server(b, **kw):
    from tasks.common.client import find_free_port
    from tasks.password_game.client import start_server

    port = find_free_port()
    return start_server("127.0.0.1", port, **kw), f"http://127.0.0.1:{port}"


def case_lost_session_evaluate(b):
    """``evaluate --env-url`` against a server holding one session while 4 episodes play:
    every session is evicted by the next one."""
    from tasks.common.client import stop_server

    ckpt = base_run(b) / "best"
    results = {}
    for name, kw in (("normal", {}), ("evicting", {"max_sessions": 1})):
        proc, url = _server(b, **kw)
        try:
            res = b.gamerl(["evaluate", "--checkpoint", ckpt, "--episodes", "4", "--device",
                            "cpu", "--env-url", url, "--json", b.work / f"eval_{name}.json"])
        finally:
            stop_server(proc)
        results[name] = res
    out = outcome(results["evicting"])
    try:
        rows = {n: json.loads((b.work / f"eval_{n}.json").read_text())["policy"]
                for n in results}
        out["same_result_as_normal_server"] = all(
            rows["normal"][k] == rows["evicting"][k] for k in ("reward", "success_rate", "turns"))
        out["replayed"] = rows["evicting"].get("replayed_episodes")
        out["dropped"] = rows["evicting"].get("lost_episodes")
    except (OSError, ValueError, KeyError):
        pass
    out["message"] = out["message"] or last_line(results["evicting"]["stdout"], "session")
    return out


def case_lost_session_train(b):
    """``train --env-url`` (1 epoch, 5-turn games) against a server holding one session:
    replays cannot keep up (3 per episode), so episodes are dropped."""
    from tasks.common.client import stop_server

    run = b.work / "lost_session_train"
    shutil.rmtree(run, ignore_errors=True)
    proc, url = _server(b, max_sessions=1)
    try:
        res = b.train(run, "--epochs", "1", *NO_WARMSTART, "--set", "max_steps=5",
                      "--env-url", url)
    finally:
        stop_server(proc)
    out = outcome(res)
    rows = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()
            if ln] if (run / "metrics.jsonl").exists() else []
    ep = [r for r in rows if r.get("kind") == "epoch"]
    if ep:
        out["epoch0_lost_episodes"] = ep[0].get("rollout/lost_episodes")
        out["epoch0_replayed_episodes"] = ep[0].get("rollout/replayed_episodes")
    out["finished"] = (run / "summary.json").exists()
    return out


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=str(HERE), help="the checkout to measure")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument("--work", help="scratch directory (default: a temporary one, removed)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="train_faults-"))
    work.mkdir(parents=True, exist_ok=True)
    repo = Path(args.repo).resolve()
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "(no git)"
    b = Bench(repo, args.python, work)
    results = {"repo": str(repo), "commit": commit, "host": platform.node(),
               "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M"), "cases": {}}
    t0 = time.time()
    for name in args.cases.split(","):
        t = time.time()
        try:
            results["cases"][name] = CASES[name](b)
        except Exception as e:  # a case that cannot run says so; the others still run
            results["cases"][name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"{name} ({time.time() - t:.0f}s): {json.dumps(results['cases'][name])}",
              flush=True)
    results["seconds"] = round(time.time() - t0)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
