"""Warm start: a short supervised fine-tune (SFT) on demonstrations, so RL has something to improve.

RL only re-weights answers the policy already samples. The embedded ``tiny`` model starts from
random weights: it would never produce a password-shaped answer, let alone close its turn with
<|im_end|>. A pretrained model such as SmolLM2-135M answers, but never samples the answers that
pay (a digit run summing to 25), so PPO converges on whatever cheap pattern pays a little. So
before PPO the model imitates demonstrations (``cfg.warmstart_demos``):

* demonstrations are whole episodes on training seeds, played through ``rollout`` against the
  real game, so every prompt is rendered exactly as in PPO, in the model's own chat template
  (system prompt + first observation, then the feedback messages of later turns);
* ``"format"`` (the tiny preset): every answer is a stage-appropriate password that ignores the
  feedback; each ingredient a later rule wants (a digit, an uppercase letter, digits summing to
  25, a month, ...) is added independently with probability ``warmstart_extra_prob``. Diverse
  and mostly incomplete: the format, not the skill, so RL must find out what the rules reward;
* ``"expert"`` (the SmolLM2 presets): the game's expert (``Task.expert_demo``; the Password
  Game's ``tasks.password_game.demos``) writes a short first password that holds the rules a
  player knows ahead, then repair turns that keep the password and change only what the
  feedback names: the multi-turn skill, scoring near the solver, which RL then sharpens;
* loss only on the answer tokens (prompt and feedback are context, not something to imitate).

The result is cached in ``<run_dir>/warmstart`` with a marker of the settings that made it; a
resumed run with the same settings loads it instead of training again. While it trains, the warm
start checkpoints itself to ``<run_dir>/warmstart_progress`` (weights, AdamW state, the batch
sampler's state, the losses so far) every ``warmstart_checkpoint_seconds``, or less often when
saving would take more than a tenth of the time: a killed warm start continues from there, with the same result as an uninterrupted one. Both are sealed,
checked checkpoints (gamerl.runs.checkpoint); the progress checkpoint is removed once the result is
written.
"""

from __future__ import annotations

import inspect
import json
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from safetensors.torch import load_model, save_model

from ..runs.checkpoint import (OPTIMIZER_FILE, CheckpointError, atomic_write_dir, find_checkpoint,
                         load_tensors)
from ..runs.rundir import PROGRESS_DIR  # beside the warm start's own directory
from .forward import hidden_states
from .prefix_share import trunk_hidden

log = logging.getLogger("gamerl")

MARKER = "warmstart.json"
PROGRESS_FILE = "progress.json"
WEIGHTS_FILE = "model.safetensors"


def _draw_training_games(cfg, rng: random.Random, n: int) -> list:
    """``n`` training instances of ``cfg``'s game, each from a training seed drawn with ``rng``
    (with replacement: the same seed can come twice)."""
    from ..games.registry import get_task

    seeds = cfg.train_seeds()
    return get_task(cfg.task).train_instances(
        cfg, [seeds[rng.randrange(len(seeds))] for _ in range(n)], None)


def demonstrations(cfg, tokenizer, seed: int) -> list[tuple[list[int], list[int]]]:
    """``warmstart_examples`` demonstration episodes on training instances, as (token_ids, mask).

    They are played through ``rollout`` by a scripted policy that answers every turn with the
    task's demonstration answer (``cfg.warmstart_demos``: "format" is ``Task.demo``, for the
    Password Game a fresh ``gamerl.games.password_game.demo_password``, for Wordle a random
    answer word, for OpenSpiel a random legal move; "expert" is ``Task.expert_demo``, for the
    Password Game ``tasks.password_game.demos``: short passwords, then repairs; for Wordle
    ``tasks.wordle.solver.expert_guess``: two openers, then consistent answers), against the real game:
    so later turns see exactly the feedback messages a rollout shows, and the model learns to
    answer them in the same format (mask 1 = answer tokens, the only ones with a loss)."""
    from .evaluate import local_env_factory
    from ..games.registry import get_task
    from .rollout import RolloutConfig, ScriptedPolicy, rollout

    task = get_task(cfg.task)
    rng = random.Random(seed)
    games = _draw_training_games(cfg, rng, cfg.warmstart_examples)
    make_demo = task.expert_demo if cfg.warmstart_demos == "expert" else task.demo
    episodes = rollout(ScriptedPolicy(tokenizer, make_demo(cfg, rng)), tokenizer, games,
                       local_env_factory(cfg), RolloutConfig.from_train_config(cfg))
    return [(ep.token_ids, ep.policy_mask) for ep in episodes]


# The frozen bottom's output of every demonstration is kept (``frozen_bottoms``) when it takes at
# most this much memory; else each step runs the bottom over its batch.
BOTTOM_CACHE_BYTES = 2 << 30
BOTTOM_BATCH = 16  # demonstrations per bottom pass when they are computed ahead
# Rows per pass of a step's forward (``answer_logits``). Timed by bench/warmstart_passes.py
# (2026-11-29, 2-core Intel Xeon, SmolLM2-135M on every layer, Wordle's demonstrations, 8 rows a
# step, 6 steps): the batch in one pass with the prompt per row (before) 89.9 s; 8 rows per pass
# 61.8 s, 4 rows 54.4 s (1.65x), 2 rows 59.1 s, 1 row 67.3 s; the same losses to 4 decimals.
SFT_ROWS_PER_PASS = 4


def _padded(batch: list[tuple[list[int], list[int]]], pad_id: int, device
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids, attention_mask, labels)`` ``[B, W]``, right padded; labels -100 off the answers."""
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)  # -100: ignored by cross_entropy
    for i, (seq, mask) in enumerate(batch):
        t = torch.tensor(seq)
        ids[i, :len(seq)] = t
        attn[i, :len(seq)] = 1
        labels[i, :len(seq)] = torch.where(torch.tensor(mask, dtype=torch.bool), t, -100)
    return ids.to(device), attn.to(device), labels.to(device)


@torch.no_grad()
def frozen_bottoms(lm, split, examples: list[tuple[list[int], list[int]]],
                   pad_id: int) -> Optional[list[torch.Tensor]]:
    """Each demonstration's frozen-bottom output ``[len, H]``, or None where keeping them would
    take more than ``BOTTOM_CACHE_BYTES``.

    The bottom's weights never change during the warm start, so its output for a demonstration
    is the same at every step that samples it: computed once here (``warmstart_steps x
    batch_size`` samples of ``warmstart_examples`` demonstrations: each one twice in the
    presets), the steps run only the top layers. The demonstrations go in their own order, in
    fixed batches, with shared prefixes (the system prompt and first message every one opens
    with) run once (``prefix_share``): the same numbers on every run, a resumed one included."""
    hidden_size = lm.config.get_text_config().hidden_size
    element = torch.finfo(next(lm.parameters()).dtype).bits // 8
    if sum(len(ids) for ids, _ in examples) * hidden_size * element > BOTTOM_CACHE_BYTES:
        return None
    bottoms: list[torch.Tensor] = []
    for start in range(0, len(examples), BOTTOM_BATCH):
        batch = examples[start:start + BOTTOM_BATCH]
        ids, attn, _ = _padded(batch, pad_id, lm.device)
        states = trunk_hidden(split.bottom, ids, attn, share=True)
        bottoms += [states[i, :len(seq)].clone() for i, (seq, _) in enumerate(batch)]
    return bottoms


def answer_logits(lm, batch: list[tuple[list[int], list[int]]], pad_id: int,
                  split=None, bottoms: Optional[list[torch.Tensor]] = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logits [N, V], targets [N])`` at the N positions of a batch that predict an answer
    token (mask 1), in fp32, in one graph. With ``split`` (a ``models.SplitTrunk``: only the top
    layers train) the frozen bottom runs without a graph, or not at all when ``bottoms``
    (``frozen_bottoms`` of these rows) is given.

    The rows run in passes of up to ``SFT_ROWS_PER_PASS``, shortest first, each right padded
    to its own longest row, with the prompt its rows open with run once (``prefix_share``): a
    batch padded to its longest row computes padding, and every row its own copy of the system
    prompt (Wordle's demonstrations: 256-654 tokens, 164 of them the prompt they all open with;
    8 rows in one pass computed 1.37x their tokens). The N positions come pass by pass: the same
    set as one pass's, in another order, which a mean over them does not see."""
    order = sorted(range(len(batch)), key=lambda i: len(batch[i][0]))  # stable: ties in order
    logits, targets = [], []
    for start in range(0, len(order), SFT_ROWS_PER_PASS):
        rows = order[start:start + SFT_ROWS_PER_PASS]
        pass_logits, pass_targets = _pass_logits(
            lm, [batch[i] for i in rows], pad_id, split,
            None if bottoms is None else [bottoms[i] for i in rows])
        logits.append(pass_logits)
        targets.append(pass_targets)
    return torch.cat(logits), torch.cat(targets)


def _pass_logits(lm, batch: list[tuple[list[int], list[int]]], pad_id: int, split,
                 bottoms: Optional[list[torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """``answer_logits`` of one pass: its rows right padded together."""
    ids, attn, labels = _padded(batch, pad_id, lm.device)
    # right padded like ids; the pads' states are never attended to
    bottom = None if bottoms is None else torch.nn.utils.rnn.pad_sequence(bottoms, batch_first=True)
    hidden = hidden_states(lm, ids, attn, split=split, bottom=bottom)[0][:, :-1]
    sel = labels[:, 1:] != -100  # the LM head only where there is a label (answers are short)
    return lm.get_output_embeddings()(hidden[sel]).float(), labels[:, 1:][sel]


def sft_loss(lm, batch: list[tuple[list[int], list[int]]], pad_id: int,
             split=None, bottoms: Optional[list[torch.Tensor]] = None) -> torch.Tensor:
    """Mean cross-entropy over the answer tokens (mask 1) of a batch (``answer_logits``)."""
    return F.cross_entropy(*answer_logits(lm, batch, pad_id, split, bottoms))


def warm_start_layers(cfg) -> Optional[int]:
    """How many top layers the warm start trains (None: every layer): PPO's
    ``trainable_layers``, or every layer with ``warmstart_all_layers``. Its cache is keyed on
    the layers trained, under ``trainable_layers``: a warm start on every layer is the same model
    whichever layers PPO trains after it."""
    if isinstance(cfg, SettingsRead):
        return cfg.derived("trainable_layers", warm_start_layers)
    return None if cfg.warmstart_all_layers else cfg.trainable_layers


class SettingsRead:
    """``cfg`` as the warm start sees it: every setting read through it, by the warm start or
    by anything it hands ``cfg`` to (the game's demonstrations, environments, rollouts), is
    remembered in ``read``. The cache is keyed on exactly those settings and their values
    (``marker``): the list is derived from what ran, so a setting that changes the warm start's
    data (the feedback, the context budget, the rewards RFT keeps by) can never be left out of
    it, and one it never reads (PPO's epochs, say) never invalidates it. A deterministic warm
    start that reads the same values reads the same settings and makes the same model."""

    # Not the warm start's data: how this process shows the run, how often it saves progress.
    # The model it starts from and its dtype are handed to it loaded, so they are read here.
    OPERATIONAL = ("warmstart_checkpoint_seconds",)
    INPUTS = ("model", "dtype")

    def __init__(self, cfg, read: Optional[set[str]] = None):
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "read", set(self.INPUTS) if read is None else read)

    def derived(self, name: str, of: Callable[[Any], Any]) -> Any:
        """``of(cfg)``, keyed as the setting ``name`` (``_setting``), its inputs not recorded."""
        self.read.add(name)
        return of(object.__getattribute__(self, "_cfg"))

    def __getattr__(self, name: str) -> Any:
        from ..config.train_config import PRESENTATION_FIELDS, SECTIONS, SETTING_SECTION

        cfg = object.__getattribute__(self, "_cfg")
        if name in SETTING_SECTION:
            if name not in PRESENTATION_FIELDS + self.OPERATIONAL:
                self.read.add(name)
            return getattr(cfg, name)
        if name in SECTIONS:  # a section read whole: its settings are recorded as read
            return SettingsRead(getattr(cfg, name), self.read)
        raw = inspect.getattr_static(cfg, name)
        if isinstance(raw, property):  # the config's own properties and methods read through
            return raw.fget(self)  # this recorder too
        if inspect.isfunction(raw):
            return raw.__get__(self)
        return getattr(cfg, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the warm start reads settings, never sets them ({name})")

    def marker(self) -> dict[str, Any]:
        """The settings read so far, by flat name, with their values as config.json has them."""
        cfg = object.__getattribute__(self, "_cfg")
        return {name: _setting(cfg, name) for name in sorted(self.read)}


def _setting(cfg, name: str) -> Any:
    """A setting of a warm start's key, as saved: ``trainable_layers`` means the layers the
    warm start trains (``warm_start_layers``)."""
    return _as_saved(warm_start_layers(cfg) if name == "trainable_layers" else getattr(cfg, name))


def _as_saved(value: Any) -> Any:
    """A setting's value as JSON gives it back (tuples as lists), so that a marker read from
    disk compares equal to the settings that wrote it."""
    return json.loads(json.dumps(value))


def _current(marker: dict[str, Any]) -> dict[str, Any]:
    """A marker without the settings removed since it was written (``REMOVED_SETTINGS``) where
    they were off: a warm start made before the removal with them off is the one these settings
    make. One that had one on keeps it, and is not reused."""
    from ..config.removed import REMOVED_SETTINGS, removed_in_use

    kept = set(removed_in_use(marker))
    return {name: value for name, value in marker.items()
            if name not in REMOVED_SETTINGS or name in kept}


def _same_settings(marker: Any, cfg) -> bool:
    """Whether ``cfg`` has every setting of a warm start's ``marker`` at the value it had."""
    from ..config.train_config import SETTING_SECTION

    return (isinstance(marker, dict) and bool(marker)
            and all(name in SETTING_SECTION and _setting(cfg, name) == value
                    for name, value in _current(marker).items()))


def _save_progress(path: Path, cfg, lm, optimizer, rng: random.Random, losses: list[float],
                   seconds: float) -> None:
    """Everything the loop needs to continue at step ``len(losses)``, sealed."""
    version, internal, gauss = rng.getstate()

    def write(tmp: Path) -> None:
        save_model(lm, str(tmp / WEIGHTS_FILE))  # safetensors; handles tied embeddings
        torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        (tmp / PROGRESS_FILE).write_text(json.dumps(
            {"settings": cfg.marker(), "losses": losses, "seconds": seconds,
             "sampler": [version, list(internal), gauss]}) + "\n")

    atomic_write_dir(path, write)


def _load_progress(path: Path, cfg, lm, optimizer, rng: random.Random
                   ) -> tuple[list[float], float]:
    """Restore a warm-start checkpoint into ``lm``, ``optimizer`` and ``rng``; returns (losses,
    seconds) so far, or ([], 0.0) when there is none for these settings (then it starts over,
    and the next save replaces what was there)."""
    try:
        if find_checkpoint(path) is None:
            return [], 0.0
        data = json.loads((path / PROGRESS_FILE).read_text())
    except (CheckpointError, OSError, ValueError) as e:
        log.warning("warm start: not continuing from %s (%s); starting over", path, e)
        return [], 0.0
    if not _same_settings(data.get("settings"), cfg):
        log.warning("warm start: %s was made with other settings; starting over", path)
        return [], 0.0
    cfg.read.update(_current(data["settings"]))  # what the steps before the kill read
    load_model(lm, str(path / WEIGHTS_FILE))
    optimizer.load_state_dict(load_tensors(path / OPTIMIZER_FILE))
    version, internal, gauss = data["sampler"]
    rng.setstate((version, tuple(internal), gauss))
    return list(data["losses"]), float(data["seconds"])


def _sft_step(lm, optimizer, params, batch, pad_id: int, split, bottoms) -> float:
    """One optimizer step on ``batch`` (loss on the answers, gradient clipped at 1); its
    cross-entropy."""
    from .epoch import deterministic_backward

    with deterministic_backward(lm.device):  # the update's order fixed (epoch.py)
        loss = sft_loss(lm, batch, pad_id, split, bottoms)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    return loss.item()


def warm_start(lm, tokenizer, cfg, out_dir: str | Path, progress: bool = False) -> dict[str, Any]:
    """Fine-tune ``lm`` in place on demonstrations (``warmstart_steps``) and save it to
    ``out_dir`` (atomically), continuing from ``warmstart_progress`` beside it when a previous
    attempt was killed. Returns {"loss_first", "loss_last", "seconds", "steps"} (seconds over
    all attempts; the losses are means of the first and last 10 steps')."""
    from ..progress import tqdm

    out_dir = Path(out_dir)
    progress_dir = out_dir.parent / PROGRESS_DIR
    t0 = time.time()
    cfg = SettingsRead(cfg)  # the settings it reads are its cache's key
    examples = demonstrations(cfg, tokenizer, seed=cfg.seed)
    rng = random.Random(cfg.seed + 1)
    split = _trainable_part(lm, cfg)
    pad_id = tokenizer.pad_token_id
    params = [p for p in lm.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.warmstart_lr, weight_decay=0.0)
    losses, seconds_before = _load_progress(progress_dir, cfg, lm, optimizer, rng)
    if losses:
        log.info("warm start: continuing at step %d of %d from %s", len(losses),
                 cfg.warmstart_steps, progress_dir)
    lm.train()
    bottoms = (frozen_bottoms(lm, split, examples, pad_id)
               if split and len(losses) < cfg.warmstart_steps else None)
    bar = tqdm(range(len(losses), cfg.warmstart_steps), desc="warm start (SFT)",
               disable=not progress, mininterval=1.0, leave=False, initial=len(losses),
               total=cfg.warmstart_steps)
    saved_at, save_cost = time.time(), 0.0
    for _ in bar:
        # indices: rng.sample draws the same positions from range(n) as from the list itself
        picks = rng.sample(range(len(examples)), min(cfg.warmstart_batch_size, len(examples)))
        losses.append(_sft_step(lm, optimizer, params, [examples[i] for i in picks], pad_id,
                                split, None if bottoms is None else [bottoms[i] for i in picks]))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        # Every warmstart_checkpoint_seconds, but at most ~10% of the time on saving (a
        # Qwen3-0.6B save writes weights and AdamW state, seconds each time).
        every = cfg.warmstart_checkpoint_seconds
        if time.time() - saved_at >= (max(every, 9 * save_cost) if every > 0 else 0):
            t_save = time.time()
            _save_progress(progress_dir, cfg, lm, optimizer, rng, losses,
                           seconds_before + t_save - t0)
            saved_at = time.time()
            save_cost = saved_at - t_save
    lm.eval()
    k = min(10, len(losses))  # no steps: no loss to report (not a mean of nothing read as 0)
    stats = {"loss_first": sum(losses[:k]) / k, "loss_last": sum(losses[-k:]) / k} if k else {}
    stats.update(seconds=seconds_before + time.time() - t0, steps=len(losses))
    _save_result(lm, tokenizer, cfg, stats, out_dir, progress_dir)
    return stats


def _trainable_part(lm, cfg):
    """The split trunk of a warm start when only the top ``trainable_layers`` train (the same
    layers as PPO will, unless ``warmstart_all_layers``; the rest frozen here), else None."""
    from ..models import SplitTrunk, freeze_below_top_layers

    n_top = warm_start_layers(cfg)
    if not n_top:
        return None
    freeze_below_top_layers(lm, n_top)
    return SplitTrunk.of(lm, n_top)


def _save_result(lm, tokenizer, cfg, stats: dict[str, Any], out_dir: Path,
                 progress_dir: Path) -> None:
    """The warm-started model, its tokenizer and marker to ``out_dir`` (atomically); the
    progress checkpoint removed; what it reached logged."""
    def write(tmp: Path) -> None:
        lm.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MARKER).write_text(json.dumps({"settings": cfg.marker(), "stats": stats},
                                             indent=2, sort_keys=True) + "\n")

    atomic_write_dir(out_dir, write)
    shutil.rmtree(progress_dir, ignore_errors=True)  # done: the result is in out_dir
    if "loss_first" in stats:
        log.info("warm start: %d steps in %.1fs, loss %.3f -> %.3f", stats["steps"],
                 stats["seconds"], stats["loss_first"], stats["loss_last"])


def cached_warm_start(cfg, out_dir: str | Path) -> Optional[dict[str, Any]]:
    """The stats of a finished warm start in ``out_dir`` made with the same settings, else None.
    The directory is recovered and checked first (gamerl.runs.checkpoint.find_checkpoint: call it
    holding the run's lock); a damaged one raises CheckpointError."""
    if find_checkpoint(out_dir) is None:
        return None
    data = json.loads((Path(out_dir) / MARKER).read_text())
    return data["stats"] if _same_settings(data.get("settings"), cfg) else None


__all__ = ["PROGRESS_DIR", "SettingsRead", "answer_logits", "cached_warm_start", "demonstrations",
           "frozen_bottoms", "sft_loss", "warm_start", "warm_start_layers"]
