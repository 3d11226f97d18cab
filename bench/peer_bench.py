"""Peer benchmark: our trainer (gamerl, GRPO) against TRL's ``GRPOTrainer`` on the same work.

    python bench/peer_bench.py                          # smollm2-135m, fp32, CPU
    python bench/peer_bench.py --model tiny             # the embedded 0.26M model
    python bench/peer_bench.py --quick                  # a smoke run (tiny, 2 steps; tests/test_peer_bench.py)
    python bench/peer_bench.py --json bench/results/peer_bench_cpu.json

One invocation runs the two trainers one after the other, each in its own subprocess (so each
side's peak RSS is its own, and neither warms the other's caches), and prints, for each: wall time
per optimizer step, generated tokens/s, trained tokens/s and peak RSS; then the ratios, ending with

    peer ratio (TRL time per step / ours): single-turn X.XX, multi-turn Y.YY

(``n/a`` where a row could not run; the reason is printed above that line).

What is matched (both sides get the same values from one TrainConfig, ``bench_config``):
* the model and its weights (``gamerl.models.load_policy``: fp32 on CPU, the same attention
  implementation; TRL gets the loaded model object, not a name), the tokenizer, and the stop
  tokens (<|im_end|> and <|endoftext|>: ``gamerl.core.rollout.stop_token_ids``, set as the model's
  generation_config.eos_token_id, which TRL reads);
* the prompts: the Password Game's first observation for the same training seeds
  (``gamerl.core.trainer.epoch_seeds``, in the same order: TRL's ``shuffle_dataset=False``) with the
  task's system prompt, rendered by the model's chat template (TRL renders the same messages
  itself; the TRL child checks that its prompt token ids equal ours and says so);
* the group size (TRL ``num_generations``), the completions per generation round
  (prompts x group size: our ``episodes_per_epoch``, TRL's ``generation_batch_size``),
  ``max_new_tokens`` (TRL ``max_completion_length``), sampling (temperature 0.7, top-p 0.9,
  top-k 50);
* optimizer steps: each round generates prompts x group completions once and takes
  ``--ppo-epochs`` optimizer steps on the whole batch. Ours: ``minibatch_size`` = the batch,
  ``ppo_epochs`` = K. TRL: ``per_device_train_batch_size`` = the batch,
  ``gradient_accumulation_steps=1``, ``steps_per_generation=1``, ``num_iterations`` = K. So
  both take the same number of optimizer steps over the same number of completions;
* the objective's settings: clipped ratio (0.2), token-mean loss over the batch (TRL's
  ``loss_type="dapo"``), group-normalised advantages (TRL's ``scale_rewards="group"``), KL to the
  frozen reference as a k3 loss term with the same coefficient (TRL's ``beta``; > 0 so both run a
  reference model), AdamW at a constant learning rate (TRL: ``optim="adamw_torch"``,
  ``lr_scheduler_type="constant"``), gradient clipping at 1.0, no gradient checkpointing
  (TRL's default is on), fp32 (``bf16=False``);
* the reward: the game's score of the password in the completion (``extract_password``, then
  ``LocalPasswordGameEnv.reset(seed)`` / ``submit``), the same code on both sides;
* the threads: ``torch.set_num_threads(--threads)`` in both subprocesses.

What is not the same, by design of each trainer (this is what the benchmark measures):
ours scores under the sampling's top-k/top-p support and runs the trunk once over the prompt a
group shares (``gamerl.core.prefix_share``); ours always scores the batch (old log-probs and values, the
reference's log-probs) in a no-grad pass before the update, while TRL with ``--ppo-epochs 1``
(``num_iterations=1``) takes the old log-probs from its update pass (the ratio is 1 by
construction) and runs no such pass: at the default ``--ppo-epochs 1`` our time per step
carries one policy forward over the batch that TRL's does not (before 2026-12-07 ours skipped
it too, ``scores_in_update``: the git tag ``experiments-2026-12``); with ``--ppo-epochs`` 2 or
more, the presets' 2-4, both sides score first. Random streams differ, so completions and their
lengths differ; tokens/s normalise for that.

Definitions: time per optimizer step = the timed rounds' wall time / their optimizer steps (a
round: generate, score, reward, advantages, update). Generated tokens/s = completion tokens /
generation time (ours: the rollout, game calls included; TRL: its ``_generate``, prompt
tokenisation and decoding included). Trained tokens/s = the real (non-pad) tokens of the
sequences the update passes run over, prompt and completion, once per pass / the rest of the
round's time (scoring, rewards, advantages, forward, backward, optimizer). Peak RSS: the
subprocess's ``ru_maxrss`` (model load included). ``--warmup`` rounds run first on both sides
and are not timed.

Multi-turn: TRL plays multi-turn games through ``environment_factory``, whose public methods
become tools the model calls (a submit tool here). Whether that runs is found out by trying it,
in its own subprocess; the output says why when it does not (see ``MULTI_TURN_NOTE``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory's warning
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
RATIO_PREFIX = "peer ratio (TRL time per step / ours):"

# What we learnt about TRL 1.16's environment_factory from its source (trainer/grpo_trainer.py,
# chat_template_utils.py), printed when the multi-turn TRL row cannot run.
MULTI_TURN_NOTE = """\
  TRL's environment_factory does not need vLLM: its tool loop (_tool_call_loop) regenerates with
  the same _generate_single_turn as single-turn training, which has a plain transformers
  generate() path that runs on CPU. What it needs is tool calling: every public method of the
  environment becomes a tool, and a turn happens only when the model writes a tool call that the
  tokenizer's response parser reads. GRPOTrainer therefore refuses a tokenizer whose chat template
  cannot render tool calls (supports_tool_calling), and parses calls only for the templates it
  knows (add_response_schema: Qwen2.5/3, Llama 3.1/3.2, GLM-4, gpt-oss, ...). SmolLM2-135M-
  Instruct's template and the tiny model's are neither. Swapping in a tool template would change
  the prompts (the tool schema joins the system prompt: no longer the same work), and a model
  that never writes a tool call never plays the game at all: with TRL's Qwen3 template on the
  tiny model it ran on CPU but made 0 tool calls, so every reward was 0 (docs/benchmarks.md).
  So no multi-turn row is measured."""


# ----------------------------------------------------------------------------- shared setup


def bench_config(args, turns: int):
    """The one TrainConfig both sides read their settings from (module docstring)."""
    from gamerl.config import get_config

    batch = args.prompts * args.group_size
    # The tiny preset's game (6 rules, delta rewards: an episode's return is its final score);
    # every other field below is what the comparison matches or switches off.
    return get_config(
        "tiny", model=args.model, device="cpu", dtype="float32", warmstart=False,
        max_steps=turns, max_new_tokens=args.max_new_tokens, max_context_tokens=2048,
        temperature=0.7, top_p=0.9, top_k=50,
        advantage_estimator="grpo", group_size=args.group_size, episodes_per_epoch=batch,
        minibatch_size=batch, micro_batch_size=None, score_batch_size=batch,
        ppo_epochs=args.ppo_epochs, clip_range=0.2,  # token-mean loss, k3 KL: the trainer's only
        kl_coef=args.kl_coef, lr=args.lr,  # AdamW without weight decay, eps 1e-8
        max_grad_norm=1.0, entropy_coef=0.0, reward_scale=1.0, gradient_checkpointing=False,
        seed=args.seed, wandb_mode="disabled", progress=False)


def round_seeds(cfg, rounds: int) -> list[list[int]]:
    """Each round's game seeds, one per prompt (our epoch_seeds repeats each group_size times)."""
    from gamerl.core.epoch import epoch_seeds

    return [epoch_seeds(cfg, r)[::cfg.group_size] for r in range(rounds)]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@dataclass
class Record:
    """One optimizer step (TRL) or one round (ours) and what happened in it."""

    optimizer_steps: int
    seconds: float = 0.0
    gen_seconds: float = 0.0
    gen_tokens: int = 0
    trained_tokens: int = 0
    completions: int = 0
    reward_sum: float = 0.0
    turns_sum: int = 0


def summarize(records: list[Record], warmup_steps: int) -> dict:
    """Totals over the timed records (the first ``warmup_steps`` optimizer steps are not)."""
    seen, timed = 0, []
    for r in records:
        if seen >= warmup_steps:
            timed.append(r)
        seen += r.optimizer_steps
    tot = {k: sum(getattr(r, k) for r in timed) for k in Record.__dataclass_fields__}
    rest = tot["seconds"] - tot["gen_seconds"]
    return {**tot, "timed_records": len(timed),
            "seconds_per_step": tot["seconds"] / max(tot["optimizer_steps"], 1),
            "gen_tokens_per_s": tot["gen_tokens"] / tot["gen_seconds"] if tot["gen_seconds"] else 0.0,
            "trained_tokens_per_s": tot["trained_tokens"] / rest if rest > 0 else 0.0,
            "mean_reward": tot["reward_sum"] / max(tot["completions"], 1),
            "mean_turns": tot["turns_sum"] / max(tot["completions"], 1),
            "mean_completion_tokens": tot["gen_tokens"] / max(tot["completions"], 1)}


def load_model(args):
    import torch

    from gamerl.models import load_policy

    lm, tok = load_policy(args.model, device="cpu", dtype=torch.float32)
    return lm, tok


# ----------------------------------------------------------------------------- our trainer


def run_ours(args, turns: int) -> dict:
    """Our trainer's loop body (Trainer.train_epoch without the logging): collect, advantages,
    update, once per round."""
    from gamerl.core.evaluate import local_env_factory
    from gamerl.models import PolicyWithValue, load_reference
    from gamerl.core.epoch import (collect, compute_advantages, make_optimizer, ppo_update,
                                   seed_everything)

    cfg = bench_config(args, turns)
    seed_everything(cfg.seed)
    lm, tok = load_model(args)
    policy, ref = PolicyWithValue(lm), load_reference(lm)
    optimizer = make_optimizer(policy, cfg)
    make_env = local_env_factory(cfg)
    records = []
    for r, games in enumerate(round_seeds(cfg, args.warmup + args.rounds)):
        instances = [g for g in games for _ in range(cfg.group_size)]
        t0 = time.perf_counter()
        batch = collect(policy, ref, tok, instances, make_env, cfg)
        compute_advantages(batch, cfg)
        stats = ppo_update(policy, optimizer, batch, cfg)
        seconds = time.perf_counter() - t0
        records.append(Record(
            optimizer_steps=int(stats["optimizer_steps"]), seconds=seconds,
            gen_seconds=batch.rollout_seconds, gen_tokens=int(batch.mask.sum()),
            trained_tokens=int(batch.attention_mask.sum()) * cfg.ppo_epochs,
            completions=len(batch.episodes),
            reward_sum=sum(ep.total_reward for ep in batch.episodes),
            turns_sum=sum(len(ep.turns) for ep in batch.episodes)))
    return {"records": [asdict(r) for r in records],
            "summary": summarize(records, args.warmup * cfg.ppo_epochs)}


# ----------------------------------------------------------------------------- TRL


class PasswordGameTools:
    """One Password Game episode for TRL's ``environment_factory``: ``submit_password`` is the
    tool the model calls once per turn; ``get_reward`` is the episode's return (delta rewards:
    its final score), which TRL adds as a reward source."""

    def __init__(self, game_config, max_turns: int, feedback: str):
        from tasks.password_game import LocalPasswordGameEnv

        self._env = LocalPasswordGameEnv(game_config)
        self._max_turns, self._feedback = max_turns, feedback
        self._reward, self._turns, self._done = 0.0, 0, True

    def reset(self, **row) -> None:
        self._env.reset(int(row["seed"]))
        self._reward, self._turns, self._done = 0.0, 0, False
        return None  # the first observation is already the prompt's user message

    def submit_password(self, password: str) -> str:
        """Submit a password to the Password Game and get the game's feedback on it.

        Args:
            password: The password to submit.

        Returns:
            Which rules the password satisfies and which new rules were revealed.
        """
        from gamerl.games.password_game import feedback_message

        if self._done:
            return "The game is over."
        obs, reward, done, info = self._env.submit(password)
        self._turns += 1
        self._reward += float(reward)
        self._done = done or self._turns >= self._max_turns
        return feedback_message(obs, info, password, self._feedback)

    def get_reward(self) -> float:
        return self._reward


def run_trl(args, turns: int) -> dict:
    """TRL's GRPOTrainer on the same prompts, settings and step count (module docstring)."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from gamerl.core.evaluate import local_env_factory
    from gamerl.games import get_task
    from gamerl.models import chat_prompt
    from gamerl.core.rollout import encode, first_messages, stop_token_ids
    from gamerl.core.epoch import seed_everything

    cfg = bench_config(args, turns)
    seed_everything(cfg.seed)
    task = get_task(cfg.task)
    make_env = local_env_factory(cfg)
    lm, tok = load_model(args)
    # Our rollout stops on <|im_end|> and <|endoftext|>; TRL stops on the model's
    # generation_config.eos_token_id (plus the tokenizer's eos): give it the same list.
    lm.generation_config.eos_token_id = stop_token_ids(lm, tok)
    system = cfg.effective_system_prompt()
    rows, expected_prompts = [], set()
    for games in round_seeds(cfg, args.warmup + args.rounds):
        for seed in games:
            messages = first_messages(make_env().reset(seed), system)
            rows.append({"prompt": messages, "seed": seed})
            expected_prompts.add(tuple(encode(tok, chat_prompt(tok, messages))))
    batch = args.prompts * args.group_size
    total_steps = (args.warmup + args.rounds) * args.ppo_epochs
    records: list[Record] = []

    class TimedGRPOTrainer(GRPOTrainer):
        """GRPOTrainer with counters around two of its methods; behaviour unchanged.
        ``_generate`` is private API (pinned: trl==1.16.0 in the bench extra)."""

        prompt_mismatches = 0

        def _generate(self, prompts):
            t0 = time.perf_counter()
            out = super()._generate(prompts)
            prompt_ids, completion_ids, tool_mask = out[0], out[1], out[2]
            rec = records[-1]
            rec.gen_seconds += time.perf_counter() - t0
            rec.gen_tokens += (sum(map(sum, tool_mask)) if tool_mask is not None
                               else sum(map(len, completion_ids)))
            rec.completions += len(completion_ids)
            self.prompt_mismatches += sum(tuple(p) not in expected_prompts for p in prompt_ids)
            return out

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            records[-1].trained_tokens += int(inputs["prompt_mask"].sum() + inputs["completion_mask"].sum())
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *a, **k):
            records.append(Record(optimizer_steps=1))
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            records[-1].seconds = time.perf_counter() - self.t0

    def game_reward(completions, seed, **kwargs) -> list[float]:
        """The game's score of the password in each completion (the same code as our rollout)."""
        out = []
        for completion, s in zip(completions, seed):
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            env = make_env()
            env.reset(int(s))
            _, reward, _, _ = env.submit(task.extract(text))
            out.append(float(reward))
        rec = records[-1]
        rec.reward_sum += sum(out)
        rec.turns_sum += len(out)
        return out

    def env_reward(environments, **kwargs) -> list[float]:  # multi-turn: counts turns too
        rec = records[-1]
        rewards = [e.get_reward() for e in environments]
        rec.reward_sum += sum(rewards)
        rec.turns_sum += sum(e._turns for e in environments)
        return rewards

    out_dir = tempfile.mkdtemp(prefix="peer_bench_trl_")
    config = GRPOConfig(
        output_dir=out_dir, use_cpu=True, report_to=[], bf16=False, fp16=False,
        seed=cfg.seed, max_steps=total_steps, learning_rate=cfg.lr,
        lr_scheduler_type="constant", warmup_steps=0, optim="adamw_torch",
        weight_decay=0.0, adam_epsilon=1e-8, max_grad_norm=cfg.max_grad_norm,  # as ours
        per_device_train_batch_size=batch, gradient_accumulation_steps=1, steps_per_generation=1,
        num_iterations=cfg.ppo_epochs, num_generations=cfg.group_size,
        # Multi-turn: TRL's budget is for the whole conversation, ours is per turn.
        max_completion_length=cfg.max_new_tokens * turns,
        temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
        beta=cfg.kl_coef, epsilon=cfg.clip_range, loss_type="dapo", scale_rewards="group",
        gradient_checkpointing=False, shuffle_dataset=False,
        chat_template_kwargs={"enable_thinking": False},  # what gamerl.models.chat_prompt passes
        max_tool_calling_iterations=turns if turns > 1 else None,
        logging_strategy="no", save_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
    kwargs = dict(model=lm, args=config, train_dataset=Dataset.from_list(rows),
                  processing_class=tok, callbacks=[StepTimer()])
    if turns > 1:
        kwargs.update(reward_funcs=[env_reward],
                      environment_factory=lambda: PasswordGameTools(cfg.game_config(), turns,
                                                                    cfg.feedback))
    else:
        kwargs.update(reward_funcs=[game_reward])
    try:
        trainer = TimedGRPOTrainer(**kwargs)
    except (ValueError, ImportError, NotImplementedError) as e:
        shutil.rmtree(out_dir, ignore_errors=True)
        return {"error": f"GRPOTrainer(...) raised {type(e).__name__}: {e}"}
    try:
        trainer.train()
    finally:  # save_strategy="no": nothing of value is written there
        shutil.rmtree(out_dir, ignore_errors=True)
    return {"records": [asdict(r) for r in records],
            "summary": summarize(records, args.warmup * cfg.ppo_epochs),
            "prompt_mismatches": trainer.prompt_mismatches,
            "optimizer_steps_total": trainer.state.global_step,
            "trl_version": __import__("trl").__version__}


# ----------------------------------------------------------------------------- a subprocess


def run_side(args) -> int:
    """The child: one trainer, one row; the result as JSON in ``--result``."""
    import torch

    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    t0 = time.perf_counter()
    try:
        result = (run_ours if args.side == "ours" else run_trl)(args, args.turns)
    except Exception as e:  # reported as this row's reason, with the traceback on stderr
        import traceback

        traceback.print_exc()
        result = {"error": f"{type(e).__name__}: {e}"}
    result.update(side=args.side, turns=args.turns, threads=torch.get_num_threads(),
                  peak_rss_mib=peak_rss_mib(), process_seconds=time.perf_counter() - t0)
    Path(args.result).write_text(json.dumps(result, indent=2) + "\n")
    return 0


CHILD_ARGS = ("model", "prompts", "group_size", "max_new_tokens", "rounds", "warmup",
              "ppo_epochs", "kl_coef", "lr", "seed", "threads")


def spawn(args, side: str, turns: int) -> dict:
    """Run one side in a fresh Python process; its JSON result, or an error with its output."""
    with tempfile.TemporaryDirectory() as tmp:
        result_file = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--side", side, "--turns", str(turns),
               "--result", str(result_file)]
        for name in CHILD_ARGS:
            cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
        print(f"[{side}, {turns} turn{'s' if turns > 1 else ''}] running ...", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0 or not result_file.exists():
            tail = (proc.stdout + proc.stderr)[-3000:]
            return {"side": side, "turns": turns,
                    "error": f"the subprocess exited with {proc.returncode}:\n{tail}"}
        result = json.loads(result_file.read_text())
        if "error" in result and args.verbose:
            print(proc.stderr[-3000:])
        result["wall_seconds"] = time.perf_counter() - t0
        return result


# ----------------------------------------------------------------------------- the report


def format_table(rows: list[dict]) -> str:
    head = (f"{'row':<22} {'time/step':>10} {'gen tok/s':>10} {'trained tok/s':>14} "
            f"{'peak RSS':>10} {'steps':>6} {'compl.':>7} {'tok/compl.':>10} {'turns':>6} "
            f"{'reward':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        name = f"{r['label']}"
        if "error" in r:
            lines.append(f"{name:<22} n/a (see below)")
            continue
        s = r["summary"]
        lines.append(f"{name:<22} {s['seconds_per_step']:>9.2f}s {s['gen_tokens_per_s']:>10,.0f} "
                     f"{s['trained_tokens_per_s']:>14,.0f} {r['peak_rss_mib']:>7,.0f} MiB "
                     f"{s['optimizer_steps']:>6} {s['completions']:>7} "
                     f"{s['mean_completion_tokens']:>10.1f} {s['mean_turns']:>6.2f} "
                     f"{s['mean_reward']:>7.2f}")
    return "\n".join(lines)


def ratio(trl: dict | None, ours: dict | None, key: str) -> float | None:
    if not trl or not ours or "error" in trl or "error" in ours:
        return None
    a, b = trl["summary"][key], ours["summary"][key]
    return a / b if b else None


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def trl_available() -> str | None:
    """None when trl (and datasets) import; else why not."""
    import importlib.util

    missing = [m for m in ("trl", "datasets") if importlib.util.find_spec(m) is None]
    if missing:
        return (f"{' and '.join(missing)} not installed (pip install -e '.[bench]' installs "
                "trl==1.16.0)")
    return None


def build_parser() -> argparse.ArgumentParser:
    """The command line (``bench/doc_numbers.py peer`` reads its defaults)."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: tiny model, 2 prompts x group 2, 8 new tokens, 2 steps, "
                             "no warm-up")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m or tiny")
    parser.add_argument("--prompts", type=int, default=4, help="prompts (games) per round")
    parser.add_argument("--group-size", type=int, default=4, help="completions per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="per turn")
    parser.add_argument("--rounds", type=int, default=4,
                        help="timed generation rounds (each: generate once, --ppo-epochs steps)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--ppo-epochs", type=int, default=1,
                        help="optimizer steps per round: our ppo_epochs = TRL's num_iterations")
    parser.add_argument("--kl-coef", type=float, default=0.05,
                        help="KL loss coefficient (TRL's beta); > 0: both run a reference model")
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads on both sides (default: torch's default here)")
    parser.add_argument("--turns", type=int, default=3,
                        help="turns of the multi-turn row (1: no multi-turn row)")
    parser.add_argument("--verbose", action="store_true", help="show a failing side's stderr")
    # The child's arguments (run_side).
    parser.add_argument("--side", choices=("ours", "trl"), help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.side:
        return run_side(args)

    import torch

    if args.quick:
        args.model, args.prompts, args.group_size, args.max_new_tokens = "tiny", 2, 2, 8
        args.rounds, args.warmup = 2, 0
    if args.threads is None:
        args.threads = torch.get_num_threads()
    multi_turns = args.turns
    batch = args.prompts * args.group_size
    steps = args.rounds * args.ppo_epochs
    print(f"peer benchmark: gamerl vs TRL GRPOTrainer; model {args.model}, float32, CPU, "
          f"{args.threads} torch threads")
    print(f"each round: {args.prompts} prompts x group {args.group_size} = {batch} completions, "
          f"{args.ppo_epochs} optimizer step(s) on all of them (ppo_epochs = num_iterations = "
          f"{args.ppo_epochs}); {args.rounds} timed round(s) = {steps} optimizer steps after "
          f"{args.warmup} warm-up round(s); max_new_tokens {args.max_new_tokens}; temperature 0.7, "
          f"top-p 0.9, top-k 50; KL coef {args.kl_coef}; lr {args.lr}", flush=True)
    load_start = os.getloadavg()
    no_trl = trl_available()

    rows, notes = [], []
    single_ours = spawn(args, "ours", 1)
    single_trl = {"side": "trl", "turns": 1, "error": no_trl} if no_trl else spawn(args, "trl", 1)
    single_ours["label"], single_trl["label"] = "ours, single-turn", "TRL, single-turn"
    rows += [single_ours, single_trl]

    multi_ours = multi_trl = None
    if multi_turns > 1:
        # TRL first: when its environment_factory cannot run, ours has nothing to be compared to.
        multi_trl = ({"side": "trl", "turns": multi_turns, "error": no_trl} if no_trl
                     else spawn(args, "trl", multi_turns))
        multi_trl["label"] = f"TRL, {multi_turns} turns"
        if "error" not in multi_trl:
            multi_ours = spawn(args, "ours", multi_turns)
            multi_ours["label"] = f"ours, {multi_turns} turns"
            rows.insert(2, multi_ours)
        rows.append(multi_trl)

    print()
    print(format_table(rows))
    for r in rows:
        if "error" in r:
            notes.append(f"{r['label']}: n/a: {r['error']}")
            if r is multi_trl and not no_trl:
                notes.append(MULTI_TURN_NOTE)
        elif r["side"] == "trl":
            bad = r.get("prompt_mismatches", 0)
            if r["turns"] == 1:
                notes.append(f"{r['label']}: prompt token ids "
                             + ("identical to ours" if bad == 0 else
                                f"DIFFER from ours for {bad} completions"))
    if multi_turns <= 1:
        notes.append("multi-turn: n/a: not asked for (--turns 1)")
    print()
    print("\n".join(notes))

    single = ratio(single_trl, single_ours, "seconds_per_step")
    multi = ratio(multi_trl, multi_ours, "seconds_per_step")
    print()
    for label, trl, ours in (("single-turn", single_trl, single_ours),
                             (f"{multi_turns} turns", multi_trl, multi_ours)):
        if trl and ours and "error" not in trl and "error" not in ours:
            print(f"ratios TRL / ours, {label}: time per step "
                  f"{fmt(ratio(trl, ours, 'seconds_per_step'))}, generated tok/s "
                  f"{fmt(ratio(trl, ours, 'gen_tokens_per_s'))}, trained tok/s "
                  f"{fmt(ratio(trl, ours, 'trained_tokens_per_s'))}, peak RSS "
                  f"{fmt(trl['peak_rss_mib'] / ours['peak_rss_mib'])}")
    print(f"{RATIO_PREFIX} single-turn {fmt(single)}, multi-turn {fmt(multi)}")

    if args.json:
        result = {"rows": rows, "quick": args.quick, "args": vars(args),
                  "peer_ratio": {"single_turn": single, "multi_turn": multi},
                  "machine": {"platform": platform.platform(), "python": platform.python_version(),
                              "torch": torch.__version__, "cpu_count": os.cpu_count(),
                              "loadavg_start": load_start, "loadavg_end": os.getloadavg()},
                  "date": time.strftime("%Y-%m-%d %H:%M:%S")}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
