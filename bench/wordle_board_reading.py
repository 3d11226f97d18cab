"""Does a policy read the Wordle board? Its whole distribution over the answer words, scored
exactly on the boards it plays, instead of a few hundred sampled guesses.

RL only re-weights what the policy samples. On Wordle a guess can win only if it fits every
mark so far, so PPO can learn to win only if the policy's samples fit the marks often enough to
be rewarded for it. The evaluation's ``fit the marks`` column counts the sampled guesses that do
(1.2-1.4% for the SmolLM2 preset's policies against random answer words' 2.3%,
docs/benchmarks.md); this script measures the same thing without sampling noise and tells apart
"reads the board a little" from "does not read it at all":

* the boards: the held-out answers (``eval_instances``), the expert's openers SOARE and CLINT
  played through the same rollout, chat template and feedback view as training: the exact
  context the policy answers on its third turn;
* every one of the 2,309 answer words, written as the policy writes a guess (lowercase, then
  <|im_end|>), scored by its log-probability after that context (the context runs once; the
  candidates run in chunks on its KV cache);
* per board, of the probability the policy gives to answer words at all (``answer-word mass``):
  the share on words that fit every mark (``fit share``; random answer words: the fraction of
  answers that fit, ``uniform fit share``), the share on words that keep every green in place
  (``kept-greens share``), the true answer's probability relative to uniform (``answer lift``),
  its rank among the 2,309;
* whether the distribution depends on the board at all: the mean total-variation distance
  between a board's answer-word distribution and the average one over all boards (0: the same
  words whatever the board says), and its effective number of words (exp of the entropy).

A policy that reads the board puts more of its mass on fitting words than the uniform share
(``fit lift`` > 1) and changes its distribution with the board.

    python bench/wordle_board_reading.py --model checkpoints/RUN/warmstart --model checkpoints/RUN/last
    python bench/wordle_board_reading.py --boards 64 --json bench/results/wordle_board_reading.json
    python bench/wordle_board_reading.py --quick          # tiny, seconds (a smoke run)
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from gamerl.config import get_config  # noqa: E402
from gamerl.config.train_config import parse_overrides  # noqa: E402
from gamerl.core.evaluate import eval_instances, local_env_factory  # noqa: E402
from gamerl.core.rollout import (IM_END, Answer, RolloutConfig, encode,  # noqa: E402
                                 rollout)
from gamerl.models import load_policy  # noqa: E402
from gamerl.models.kv_cache import CACHE_ARG, cache_of  # noqa: E402
from tasks.wordle import answers  # noqa: E402
from tasks.wordle.solver import EXPERT_OPENERS  # noqa: E402
from tasks.wordle.words import score_guess  # noqa: E402


class OpenersThenCapture:
    """A TurnPolicy: plays the expert's openers, then records the context of the next turn (the
    board the policy is asked about) and ends the game with the first opener again (a repeat:
    what it plays after the capture does not matter)."""

    def __init__(self, tokenizer, turn: int = len(EXPERT_OPENERS)):
        self.tok, self.turn = tokenizer, turn
        self.im_end = tokenizer.convert_tokens_to_ids(IM_END)
        self.boards: list[dict] = []

    def __call__(self, contexts, episodes):
        out = []
        for ctx, ep in zip(contexts, episodes):
            k = len(ep.turns)
            if k == self.turn:
                obs = ep.last_obs
                self.boards.append({"context": list(ctx), "answer": ep.instance["answer"],
                                    "history": list(zip(obs["guesses"], obs["marks"]))})
            word = EXPERT_OPENERS[k] if k < len(EXPERT_OPENERS) else EXPERT_OPENERS[0]
            out.append(Answer(encode(self.tok, word) + [self.im_end]))
        return out


def boards_of(cfg, tok, n: int) -> list[dict]:
    """The context of the policy's third turn on ``n`` held-out games (fewer where an opener
    wins, which no held-out answer does)."""
    capture = OpenersThenCapture(tok)
    rcfg = RolloutConfig.from_train_config(cfg)
    rcfg.max_turns = len(EXPERT_OPENERS) + 1
    rollout(capture, tok, eval_instances(cfg, n), local_env_factory(cfg), rcfg)
    return capture.boards


@torch.no_grad()
def word_logprobs(lm, context: list[int], words_ids: list[list[int]], chunk: int) -> torch.Tensor:
    """``[len(words_ids)]``: log P(word's tokens | context), each word a complete answer."""
    device = lm.device
    out = lm(input_ids=torch.tensor([context], device=device), use_cache=True)
    first = torch.log_softmax(out.logits[0, -1].float(), -1)
    past = cache_of(out)
    n_ctx = len(context)
    scores = []
    for start in range(0, len(words_ids), chunk):
        rows = words_ids[start:start + chunk]
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [r[-1]] * (width - len(r)) for r in rows], device=device)
        cache = copy.deepcopy(past)
        cache.batch_repeat_interleave(len(rows))
        # right padding after each word: a real token attends only to the context and the
        # tokens before it, so the padding changes nothing that is read
        pos = torch.arange(n_ctx, n_ctx + width, device=device).expand(len(rows), width)
        mask = torch.ones(len(rows), n_ctx + width, dtype=torch.long, device=device)
        logits = lm(input_ids=ids, position_ids=pos, attention_mask=mask,
                    **{CACHE_ARG: cache}).logits.float()
        logp = torch.log_softmax(logits, -1)
        for i, r in enumerate(rows):
            s = first[r[0]]
            for j in range(1, len(r)):
                s = s + logp[i, j - 1, r[j]]
            scores.append(s)
    return torch.stack(scores)


def fits(word: str, history) -> bool:
    return all(score_guess(word, g) == list(m) for g, m in history)


def keeps_greens(word: str, history) -> bool:
    return all(word[j] == g[j] for g, m in history for j in range(5) if m[j] == "green")


def measure(lm, tok, boards: list[dict], words: list[str], chunk: int) -> dict:
    im_end = tok.convert_tokens_to_ids(IM_END)
    words_ids = [encode(tok, w) + [im_end] for w in words]
    index = {w: i for i, w in enumerate(words)}
    rows, dists = [], []
    t0 = time.perf_counter()
    for b in boards:
        logp = word_logprobs(lm, b["context"], words_ids, chunk)
        mass = float(logp.exp().sum())
        p = torch.softmax(logp, 0)  # the distribution over answer words
        fit = torch.tensor([fits(w, b["history"]) for w in words])
        kept = torch.tensor([keeps_greens(w, b["history"]) for w in words])
        ans = index[b["answer"]]
        rows.append({
            "answer_word_mass": mass,
            "fit_share": float(p[fit].sum()), "uniform_fit_share": float(fit.float().mean()),
            "kept_share": float(p[kept].sum()), "uniform_kept_share": float(kept.float().mean()),
            "answer_lift": float(p[ans]) * len(words),
            "answer_rank": int((p > p[ans]).sum()) + 1,
            "effective_words": math.exp(float(-(p * p.clamp_min(1e-30).log()).sum())),
        })
        dists.append(p)
    mean = torch.stack(dists).mean(0)
    tv = [0.5 * float((d - mean).abs().sum()) for d in dists]
    n = len(rows)
    avg = {k: sum(r[k] for r in rows) / n for k in rows[0]}
    return {
        "boards": n, "seconds": round(time.perf_counter() - t0, 1),
        "answer_word_mass": avg["answer_word_mass"],
        "fit_share": avg["fit_share"], "uniform_fit_share": avg["uniform_fit_share"],
        "fit_lift": avg["fit_share"] / avg["uniform_fit_share"],
        "boards_fit_above_uniform": sum(r["fit_share"] > r["uniform_fit_share"] for r in rows) / n,
        "kept_share": avg["kept_share"], "uniform_kept_share": avg["uniform_kept_share"],
        "kept_lift": avg["kept_share"] / avg["uniform_kept_share"],
        "answer_lift": avg["answer_lift"],
        "answer_rank_median": sorted(r["answer_rank"] for r in rows)[n // 2],
        "effective_words": avg["effective_words"],
        "board_dependence_tv": sum(tv) / n,
        "top_words_overall": [words[i] for i in mean.topk(8).indices.tolist()],
    }


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="smollm2-135m")
    ap.add_argument("--model", action="append", default=[],
                    help="a policy (a run's warmstart/ or last/); repeat for several; default: "
                         "the preset's model as it comes")
    ap.add_argument("--boards", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=256, help="candidate words per forward pass")
    ap.add_argument("--quick", action="store_true", help="tiny, 4 boards, 200 words")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a config override, as for python -m gamerl train")
    args = ap.parse_args(argv)
    preset, n, words = args.preset, args.boards, sorted(answers())
    if args.quick:
        preset, n = "tiny", 4
    cfg = get_config(preset, task="wordle", **parse_overrides(args.set))
    torch.manual_seed(0)
    results = []
    for name in args.model or [cfg.model]:
        lm, tok = load_policy(name, device="cpu")
        lm.eval()
        boards = boards_of(cfg, tok, n)
        if args.quick:
            keep = {b["answer"] for b in boards}
            words = sorted(keep | set(words[:200 - len(keep)]))
        row = {"model": name, **measure(lm, tok, boards, words, args.chunk)}
        results.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{'model':<44} {'fit share':>9} {'uniform':>8} {'fit lift':>8} {'kept lift':>9} "
          f"{'ans lift':>8} {'eff words':>9} {'board TV':>8} {'mass':>6}")
    for r in results:
        print(f"{r['model'][-44:]:<44} {r['fit_share']:>9.2%} {r['uniform_fit_share']:>8.2%} "
              f"{r['fit_lift']:>8.2f} {r['kept_lift']:>9.2f} {r['answer_lift']:>8.2f} "
              f"{r['effective_words']:>9.1f} {r['board_dependence_tv']:>8.2f} "
              f"{r['answer_word_mass']:>6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
