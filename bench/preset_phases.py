"""A preset's phases timed on this machine, through the trainer's own code, with peak memory.

    python bench/preset_phases.py --preset qwen3-0.6b --model qwen3-0.6b-random \\
        --json bench/results/preset_phases_qwen3_h200.json      # on a GPU
    python bench/preset_phases.py --preset tiny --set warmstart_steps=2 --json /tmp/p.json

Why: a whole preset run (three held-out evaluations, the warm start, every PPO epoch) can take
longer than the machine is lent for; its phases are what a run repeats. This script runs the
``Trainer`` the CLI runs: ``Trainer(cfg)`` loads the model, evaluates it zero-shot and
warm-starts it (each timed by wrapping the trainer module's own ``load_policy``, ``evaluate``
and ``warm_start`` calls), then ``train_epoch`` and ``end_epoch`` (one PPO epoch: rollout,
scoring, update, the checkpoint saves) ``--epochs`` times. It writes the JSON after every phase, so
a run cut short still keeps what it measured, and computes the whole command's time from them:
``Trainer(cfg)`` + 2 more evaluations (baseline and final: the same held-out games as the
zero-shot one) + ``cfg.epochs`` x the mean epoch. Random weights never stop an answer
early (every answer runs to ``max_new_tokens``, every game to ``max_steps``), so on
``qwen3-0.6b-random`` the rollout and evaluation times are an upper bound for the real weights.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import gamerl.core.trainer as trainer_module  # noqa: E402
from gamerl.config import get_config, parse_overrides  # noqa: E402
from gamerl.core.trainer import Trainer  # noqa: E402
from procmem import gpu_peak_gb, gpu_reset_peak  # noqa: E402  (bench/, the script's folder)

# the trainer module's calls that Trainer(cfg) makes, timed one by one
TIMED_CALLS = ("load_policy", "evaluate", "warm_start")
LABELS = {"evaluate": "evaluate (zero-shot)"}  # the only evaluation inside Trainer(cfg)


def sample_memory(device: torch.device, every_s: float, stop: threading.Event) -> None:
    """Print the peak accelerator memory so far every ``every_s`` seconds, so that a phase cut
    off by a time limit still shows how high it went (the phase's own row is written at its end)."""
    t0 = time.perf_counter()
    while not stop.wait(every_s):
        print(f"[{time.perf_counter() - t0:6.0f} s] peak so far {gpu_peak_gb(device):.1f} GB, "
              f"allocated now {torch.cuda.memory_allocated(device) / 1e9:.1f} GB", flush=True)


class Phases:
    """Records (name, seconds, peak memory) and rewrites the JSON after each one."""

    def __init__(self, path: Path | None, header: dict):
        self.path, self.result = path, {**header, "phases": []}

    def add(self, name: str, seconds: float, device: torch.device, **extra) -> None:
        row = {"phase": name, "seconds": round(seconds, 2),
               "peak_gpu_memory_gb": gpu_peak_gb(device), **extra}
        self.result["phases"].append(row)
        print(f"{name:<28} {seconds:8.1f} s" + (f"  peak {row['peak_gpu_memory_gb']:.1f} GB"
                                                 if row["peak_gpu_memory_gb"] else ""), flush=True)
        self.write()

    def write(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.result, indent=2) + "\n")


class StopAfter(Exception):
    """Raised after the phase named by --stop-after, to end the run there."""


@contextlib.contextmanager
def timed_trainer_calls(phases: Phases, device: torch.device, stop_after: str | None = None):
    """Wrap the trainer module's TIMED_CALLS so each call inside Trainer(cfg) is a phase; after
    the first call of ``stop_after`` (one of TIMED_CALLS), stop there (StopAfter)."""
    originals = {name: getattr(trainer_module, name) for name in TIMED_CALLS}

    def timed(name, fn):
        def call(*args, **kwargs):
            gpu_reset_peak(device)
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            phases.add(LABELS.get(name, name), time.perf_counter() - t0, device)
            if name == stop_after:
                raise StopAfter(name)
            return out
        return call

    for name, fn in originals.items():
        setattr(trainer_module, name, timed(name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(trainer_module, name, fn)


def projected_total(phases: list[dict], epochs: int) -> dict:
    """The whole command's seconds from its phases: Trainer(cfg) as measured (model loads, the
    zero-shot evaluation, the warm start, the reference), two more evaluations (baseline and
    final: the same games, the zero-shot one's time each) and ``epochs`` x the mean epoch."""
    by = lambda prefix: [p["seconds"] for p in phases if p["phase"].startswith(prefix)]  # noqa: E731
    init, evals, epoch_s = by("trainer init"), by("evaluate"), by("epoch")
    if not (init and evals and epoch_s):
        return {}
    mean_epoch = sum(epoch_s) / len(epoch_s)
    total = init[0] + 2 * evals[0] + epochs * mean_epoch
    return {"epochs": epochs, "mean_epoch_seconds": round(mean_epoch, 1),
            "evaluation_seconds": evals[0], "seconds": round(total, 1),
            "how": "Trainer(cfg) + 2 x the zero-shot evaluation + epochs x the mean epoch"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--model", default=None, help="the preset's model unless given")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--epochs", type=int, default=1, help="PPO epochs to time (default 1)")
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the phases here, after each one")
    ap.add_argument("--sample-memory", type=float, default=0, metavar="SECONDS",
                    help="on a GPU, print the peak memory so far this often")
    ap.add_argument("--stop-after", choices=TIMED_CALLS, default=None,
                    help="end after this call of Trainer(cfg) (e.g. evaluate: the zero-shot "
                    "evaluation alone, when a machine is lent for less than the whole init)")
    args = ap.parse_args(argv)

    overrides = parse_overrides(args.set)
    if args.model:
        overrides["model"] = args.model
    cfg = get_config(args.preset, **overrides, progress=False, wandb_mode="disabled")
    device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    header = {"preset": args.preset, "overrides": {k: str(v) for k, v in overrides.items()},
              "model": cfg.model, "device": (torch.cuda.get_device_name(device)
                                             if device.type == "cuda" else platform.processor()
                                             or platform.machine()),
              "cpu_count": os.cpu_count(), "torch": torch.__version__,
              "python": platform.python_version(),
              "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
              "game": {"num_rules": getattr(cfg, "num_rules", None), "max_steps": cfg.max_steps,
                       "max_new_tokens": cfg.max_new_tokens,
                       "episodes_per_epoch": cfg.episodes_per_epoch,
                       "eval_episodes": cfg.eval_episodes}}
    phases = Phases(Path(args.json) if args.json else None, header)
    stop_sampling = threading.Event()
    if args.sample_memory and device.type == "cuda":
        threading.Thread(target=sample_memory, args=(device, args.sample_memory, stop_sampling),
                         daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.out) if args.out else Path(tmp) / "run"
        t0 = time.perf_counter()
        try:
            with timed_trainer_calls(phases, device, args.stop_after):
                trainer = Trainer(cfg, run_dir=run_dir)
        except StopAfter:  # its phase's row is written (Phases.add writes after each one)
            stop_sampling.set()
            return 0
        phases.add("trainer init (all)", time.perf_counter() - t0, device)
        try:
            for epoch in range(args.epochs):
                gpu_reset_peak(device)
                t0 = time.perf_counter()
                metrics = trainer.train_epoch(epoch)
                t_epoch = time.perf_counter() - t0
                t1 = time.perf_counter()
                trainer.end_epoch(epoch, metrics)  # the checkpoint saves
                phases.add(f"epoch {epoch + 1}", t_epoch + time.perf_counter() - t1, device,
                           rollout_seconds=metrics.get("perf/rollout_seconds"),
                           score_seconds=metrics.get("perf/score_seconds"),
                           update_seconds=metrics.get("update/update_seconds"),
                           save_seconds=round(time.perf_counter() - t1, 2),
                           policy_tokens_per_episode=metrics.get("rollout/policy_tokens"),
                           turns=metrics.get("rollout/turns"),
                           rollout_tokens_per_s=metrics.get("perf/rollout_tokens_per_s"),
                           update_tokens_per_s=metrics.get("update/update_tokens_per_s"))
        finally:
            trainer.close()
            stop_sampling.set()
    phases.result["projected_whole_run"] = projected_total(phases.result["phases"], cfg.epochs)
    phases.write()
    print(json.dumps(phases.result["projected_whole_run"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
