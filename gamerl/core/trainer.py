"""The ``Trainer``: the run around the PPO epoch of ``gamerl.core.epoch``, CleanRL style.

``Trainer.train`` evaluates the starting policy, then each epoch calls the three step functions
of ``gamerl.core.epoch`` (``collect``, ``compute_advantages``, ``ppo_update``; its docstring has
the math), logs, evaluates every ``eval_every`` epochs and checkpoints. Everything around the
loop lives here: loading the policy, reference and optimizer (LoRA, 4-bit, split trunk), the warm
start, the curriculum and failure replay, the run directory (lock, resume), tracking.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from ..progress import tqdm

from ..runs.checkpoint import (STATE_FILE, CheckpointError, load_checkpoint_state, save_checkpoint,
                               set_rng_state)
from ..config.train_config import TrainConfig, default_run_dir
from .epoch import (PPOBatch, collect, compute_advantages, epoch_seeds, make_optimizer, ppo_update,
                    prefixed, resolve_dtype, scalars, seed_everything, without_lost)
from .evaluate import eval_instances, evaluate, format_table, local_env_factory, reference_rows
from ..games.registry import get_task
from .curriculum import Curriculum
from ..models.lora import LoraSettings, apply_lora, load_base, load_lora_policy
from ..models import (PolicyWithValue, SplitTrunk, freeze_below_top_layers, load_policy,
                      load_reference, set_gradient_checkpointing)
from .replay import FailureReplay
from ..runs.code_version import code_version, host
from ..runs.rundir import RunLock, open_run
from ..tracking.samples import episode_table, sample_rows
from .rollout import Episode, summarize
from ..tracking.tracker import (EPISODES_JSONL, METRICS_JSONL, Tracker, read_jsonl, save_figures,
                                truncate_jsonl)
from .warmstart import cached_warm_start, warm_start

log = logging.getLogger("gamerl")
ZERO_SHOT_FILE = "zero_shot.json"  # the held-out evaluation before the warm start


# ----------------------------------------------------------------------------- the trainer


@dataclass
class TrainerState:
    epoch: int = 0  # finished epochs (the resume point)
    best_reward: float = -math.inf
    best_epoch: int = -1
    skipped_updates: int = 0
    wandb_id: Optional[str] = None
    curriculum: Optional[dict] = None  # Curriculum.state_dict()
    replay: Optional[dict] = None  # FailureReplay.state_dict()


class Trainer:
    """Composes warm start, baseline evaluation, the PPO loop, checkpoints, logging and figures.

        trainer = Trainer(get_config("tiny"), run_dir="checkpoints/demo")
        summary = trainer.train()            # baseline eval, epochs, final eval, summary.json

    ``resume=True`` continues from ``run_dir/last`` (model, value head, optimizer, RNG, counters)
    with ``cfg`` as given (the CLI passes the run's own config.json plus explicit overrides, such
    as more epochs); fields that differ from the checkpoint's config are logged. The Trainer
    holds the run directory (a lock) until ``train()`` ends or ``close()``; it refuses, before
    writing anything, a directory in use, a fresh start in a directory that holds a run, and a
    resume it cannot continue exactly (gamerl.runs.rundir).
    """

    def __init__(self, cfg: TrainConfig, run_dir: str | Path | None = None, *, resume: bool = False,
                 make_env: Optional[Callable[[], Any]] = None):
        # transformers draws a progress bar for every save/load; with a checkpoint per epoch they
        # would bury our own bars (tqdm, per epoch) and the log.
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()

        self.cfg = cfg
        self.task = get_task(cfg.task)
        self.run_dir = Path(run_dir or cfg.out_dir or default_run_dir(cfg))
        # One writer per run directory, taken before anything in it is read or written.
        self._lock = RunLock(self.run_dir)
        try:
            self._open(resume, make_env)
        except BaseException:
            self._lock.release()
            raise

    def _open(self, resume: bool, make_env: Optional[Callable[[], Any]]) -> None:
        """Refuse or recover (gamerl.runs.rundir.open_run), then load the models and the state."""
        cfg = self.cfg
        self.code = code_version()  # read now: the code this process runs, whatever comes later
        self.host = host()  # and the machine: the same seed samples other episodes on another CPU
        last = open_run(self.run_dir, resume)
        # Everything of last/ that is not a model, read now: a refusal must come before any
        # write (config.json is written after the models load, for a resumed run).
        saved = load_checkpoint_state(last, verify=False) if last is not None else None
        if resume and last is None:
            print(f"resuming {self.run_dir} before its first PPO checkpoint: the warm start and "
                  "baseline continue from what was saved", flush=True)
        self.make_env = make_env or local_env_factory(cfg)
        self.state = TrainerState()
        ws_dir = self.run_dir / "warmstart"
        self._check_warm_start(ws_dir, last)
        if last is None:  # first: a warm start killed now resumes with these settings
            cfg.save(self.run_dir / "config.json")
        seed_everything(cfg.seed)
        device = torch.device(cfg.device) if cfg.device else None
        dtype = resolve_dtype(cfg)
        self.base_model = self._initial_model(ws_dir, device, dtype)  # what LoRA adapters sit on
        self._load_policy_and_reference(self.base_model, last, device, dtype)
        self.optimizer = make_optimizer(self.policy, cfg)
        log.info(self._disk_note())
        # What to play: the curriculum's stage (OpenSpiel, the Password Game) and replayed failures.
        self.curriculum = (Curriculum.from_dict(cfg.curriculum, cfg.curriculum_window,
                                                choices=self.task.curriculum.for_run(cfg))
                           if cfg.curriculum else None)
        self.replay = FailureReplay(cfg.replay_capacity) if cfg.replay_fraction > 0 else None
        if last is not None:
            self._restore(last, saved)
            cfg.save(self.run_dir / "config.json")
        self._read_earlier_evaluations()
        self.tracker = Tracker(self.run_dir, cfg.to_dict(), mode=cfg.wandb_mode,
                               project=cfg.wandb_project, run_id=self.state.wandb_id,
                               name=self.run_dir.name)
        self.state.wandb_id = self.tracker.run_id

    def _check_warm_start(self, ws_dir: Path, last: Optional[Path]) -> None:
        """``warmstart_stats``: the cached warm start's (None: none yet, or none wanted). The
        warm start is a checkpoint of this run too: a resume whose last/ was trained from a warm
        start that is gone or was made with other settings is refused, before any write."""
        self.warmstart_stats = None
        if not self.cfg.warmstart:
            return
        self.warmstart_stats = cached_warm_start(self.cfg, ws_dir)
        if self.warmstart_stats is None and last is not None:
            raise CheckpointError(
                f"--resume refused, nothing was changed: {ws_dir} is missing or was made "
                "with other warm-start settings, and last/ was trained from it (it is the "
                "KL reference, and the base of LoRA adapters)")

    def _initial_model(self, ws_dir: Path, device, dtype) -> str:
        """Where the initial policy loads from: the warm-started model (cached in ``ws_dir``,
        made now after the zero-shot evaluation when missing) or ``cfg.model`` itself."""
        cfg = self.cfg
        if not cfg.warmstart:
            return cfg.model
        if self.warmstart_stats is None:  # continues from warmstart_progress/ if killed
            # the same memory settings as PPO: a batch of whole games through a 0.6B model
            # without gradient checkpointing outgrew 24 GB (the qwen3-0.6b preset, fp32)
            lm, tok = load_policy(cfg.model, device=device, dtype=dtype,
                                  gradient_checkpointing=cfg.gradient_checkpointing,
                                  attn_implementation=cfg.attn_implementation)
            self._evaluate_zero_shot(lm, tok)
            self.warmstart_stats = warm_start(lm, tok, cfg, ws_dir, progress=cfg.progress)
            del lm
        return str(ws_dir)

    def _load_policy_and_reference(self, init: str, last: Optional[Path], device, dtype) -> None:
        """``policy`` (with its value head), ``tokenizer`` and the frozen ``reference``, from
        ``init`` or, on resume, from ``last``; only the top ``trainable_layers`` train."""
        cfg = self.cfg
        if cfg.lora:
            self.policy, self.tokenizer = self._lora_policy(init, last, device, dtype)
            # The reference is the same model with the adapters off (reference_logprobs).
            self.reference = self.policy.lm
        else:
            lm, self.tokenizer = load_policy(init, device=device, dtype=dtype,
                                             gradient_checkpointing=cfg.gradient_checkpointing,
                                             attn_implementation=cfg.attn_implementation)
            # The reference is the policy PPO starts from, frozen: KL measures drift from it.
            self.reference = load_reference(lm)
            if last is None:
                self.policy = PolicyWithValue(lm)
            else:
                del lm
                self.policy = PolicyWithValue.load(last, device=self.reference.device,
                                                   dtype=self.reference.dtype,
                                                   attn_implementation=cfg.attn_implementation)
                set_gradient_checkpointing(self.policy.lm, cfg.gradient_checkpointing)
        if cfg.trainable_layers:  # the top layers train; the frozen bottom runs once an epoch
            freeze_below_top_layers(self.policy.lm, cfg.trainable_layers)
            self.policy.split = SplitTrunk.of(self.policy.lm, cfg.trainable_layers)

    def _read_earlier_evaluations(self) -> None:
        """``baseline`` and ``zero_shot``: this run's evaluations already on disk (None: not
        made yet)."""
        baseline_file = self.run_dir / "baseline.json"
        self.baseline = json.loads(baseline_file.read_text()) if baseline_file.exists() else None
        zero_shot_file = self.run_dir / ZERO_SHOT_FILE
        self.zero_shot = (json.loads(zero_shot_file.read_text()) if zero_shot_file.exists()
                          else None)

    def _disk_note(self) -> str:
        """What the run will keep on disk, said before PPO starts (a SmolLM2 run keeps ~1.8 GB:
        users were surprised by it). Sizes from the parameters as they are saved."""
        params = list(self.policy.parameters())
        trainable = sum(p.numel() * 4 for p in params if p.requires_grad)  # fp32 AdamW moments
        model = (trainable if self.cfg.lora  # adapters only
                 else sum(p.numel() * p.element_size() for p in params))
        warm = model if self.cfg.warmstart and not self.cfg.lora else 0
        total = 2 * model + 2 * trainable + warm
        return (f"disk: this run keeps about {total / 1e9:.2f} GB in {self.run_dir}: best/ and "
                f"last/ each {model / 1e6:.0f} MB of weights, last/ also {2 * trainable / 1e6:.0f} "
                "MB of optimizer state (what a resume needs)"
                + (f", warmstart/ {warm / 1e6:.0f} MB" if warm else "")
                + "; the figures and logs are small")

    def _evaluate_zero_shot(self, lm, tokenizer) -> None:
        """The model as it comes, before the warm start, on the held-out games (once per run:
        RUN/zero_shot.json): the first of the three rows (zero-shot, after the warm start,
        after PPO) that say what each stage added."""
        if (self.run_dir / ZERO_SHOT_FILE).exists():
            return
        lm.eval()
        metrics = evaluate(lm, tokenizer, eval_instances(self.cfg), self.cfg,
                           make_env=self.make_env, sample_seed=self.cfg.seed + 1234,
                           progress="evaluating (zero-shot)" if self.cfg.progress else None)
        (self.run_dir / ZERO_SHOT_FILE).write_text(json.dumps(metrics, indent=2) + "\n")

    def _restore(self, last: Path, saved: dict[str, Any]) -> None:
        """Optimizer, counters, curriculum, replay buffer and RNG from ``last`` (checked by
        open_run, read by load_checkpoint_state); the records of epochs after it are dropped
        (the kill interrupted them)."""
        cfg = self.cfg
        changed = {k: (v, getattr(cfg, k)) for k, v in saved["train_config"].items()
                   if hasattr(cfg, k) and getattr(cfg, k) != v}
        if changed:
            log.info("resume: config differs from the checkpoint's: %s", changed)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.state = TrainerState(**{k: v for k, v in saved["state"].items()
                                     if k in TrainerState.__dataclass_fields__})
        # best/ can be newer and better than last/ (a kill between the two saves of an epoch): compare against it, or the next epoch overwrites a better model.
        best = self.run_dir / "best"  # checked by open_run
        if best.exists():
            best_state = json.loads((best / STATE_FILE).read_text())
            if best_state.get("best_reward", -math.inf) > self.state.best_reward:
                self.state.best_reward = best_state["best_reward"]
                self.state.best_epoch = best_state.get("best_epoch", self.state.best_epoch)
        if self.curriculum is not None and self.state.curriculum:
            self.curriculum.load_state_dict(self.state.curriculum)
        if self.replay is not None and self.state.replay:
            self.replay.load_state_dict(self.state.replay)
        set_rng_state(saved["rng"])
        for name in (METRICS_JSONL, EPISODES_JSONL):  # forget epochs the kill interrupted
            truncate_jsonl(self.run_dir / name, self.state.epoch - 1)
        print(f"resumed from {last}: continuing at epoch {self.state.epoch} of {cfg.epochs}",
              flush=True)

    def close(self) -> None:
        """Finish the logs and let go of the run directory (train() does this when it ends)."""
        tracker = getattr(self, "tracker", None)
        if tracker is not None:
            tracker.finish()
        self._lock.release()

    def _lora_policy(self, init: str, last: Optional[Path], device, dtype):
        """A LoRA policy on ``init``: fresh adapters, or the checkpoint's (resume). 4-bit base
        weights with ``load_in_4bit`` (CUDA + bitsandbytes; gamerl.models.lora says so
        otherwise)."""
        cfg = self.cfg
        base = dict(device=device, dtype=dtype, load_in_4bit=cfg.load_in_4bit,
                    gradient_checkpointing=cfg.gradient_checkpointing,
                    attn_implementation=cfg.attn_implementation)
        if last is not None:
            return load_lora_policy(init, last, trainable=True, **base)
        lm, tok = load_base(init, **base)
        settings = LoraSettings.from_dict(dict(
            rank=cfg.lora_rank, alpha=cfg.lora_alpha, dropout=0.0,
            target_modules=cfg.lora_target_modules))
        return PolicyWithValue(apply_lora(lm, settings)), tok

    def stage(self) -> Optional[dict]:
        """The curriculum's current stage as train_instances takes it (None: no curriculum)."""
        if self.curriculum is None:
            return None
        st = self.curriculum.stage
        return {"name": st.name, "games": list(st.games), "opponent": st.opponent}

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, n: Optional[int] = None, greedy: bool = False,
                 name: Optional[str] = None, split: str = "test") -> dict[str, Any]:
        """Held-out evaluation on the test games (or, ``split="validation"``, the validation
        games, which choose ``best/``). With ``name``, a table of sample episodes (different
        games, mixed outcomes: gamerl.tracking.samples) goes to ``RUN/samples_<name>.md``: what
        the policy actually played, not only its averages."""
        metrics, episodes = evaluate(self.policy.lm, self.tokenizer,
                                     eval_instances(self.cfg, n, split=split),
                                     self.cfg, greedy=greedy, make_env=self.make_env,
                                     sample_seed=self.cfg.seed + 1234, return_episodes=True,
                                     progress=f"evaluating ({name or 'held-out'})"
                                     if self.cfg.progress else None)
        if name is not None:
            played = [ep for ep in episodes if not ep.lost]
            table = episode_table(played, self.cfg.task)
            (self.run_dir / f"samples_{name}.md").write_text(
                f"# Sample held-out episodes: {name}\n\n{table}\n")
            # the same episodes (and the model's own words) in wandb / TensorBoard
            self.tracker.log_table(name, *sample_rows(played, self.cfg.task, with_answers=True),
                                   step=self._eval_step(name))
        return metrics

    def epoch_line(self, epoch: int, metrics: dict[str, Any]) -> str:
        """``epoch 3/30: reward 8.34  rules satisfied 4.12  success 41%  KL(k3) 0.038 ...``:
        the epoch's training batch (and held-out numbers when it was evaluated)."""
        parts = [f"epoch {epoch + 1}/{self.cfg.epochs}:",
                 f"reward {metrics['rollout/reward']:.2f}"]
        parts += [f"{k.replace('_', ' ')} {metrics[f'rollout/{k}']:.2f}"
                  for k in self.task.headline if f"rollout/{k}" in metrics]
        parts += [f"success {metrics['rollout/success_rate']:.0%}",
                  f"KL(k3) {metrics.get('adv/kl_ref_k3', math.nan):.3f}",
                  f"clip {metrics.get('update/clip_fraction', math.nan):.2f}",
                  f"EV {metrics.get('adv/explained_variance', math.nan):.2f}"]
        if "eval/reward" in metrics:
            parts.append(f"| held-out reward {metrics['eval/reward']:.2f}")
        seconds = sum(metrics.get(k, 0.0) for k in ("perf/rollout_seconds", "perf/score_seconds",
                                                    "update/update_seconds"))
        parts.append(f"({seconds:.0f}s)")
        return "  ".join(parts)

    def _eval_step(self, name: str) -> int:
        """The tracker step an evaluation's records go under (steps only grow, as wandb needs):
        the baseline at 0, a mid-training one with its epoch's metrics, the final one after."""
        if name == "baseline":
            return 0
        return self.state.epoch + 1 if name == "final" else self.state.epoch

    # ------------------------------------------------------------------ one epoch
    # The PPO loop body as named steps. ``train()`` runs them; so does the notebook's training
    # cell, one per line, so that what a user steps through is what the CLI runs.
    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """Collect, compute advantages, update: the PPO loop body. Returns the epoch's metrics
        (``end_epoch`` logs and checkpoints them)."""
        episodes, batch = self.collect_batch(epoch)
        self.keep_if_best(epoch, episodes)
        adv_stats, upd_stats = self.learn(batch)
        return self.epoch_metrics(epoch, episodes, batch, adv_stats, upd_stats)

    def collect_batch(self, epoch: int) -> tuple[list[Episode], PPOBatch]:
        """The epoch's games played by the current policy and scored (old and reference
        log-probs, values): every episode (the lost ones too, which the log counts) and the
        batch of those that have a result (a lost server session has none)."""
        cfg = self.cfg
        instances = epoch_seeds(cfg, epoch, self.stage(), self.replay)
        batch = collect(self.policy, self.reference, self.tokenizer, instances, self.make_env, cfg)
        return batch.episodes, without_lost(batch)

    def keep_if_best(self, epoch: int, episodes: list[Episode]) -> None:
        """Without ``eval_every``, ``best/`` is chosen on the training games' reward: the
        weights that just played ``episodes`` earned it, so they are saved now, before the
        update changes them (epoch 0's are the policy PPO started from). With ``eval_every``
        the validation games choose it (``end_epoch``)."""
        if self.cfg.eval_every:
            return
        played = [ep for ep in episodes if not ep.lost]
        roll = summarize(played, self.cfg)
        if played and roll["reward"] > self.state.best_reward:
            # best_epoch: the last epoch whose update these weights hold (-1: none)
            self.state.best_reward, self.state.best_epoch = roll["reward"], epoch - 1
            self.save("best", {"epoch": epoch, **prefixed("rollout", roll)})

    def learn(self, batch: PPOBatch) -> tuple[dict[str, Any], dict[str, Any]]:
        """KL-penalised rewards and advantages (``compute_advantages``), then the clipped PPO
        update (``ppo_update``). An empty batch (the server lost every session)
        updates nothing, and the run goes on."""
        if not len(batch):
            log.warning("every episode of this epoch lost its server session; no update")
            return {"kl_ref": math.nan}, {"skipped_updates": 0, "optimizer_steps": 0}
        # ALGO LOGIC: the two PPO steps (gamerl/core/epoch.py; the math in gamerl/core/ppo.py)
        adv_stats = compute_advantages(batch, self.cfg)
        return adv_stats, ppo_update(self.policy, self.optimizer, batch, self.cfg)

    def epoch_metrics(self, epoch: int, episodes: list[Episode], batch: PPOBatch,
                      adv_stats: dict[str, Any], upd_stats: dict[str, Any]) -> dict[str, Any]:
        """The epoch's record: the batch's results, the advantage and update statistics, the
        failure replay's and curriculum's numbers (``after_epoch`` feeds them the results);
        the episodes go to episodes.jsonl."""
        extra = self.after_epoch(batch.episodes)
        roll = summarize(episodes, self.cfg)
        if not len(batch):
            roll["reward"] = math.nan  # no result: never a "best" epoch
        policy_tokens = float(batch.mask.sum())
        metrics = {"kind": "epoch", "epoch": epoch,
                   **{f"rollout/{k}": v for k, v in roll.items()},
                   **prefixed("adv", adv_stats), **prefixed("update", upd_stats),
                   "perf/rollout_seconds": batch.rollout_seconds,
                   "perf/rollout_tokens_per_s": policy_tokens / max(batch.rollout_seconds, 1e-9),
                   "perf/score_seconds": batch.score_seconds, **extra}
        self.tracker.log_episodes([ep.record(self.task) for ep in episodes], epoch)
        return metrics

    def end_epoch(self, epoch: int, metrics: dict[str, Any]) -> None:
        """After an epoch: count it, evaluate on the validation games every ``eval_every``
        epochs and after the last (``best/``: the highest validation reward), log, keep
        ``last/`` (every epoch: what a resume continues from), print the epoch's line. The
        test games are never used to choose anything."""
        cfg = self.cfg
        self.state.epoch = epoch + 1
        self.state.skipped_updates += int(metrics["update/skipped_updates"])
        metrics["update/skipped_updates_total"] = self.state.skipped_updates
        if cfg.eval_every and ((epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.epochs):
            ev = self.evaluate(name=f"epoch{epoch + 1}", split="validation")
            metrics.update({f"eval/{k}": v for k, v in scalars(ev).items()})
        self.tracker.log(metrics, step=epoch + 1)
        score = metrics.get("eval/reward")
        if score is not None and score > self.state.best_reward:
            self.state.best_reward, self.state.best_epoch = score, epoch
            self.save("best", metrics)
        self.save("last", metrics)
        # one line per epoch whatever the bars do: a log file of a --no-progress run reads
        tqdm.write(self.epoch_line(epoch, metrics))

    def after_epoch(self, episodes: list[Episode]) -> dict[str, Any]:
        """Feed the epoch's results to the failure replay (episodes that failed or went badly,
        with the task's badness as priority) and the curriculum (successes, in order; a stage
        change is announced). Returns their numbers for the log."""
        out: dict[str, Any] = {}
        if self.replay is not None:
            for ep in episodes:
                badness = self.task.badness(ep, self.cfg)
                if not ep.success or badness >= 0.5:
                    self.replay.add(ep.instance, badness)
            out.update(self.replay.metrics())
        if self.curriculum is not None:
            announcement = self.curriculum.update([ep.success for ep in episodes])
            # said once: the curriculum logs it, which the CLI prints; where nothing prints the
            # "gamerl" log's INFO (a notebook), here
            if announcement and not (log.isEnabledFor(logging.INFO) and log.hasHandlers()):
                tqdm.write(announcement)
            out.update(self.curriculum.metrics())
            out["curriculum/stage_name"] = self.curriculum.stage.name
        return out

    # ------------------------------------------------------------------ checkpoints
    def save(self, name: str, metrics: Optional[dict[str, Any]] = None) -> Path:
        if not self._lock.held:  # another process may own the directory by now
            raise RuntimeError(f"{self.run_dir} was released (train() ended or close() was "
                               "called): this Trainer no longer writes there")
        if self.curriculum is not None:
            self.state.curriculum = self.curriculum.state_dict()
        if self.replay is not None:
            self.state.replay = self.replay.state_dict()
        # Only last/ is resumed from, so only last/ keeps the AdamW moments (2x the trainable
        # weights: 109 MB for SmolLM2's top 4 layers); best/ is for evaluation and export.
        optimizer = self.optimizer if name == "last" else None
        return save_checkpoint(self.run_dir / name, self.policy, self.tokenizer, optimizer,
                               asdict(self.state), self.cfg.to_dict(), metrics)

    # ------------------------------------------------------------------ the whole run
    def train(self) -> dict[str, Any]:
        """Baseline, epochs, final evaluation, summary.json (with the zero-shot row when there
        was a warm start); lets go of the run directory when it ends, however it ends."""
        try:
            return self._train()
        finally:
            self.close()

    def _train(self) -> dict[str, Any]:
        cfg, t_start = self.cfg, time.time()
        if self.baseline is None:  # measured once, after the warm start and before any PPO
            if self.zero_shot is not None:  # the model before its warm start, at step 0 too
                self.tracker.log({"kind": "eval", "epoch": -1, "name": "zero_shot",
                                  **scalars(self.zero_shot)}, step=0)
            self.baseline = self.evaluate(name="baseline")
            (self.run_dir / "baseline.json").write_text(json.dumps(self.baseline, indent=2) + "\n")
            self.tracker.log({"kind": "eval", "epoch": -1, "name": "baseline",
                              **scalars(self.baseline)},
                             step=0)
        bar = tqdm(range(self.state.epoch, cfg.epochs), desc="PPO", disable=not cfg.progress,
                   initial=self.state.epoch, total=cfg.epochs)
        for epoch in bar:
            metrics = self.train_epoch(epoch)
            self.end_epoch(epoch, metrics)
            bar.set_postfix(reward=f"{metrics['rollout/reward']:.2f}",
                            **{k.split("_")[0]: f"{metrics[f'rollout/{k}']:.2f}"
                               for k in self.task.headline if f"rollout/{k}" in metrics},
                            success=f"{metrics['rollout/success_rate']:.0%}",
                            kl_k3=f"{metrics.get('adv/kl_ref_k3', math.nan):.3f}")

        final = self.evaluate(name="final")
        greedy = ({"final_greedy": {"label": "after PPO, greedy", **self.evaluate(greedy=True)}}
                  if cfg.eval_greedy else {})
        refs = reference_rows(self.tokenizer, eval_instances(cfg), cfg, self.make_env)
        zero_shot = {"zero_shot": self.zero_shot} if self.zero_shot is not None else {}
        rows = {**zero_shot, "baseline": self.baseline, "final": final, **greedy, **refs}
        summary = {"config": cfg.to_dict(), "run_dir": str(self.run_dir), **zero_shot,
                   "baseline": self.baseline, "final": final, **greedy, **refs,
                   # as a person reads them: the first and last seed (both played), epochs
                   # counted from 1 (the epoch lines' and the figures' numbering)
                   "references": list(refs),
                   "eval_seeds": [cfg.eval_seed_start, cfg.eval_seed_start + cfg.eval_episodes - 1],
                   "seed_ranges": {name: [r.start, r.stop - 1]
                                   for name, r in cfg.seed_ranges().items()},
                   # the test games that differ (the Password Game's first 9 rules are one game)
                   "distinct_test_games": final["distinct_games"],
                   "epochs": self.state.epoch,
                   # the PPO epochs best/ had trained (0: the policy PPO started from)
                   "best_epoch": (self.state.best_epoch + 1 if self.state.best_reward > -math.inf
                                  else None),
                   "skipped_updates": self.state.skipped_updates,
                   "warmstart": self.warmstart_stats,
                   "train_seconds_this_process": time.time() - t_start,
                   "finished": time.strftime("%Y-%m-%d", time.gmtime()),
                   **self.code, "host": self.host}
        self.tracker.log({"kind": "eval", "epoch": self.state.epoch, "name": "final",
                          **scalars(final)},
                         step=self.state.epoch + 1)
        summary["figures"] = [p.name for p in save_figures(
            self.run_dir, read_jsonl(self.run_dir / METRICS_JSONL), self.baseline, final,
            headline=(self.task.headline or ("reward",))[0], references=refs,
            best_epoch=self.state.best_epoch if self.state.best_epoch >= 0 else None,
            task=cfg.task)]
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        self.tracker.summary({f"final/{k}": v for k, v in scalars(final).items()})
        self.tracker.finish()
        summary["table"] = format_table(rows, self.task.report_columns, cfg.to_dict())
        return summary


__all__ = ["Trainer", "TrainerState"]
