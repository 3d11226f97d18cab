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
* loss only on the answer tokens (prompt and feedback are context, not something to imitate);
* then, where ``warmstart_rft_rounds`` > 0, rejection-sampling fine-tuning (RFT: ReST-EM's
  expectation and maximisation steps, STaR's filter): each round the model plays
  ``warmstart_rft_episodes`` training games with the run's own sampling settings, the
  ``warmstart_rft_keep`` fraction with the highest return is kept, and it trains
  ``warmstart_rft_steps`` more steps on those episodes alone (``rejection_sampled``). The
  demonstrations teach what the expert does; these teach what the model itself can already
  sample and that paid, which is the distribution PPO then re-weights. With
  ``warmstart_rft_labels="expert"`` the rounds are DAgger's (``expert_relabeled``): the game's
  expert answers every state the model reached in its games, and the steps draw from every
  round's labels so far: the expert's skill on the model's own boards, after its mistakes
  (``"expert_likeliest"``: of the expert's equally good answers, the one the model finds
  likeliest).

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
import math
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
from ..models.policy import lm_trunk
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


def _round_name(cfg) -> str:
    """How the log and progress bar name a warm start's rounds."""
    return "RFT" if cfg.warmstart_rft_labels == "own" else "DAgger"


def demonstrations(cfg, tokenizer, seed: int) -> list[tuple[list[int], list[int]]]:
    """``warmstart_examples`` demonstration episodes on training instances, as (token_ids, mask).

    They are played through ``rollout`` by a scripted policy that answers every turn with the
    task's demonstration answer (``cfg.warmstart_demos``: "format" is ``Task.demo``, for the
    Password Game a fresh ``gamerl.games.password_game.demo_password``, for Wordle a random
    answer word, for OpenSpiel a random legal move; "expert" is ``Task.expert_demo``, for the
    Password Game ``tasks.password_game.demos``: short passwords, then repairs; for Wordle
    ``tasks.wordle.solver.expert_guess``: two openers, then consistent answers), against the real game:
    so later turns see exactly the feedback messages a rollout shows, and the model learns to
    answer them in the same format (mask 1 = answer tokens, the only ones with a loss).

    An answer the demonstration marks as a ``ShownMistake`` (the expert's shown mistakes,
    ``warmstart_shown_mistakes``) is played and its feedback kept, but its tokens get mask 0:
    the model learns the repair that follows it, not the mistake."""
    from .evaluate import local_env_factory
    from ..games.base import ShownMistake
    from ..games.registry import get_task
    from .rollout import RolloutConfig, ScriptedPolicy, rollout

    task = get_task(cfg.task)
    rng = random.Random(seed)
    games = _draw_training_games(cfg, rng, cfg.warmstart_examples)
    make_demo = task.expert_demo if cfg.warmstart_demos == "expert" else task.demo
    answer = make_demo(cfg, rng)
    mistakes: set[tuple[int, int]] = set()  # (id of the episode, index of its turn)

    def play(ep) -> str:
        text = answer(ep)
        if isinstance(text, ShownMistake):
            mistakes.add((id(ep), len(ep.turns)))
        return text

    episodes = rollout(ScriptedPolicy(tokenizer, play), tokenizer, games,
                       local_env_factory(cfg), RolloutConfig.from_train_config(cfg))
    out = []
    for ep in episodes:
        mask = list(ep.policy_mask)
        for i, turn in enumerate(ep.turns):
            if (id(ep), i) in mistakes:  # ALGO LOGIC: no loss on a shown mistake
                first = turn.last_token - turn.n_tokens + 1
                mask[first:turn.last_token + 1] = [0] * turn.n_tokens
        out.append((ep.token_ids, mask))
    return out


def rejection_sampled(lm, tokenizer, cfg, round_index: int
                      ) -> tuple[list[tuple[list[int], list[int]]], dict[str, Any]]:
    """One round of rejection sampling: the model's own best episodes, as (token_ids, mask).

    ``lm`` plays ``warmstart_rft_episodes`` games on training instances (drawn, like the
    demonstrations', from the training seeds; another draw each round) with the run's sampling
    settings (temperature, top-k, top-p: what PPO's rollouts sample), against the real game.
    The episodes are ranked by return, the sum of the game's turn rewards; the first
    ``ceil(warmstart_rft_keep * n)`` are kept (ties: the earlier game first, so a round is
    reproducible). A kept episode's mask is its own answers, exactly as a rollout records them.

    Returns (kept, stats): stats holds the round's sample (its ``episode_metrics`` numbers:
    reward, success rate, the game's own), how many were kept, and the kept returns' lowest
    and mean, so a run's summary says what the filter chose from."""
    from .epoch import scalars
    from .evaluate import evaluate

    t0 = time.time()
    rng = random.Random(f"rft-{cfg.seed}-{round_index}")  # a draw of its own, not the SFT's
    games = _draw_training_games(cfg, rng, cfg.warmstart_rft_episodes)
    # played as an evaluation plays (sampled, no log-probs, its own torch seed), on these games;
    # the policy decodes in eval mode under no_grad and gives the LM back in the mode it found
    metrics, episodes = evaluate(lm, tokenizer, games, cfg,
                                 sample_seed=cfg.seed * 1000 + 777 + round_index,
                                 return_episodes=True)
    played = [ep for ep in episodes if not ep.lost and sum(ep.policy_mask)]
    n_keep = min(len(played), math.ceil(cfg.warmstart_rft_keep * len(played)))
    # sorted() is stable: equal returns keep the games' order
    kept = sorted(played, key=lambda ep: -ep.total_reward)[:n_keep]
    returns = [ep.total_reward for ep in kept]
    stats = {"round": round_index + 1, **scalars(metrics),
             "kept": len(kept),
             "kept_success_rate": sum(ep.success for ep in kept) / max(len(kept), 1),
             "kept_reward_min": min(returns) if returns else None,
             "kept_reward_mean": sum(returns) / len(returns) if returns else None,
             "seconds": time.time() - t0}
    return [(ep.token_ids, ep.policy_mask) for ep in kept], stats


def expert_relabeled(lm, tokenizer, cfg, round_index: int
                     ) -> tuple[list[tuple[list[int], list[int]]], dict[str, Any]]:
    """One round of DAgger (Ross, Gordon and Bagnell 2011): the expert's answers on the states
    the model reaches itself, as (token_ids, mask).

    The demonstrations show the expert on its own boards; the model plays from boards of its own
    making (a repeated, invalid or unfitting guess; a password that broke another rule), which
    no demonstration shows, so its errors compound. Here ``lm`` plays ``warmstart_rft_episodes``
    training games (drawn like ``rejection_sampled``'s, another draw each round) with the run's
    sampling settings, against the real game; before each of its turns after the first, the
    game's expert (``Task.expert_demo``, its shown mistakes off) answers the same state. Each
    such state is one example: the model's context up to that turn (mask 0), then the expert's
    answer closed with <|im_end|> (mask 1), tokenized as a ``ScriptedPolicy`` answer is. The
    first turn's state is the game's opening, the same as the demonstrations', so it is left
    to them; so is a state where the model's move was the expert's (``Task.extract`` of both
    equal): nothing to correct there, and such labels (Wordle's second opener, the same word
    in every game, a fifth of all labels) taught the model to say that word again after it
    (measured, docs/benchmarks.md).

    With ``warmstart_rft_labels="expert_likeliest"`` the expert's answer is not drawn at random
    from the answers it holds as good (``Task.expert_choices``: Wordle's answers consistent
    with every mark): of up to ``LIKELIEST_CANDIDATES`` of them (drawn when there are more) the
    label is the one ``lm`` gives the highest log-probability after that context
    (``answer_logprobs``): an answer the model is nearest to sampling, not a word it cannot
    spell yet. A state where the model's move was any of them is left out (``agreed``).

    Returns (labeled, stats): stats holds the round's sample (its ``episode_metrics``), the
    labeled states, those left out (``agreed``), the seconds, and with ``"expert_likeliest"``
    ``_likeliest_stats`` (answers scored per state, the labels' and the answers' log-probs)."""
    from .epoch import scalars
    from .evaluate import evaluate
    from ..games.base import ShownMistake
    from ..games.registry import get_task
    from ..models import IM_END
    from .rollout import encode

    t0 = time.time()
    task = get_task(cfg.task)
    rng = random.Random(f"dagger-{cfg.seed}-{round_index}")  # a draw of its own
    games = _draw_training_games(cfg, rng, cfg.warmstart_rft_episodes)
    likeliest = cfg.warmstart_rft_labels == "expert_likeliest"
    if likeliest:  # every answer the expert draws from
        answers_of = task.expert_choices(cfg)
    else:  # the one it draws
        expert = task.expert_demo(cfg.replace(warmstart_shown_mistakes=0.0), rng)
        answers_of = lambda ep: [expert(ep)]  # noqa: E731
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    # (episode, turn, context, the expert's answers: one, or with "expert_likeliest" all it
    # draws from)
    states: list[tuple[Any, int, list[int], list[str]]] = []

    def label(episodes) -> None:  # ALGO LOGIC: the expert's answer to the model's own state
        for ep in episodes:
            if ep.turns:
                texts = answers_of(ep)
                assert not any(isinstance(t, ShownMistake) for t in texts)  # off above
                states.append((ep, len(ep.turns), list(ep.token_ids), texts))

    metrics, _ = evaluate(lm, tokenizer, games, cfg, return_episodes=True, before_turn=label,
                          sample_seed=cfg.seed * 1000 + 555 + round_index)
    labeled: list[tuple[list[int], list[int]]] = []
    scored: list[list[float]] = []  # with a choice: the log-probabilities of its answers
    answer_ids = lambda text: encode(tokenizer, text) + [im_end]  # noqa: E731 (a ScriptedPolicy's)
    for ep, turn, context, texts in states:
        if turn < len(ep.turns) and ep.turns[turn].action in {task.extract(t) for t in texts}:
            continue  # ALGO LOGIC: the model moved as the expert would: nothing to correct
        if len(texts) > 1:  # ALGO LOGIC: of the expert's equal answers, the model's likeliest
            answer, logprobs = _likeliest(lm, context, texts, answer_ids, rng,
                                          tokenizer.pad_token_id)
            scored.append(logprobs)
        else:
            answer = answer_ids(texts[0])
        labeled.append((context + answer, [0] * len(context) + [1] * len(answer)))
    stats = {"round": round_index + 1, **scalars(metrics), "labeled": len(labeled),
             "agreed": len(states) - len(labeled), "seconds": time.time() - t0}
    if likeliest:
        stats.update(_likeliest_stats(scored))
    return labeled, stats


def _likeliest_stats(scored: list[list[float]]) -> dict[str, Optional[float]]:
    """``expert_relabeled``'s stats of the states with a choice (``scored``: each one's
    answers' log-probabilities): the answers scored, the chosen's and the answers' mean
    log-probability, each a mean over the states (None without any)."""
    def mean(values: list[float]) -> Optional[float]:
        return sum(values) / len(values) if values else None

    return {"choices_scored": mean([len(lp) for lp in scored]),
            "label_logprob": mean([max(lp) for lp in scored]),
            "choice_logprob": mean([mean(lp) for lp in scored])}


# Answers scored per state by "expert_likeliest" labels, at most: each is a row of one pass
# that repeats the context's key/value cache (``prefix_share``), so memory grows with it.
LIKELIEST_CANDIDATES = 32


def _likeliest(lm, context: list[int], texts: list[str],
               answer_ids: Callable[[str], list[int]], rng: random.Random, pad_id: int
               ) -> tuple[list[int], list[float]]:
    """(the token ids of the answer of highest log-probability after ``context``, the
    log-probabilities scored): of up to ``LIKELIEST_CANDIDATES`` of the answers ``texts``,
    drawn with ``rng`` when there are more; a tie goes to the first in ``texts``' order. Only
    the drawn answers are tokenized (``answer_ids``): hundreds of words can fit the marks."""
    picks = sorted(rng.sample(range(len(texts)), min(len(texts), LIKELIEST_CANDIDATES)))
    answers = [answer_ids(texts[i]) for i in picks]
    logprobs = answer_logprobs(lm, context, answers, pad_id)
    best = max(range(len(picks)), key=lambda k: logprobs[k])
    return answers[best], logprobs


@torch.no_grad()
def answer_logprobs(lm, context: list[int], answers: list[list[int]], pad_id: int
                    ) -> list[float]:
    """log p(answer | context) under ``lm`` of each answer (token ids), summed over its tokens.
    The answers go in one pass (``_pass_logits``) whose rows share the context, run once
    (``prefix_share``); ``lm`` in eval mode for it, then back in the mode it was in."""
    was_training = lm.training
    lm.eval()
    try:
        logits, targets = _pass_logits(
            lm, [(context + a, [0] * len(context) + [1] * len(a)) for a in answers], pad_id,
            None, None)
    finally:
        lm.train(was_training)
    # the answer positions come row by row, each row's in order (a boolean index, row-major)
    token_logprobs = logits.log_softmax(-1).gather(1, targets[:, None])[:, 0]
    return [float(x.sum()) for x in token_logprobs.split([len(a) for a in answers])]


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
    if split is None:
        hidden = trunk_hidden(lm_trunk(lm), ids, attn, share=True)[:, :-1]
    else:
        if bottoms is None:
            with torch.no_grad():
                bottom = trunk_hidden(split.bottom, ids, attn, share=True)
        else:  # right padded like ids; the pads' states are never attended to
            bottom = torch.nn.utils.rnn.pad_sequence(bottoms, batch_first=True)
        hidden = split.top_states(bottom, attn)[:, :-1]
    sel = labels[:, 1:] != -100  # the LM head only where there is a label (answers are short)
    return lm.get_output_embeddings()(hidden[sel]).float(), labels[:, 1:][sel]


def sft_loss(lm, batch: list[tuple[list[int], list[int]]], pad_id: int,
             split=None, bottoms: Optional[list[torch.Tensor]] = None) -> torch.Tensor:
    """Mean cross-entropy over the answer tokens (mask 1) of a batch (``answer_logits``)."""
    return F.cross_entropy(*answer_logits(lm, batch, pad_id, split, bottoms))


def exact_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """Mean over positions of KL(pi || pi_ref), summed over the whole vocabulary (not a sampled
    estimate: both distributions are at hand). ``logits``, ``ref_logits``: ``[N, V]``; a scalar.

    The direction is the one PPO's KL penalty takes (reverse, mode-seeking): moving mass off
    what the reference prefers costs, dropping what it samples that the demonstrations never
    write (chatter, emoji) costs only the log of the mass kept."""
    logp = F.log_softmax(logits.float(), dim=-1)
    ref_logp = F.log_softmax(ref_logits.float(), dim=-1)
    return (logp.exp() * (logp - ref_logp)).sum(-1).mean()


def sft_kl_loss(lm, reference, batch: list[tuple[list[int], list[int]]], pad_id: int,
                kl_coef: float, split=None, reference_split=None,
                bottoms: Optional[list[torch.Tensor]] = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(loss, cross_entropy, kl)``: ``sft_loss``'s cross-entropy plus ``kl_coef`` times the
    exact KL(pi || reference) at the same answer positions (``warmstart_kl_coef``). The
    reference is the model as the warm start found it, frozen; with a split trunk its bottom is
    the policy's (frozen, the same weights), so only its top layers run here."""
    if split is not None and bottoms is None:  # the bottom once, for both tops
        bottoms = frozen_bottoms(lm, split, batch, pad_id)
    logits, targets = answer_logits(lm, batch, pad_id, split, bottoms)
    with torch.no_grad():
        ref_logits, _ = answer_logits(reference, batch, pad_id, reference_split, bottoms)
    ce = F.cross_entropy(logits, targets)
    kl = exact_kl(logits, ref_logits)
    return ce + kl_coef * kl, ce, kl


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


def _same_settings(marker: Any, cfg) -> bool:
    """Whether ``cfg`` has every setting of a warm start's ``marker`` at the value it had."""
    from ..config.train_config import SETTING_SECTION

    return (isinstance(marker, dict) and bool(marker)
            and all(name in SETTING_SECTION and _setting(cfg, name) == value
                    for name, value in marker.items()))


def _save_progress(path: Path, cfg, lm, optimizer, rng: random.Random, losses: list[float],
                   seconds: float, rounds: list[dict[str, Any]], kls: list[float]) -> None:
    """Everything the loop needs to continue at step ``len(losses)``, sealed: with the
    rejection-sampling rounds so far (``rounds``: each one's stats and kept episodes, minutes of
    play that a resume must not redo differently) and the steps' KL to the reference (``kls``,
    empty without ``warmstart_kl_coef``)."""
    version, internal, gauss = rng.getstate()

    def write(tmp: Path) -> None:
        save_model(lm, str(tmp / WEIGHTS_FILE))  # safetensors; handles tied embeddings
        torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        (tmp / PROGRESS_FILE).write_text(json.dumps(
            {"settings": cfg.marker(), "losses": losses, "seconds": seconds,
             "sampler": [version, list(internal), gauss], "rft_rounds": rounds,
             "kls": kls}) + "\n")

    atomic_write_dir(path, write)


def _load_progress(path: Path, cfg, lm, optimizer, rng: random.Random
                   ) -> tuple[list[float], float, list[dict[str, Any]], list[float]]:
    """Restore a warm-start checkpoint into ``lm``, ``optimizer`` and ``rng``; returns (losses,
    seconds, rejection-sampling rounds, KLs) so far, or ([], 0.0, [], []) when there is none for
    these settings (then it starts over, and the next save replaces what was there)."""
    try:
        if find_checkpoint(path) is None:
            return [], 0.0, [], []
        data = json.loads((path / PROGRESS_FILE).read_text())
    except (CheckpointError, OSError, ValueError) as e:
        log.warning("warm start: not continuing from %s (%s); starting over", path, e)
        return [], 0.0, [], []
    if not _same_settings(data.get("settings"), cfg):
        log.warning("warm start: %s was made with other settings; starting over", path)
        return [], 0.0, [], []
    cfg.read.update(data["settings"])  # what the steps before the kill read
    load_model(lm, str(path / WEIGHTS_FILE))
    optimizer.load_state_dict(load_tensors(path / OPTIMIZER_FILE))
    version, internal, gauss = data["sampler"]
    rng.setstate((version, tuple(internal), gauss))
    return (list(data["losses"]), float(data["seconds"]), list(data.get("rft_rounds", [])),
            list(data.get("kls", [])))


def _play_round(lm, tokenizer, cfg, r: int) -> dict[str, Any]:
    """Round ``r``'s games (``rejection_sampled``, or ``expert_relabeled`` with
    ``warmstart_rft_labels="expert"`` or ``"expert_likeliest"``) as the progress checkpoint
    keeps them:
    {"stats", "episodes": [[token_ids, mask], ...]}."""
    if cfg.warmstart_rft_labels != "own":
        labeled, stats = expert_relabeled(lm, tokenizer, cfg, r)
        if not labeled:
            raise RuntimeError(f"warm start: DAgger round {r + 1} has no state to label (every "
                               "game ended at its first turn)")
        log.info("warm start: DAgger round %d: %d of the model's states labeled by the expert, "
                 "%d where it moved as the expert left out (its %d games: reward %.2f, success "
                 "%.1f%%) in %.0fs", r + 1, len(labeled), stats["agreed"], stats["episodes"],
                 stats["reward"], 100 * stats["success_rate"], stats["seconds"])
        return {"stats": stats, "episodes": [[ids, mask] for ids, mask in labeled]}
    kept, stats = rejection_sampled(lm, tokenizer, cfg, r)
    if not kept:
        raise RuntimeError(f"warm start: rejection-sampling round {r + 1} kept no episode "
                           "(every game was lost or had no answer)")
    log.info("warm start: RFT round %d: %d of %d games kept (return >= %.2f; the sample's mean "
             "%.2f, success %.1f%%) in %.0fs", r + 1, stats["kept"], stats["episodes"],
             stats["kept_reward_min"], stats["reward"], 100 * stats["success_rate"],
             stats["seconds"])
    return {"stats": stats, "episodes": [[ids, mask] for ids, mask in kept]}


def _sft_step(lm, optimizer, params, batch, pad_id: int, split, bottoms,
              reference=None) -> tuple[float, Optional[float]]:
    """One optimizer step on ``batch`` (loss on the answers, gradient clipped at 1); its
    cross-entropy, and its KL to the reference when ``reference`` is ``(model, split, coef)``
    (``warmstart_kl_coef`` > 0; else None)."""
    from .epoch import deterministic_backward

    with deterministic_backward(lm.device):  # the update's order fixed (epoch.py)
        if reference is None:
            loss = ce = sft_loss(lm, batch, pad_id, split, bottoms)
            kl = None
        else:
            ref_lm, ref_split, coef = reference
            loss, ce, kl = sft_kl_loss(lm, ref_lm, batch, pad_id, coef, split, ref_split,
                                       bottoms)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    return ce.item(), None if kl is None else kl.item()


def _warm_start_stats(cfg, losses: list[float], rounds: list[dict[str, Any]], seconds: float,
                      kls: list[float]) -> dict[str, Any]:
    """What ``warm_start`` returns: the demonstration steps' first and last losses (means of up
    to 10; the cross-entropy alone; none without demonstration steps), the seconds and steps,
    each round's stats with its own steps' losses, and with ``warmstart_kl_coef`` the
    demonstration steps' first and last KL to the model as it came (``kl_first``,
    ``kl_last``)."""
    def ends(values: list[float], name: str = "loss") -> dict[str, float]:
        if not values:  # no such steps: nothing to report (not a mean of nothing read as 0)
            return {}
        k = min(10, len(values))
        return {f"{name}_first": sum(values[:k]) / k, f"{name}_last": sum(values[-k:]) / k}

    stats = {**ends(losses[:cfg.warmstart_steps]), "seconds": seconds, "steps": len(losses),
             **ends(kls[:cfg.warmstart_steps], "kl")}
    if rounds:
        for i, rnd in enumerate(rounds):
            start = cfg.warmstart_steps + i * cfg.warmstart_rft_steps
            rnd["stats"].update(ends(losses[start:start + cfg.warmstart_rft_steps]))
        stats["rft"] = [rnd["stats"] for rnd in rounds]
    return stats


def warm_start(lm, tokenizer, cfg, out_dir: str | Path, progress: bool = False) -> dict[str, Any]:
    """Fine-tune ``lm`` in place on demonstrations (``warmstart_steps``), then on its own best
    episodes (``warmstart_rft_rounds`` rounds of ``warmstart_rft_steps``: ``rejection_sampled``),
    and save it to ``out_dir`` (atomically), continuing from ``warmstart_progress`` beside it
    when a previous attempt was killed. Returns {"loss_first", "loss_last", "seconds", "steps"}
    (seconds over all attempts; losses of the demonstration steps), with "rft" (each round's
    stats, and its last steps' loss) when there were rounds."""
    from ..progress import tqdm

    out_dir = Path(out_dir)
    progress_dir = out_dir.parent / PROGRESS_DIR
    t0 = time.time()
    cfg = SettingsRead(cfg)  # the settings it reads are its cache's key
    examples = demonstrations(cfg, tokenizer, seed=cfg.seed)
    rng = random.Random(cfg.seed + 1)
    split, reference = _trainable_part(lm, cfg)
    pad_id = tokenizer.pad_token_id
    params = [p for p in lm.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.warmstart_lr, weight_decay=0.0)
    losses, seconds_before, rounds, kls = _load_progress(progress_dir, cfg, lm, optimizer, rng)
    if losses:
        log.info("warm start: continuing at step %d of %d from %s", len(losses),
                 cfg.warmstart_steps, progress_dir)
    total = cfg.warmstart_steps + cfg.warmstart_rft_rounds * cfg.warmstart_rft_steps
    pool_round, pool, bottoms = None, [], None  # what the steps sample from, and which round's
    lm.train()
    bar = tqdm(range(len(losses), total), desc="warm start (SFT)",
               disable=not progress, mininterval=1.0, leave=False, initial=len(losses),
               total=total)
    saved_at, save_cost = time.time(), 0.0
    for step in bar:
        # the demonstrations first; then round r's own best episodes (sampled when it begins)
        r = (-1 if step < cfg.warmstart_steps
             else (step - cfg.warmstart_steps) // cfg.warmstart_rft_steps)
        if r == len(rounds):
            rounds.append(_play_round(lm, tokenizer, cfg, r))
            bar.set_description(f"warm start ({_round_name(cfg)} round {r + 1})")
            t_save = time.time()  # minutes of play: saved now, whatever the clock says
            _save_progress(progress_dir, cfg, lm, optimizer, rng, losses,
                           seconds_before + t_save - t0, rounds, kls)
            saved_at, save_cost = time.time(), time.time() - t_save
        if pool_round != r:  # the pool changes: demonstrations, then each round's
            pool_round = r
            pool = _step_pool(cfg, examples, rounds, r)
            bottoms = frozen_bottoms(lm, split, pool, pad_id) if split else None
        # indices: rng.sample draws the same positions from range(n) as from the list itself
        picks = rng.sample(range(len(pool)), min(cfg.warmstart_batch_size, len(pool)))
        loss, kl = _sft_step(lm, optimizer, params, [pool[i] for i in picks], pad_id, split,
                             None if bottoms is None else [bottoms[i] for i in picks], reference)
        losses.append(loss)
        if kl is not None:
            kls.append(kl)
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        # Every warmstart_checkpoint_seconds, but at most ~10% of the time on saving (a
        # Qwen3-0.6B save writes weights and AdamW state, seconds each time).
        every = cfg.warmstart_checkpoint_seconds
        if time.time() - saved_at >= (max(every, 9 * save_cost) if every > 0 else 0):
            t_save = time.time()
            _save_progress(progress_dir, cfg, lm, optimizer, rng, losses,
                           seconds_before + t_save - t0, rounds, kls)
            saved_at = time.time()
            save_cost = saved_at - t_save
    lm.eval()
    stats = _warm_start_stats(cfg, losses, rounds, seconds_before + time.time() - t0, kls)
    _save_result(lm, tokenizer, cfg, stats, out_dir, progress_dir)
    return stats


def _step_pool(cfg, examples: list, rounds: list[dict[str, Any]], r: int
               ) -> list[tuple[list[int], list[int]]]:
    """What round ``r``'s steps draw from (r = -1: the demonstration steps'): the demonstrations
    ``examples``; then RFT's round r's kept games alone, DAgger's every round's labels so far
    (its aggregate); with ``warmstart_rft_with_demos`` either with the demonstrations too."""
    if r < 0:
        return examples
    since = r if cfg.warmstart_rft_labels == "own" else 0
    return ((examples if cfg.warmstart_rft_with_demos else [])
            + [(ids, mask) for rnd in rounds[since:r + 1] for ids, mask in rnd["episodes"]])


def _trainable_part(lm, cfg):
    """``(split, reference)`` of a warm start: the split trunk when only the top
    ``trainable_layers`` train (the same layers as PPO will, unless ``warmstart_all_layers``;
    the rest frozen here), and with ``warmstart_kl_coef`` the KL reference ``(model, its
    split, coef)``: the model as it came, copied before a resume loads its progress into
    ``lm``."""
    from ..models import SplitTrunk, freeze_below_top_layers, load_reference

    split = reference = None
    n_top = warm_start_layers(cfg)
    if n_top:
        freeze_below_top_layers(lm, n_top)
        split = SplitTrunk.of(lm, n_top)
    if cfg.warmstart_kl_coef:  # ALGO LOGIC: the model as it came, frozen, before any step
        ref_lm = load_reference(lm)
        reference = (ref_lm, SplitTrunk.of(ref_lm, n_top) if split else None,
                     cfg.warmstart_kl_coef)
    return split, reference


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
    else:  # only rounds (a model warm-started before, given as ``model``)
        log.info("warm start: no demonstration steps; %d steps in %.1fs", stats["steps"],
                 stats["seconds"])
    if "kl_first" in stats:
        log.info("warm start: KL to the model as it came %.3f -> %.3f (coefficient %g)",
                 stats["kl_first"], stats["kl_last"], cfg.warmstart_kl_coef)
    for rnd in stats.get("rft", []):
        log.info("warm start: %s round %d: loss %.3f -> %.3f", _round_name(cfg), rnd["round"],
                 rnd["loss_first"], rnd["loss_last"])


def cached_warm_start(cfg, out_dir: str | Path) -> Optional[dict[str, Any]]:
    """The stats of a finished warm start in ``out_dir`` made with the same settings, else None.
    The directory is recovered and checked first (gamerl.runs.checkpoint.find_checkpoint: call it
    holding the run's lock); a damaged one raises CheckpointError."""
    if find_checkpoint(out_dir) is None:
        return None
    data = json.loads((Path(out_dir) / MARKER).read_text())
    return data["stats"] if _same_settings(data.get("settings"), cfg) else None


__all__ = ["PROGRESS_DIR", "SettingsRead", "answer_logits", "answer_logprobs", "cached_warm_start",
           "demonstrations", "exact_kl", "expert_relabeled", "frozen_bottoms", "rejection_sampled",
           "sft_kl_loss", "sft_loss", "warm_start", "warm_start_layers"]
