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
  words run as a prefix tree packed into a few forward passes on its KV cache:
  ``word_logprobs``);
* per board, of the probability the policy gives to answer words at all (``answer-word mass``):
  the share on words that fit every mark (``fit share``; random answer words: the fraction of
  answers that fit, ``uniform fit share``), the share on words that keep every green in place
  (``kept-greens share``), the true answer's probability relative to uniform (``answer lift``),
  its rank among the 2,309;
* whether the distribution depends on the board at all: the mean total-variation distance
  between a board's answer-word distribution and the average one over all boards (0: the same
  words whatever the board says), and its effective number of words (exp of the entropy).

A policy that reads the board puts more of its mass on words that keep the greens and that fit
than the uniform shares (``kept lift``, ``fit lift`` > 1) and changes its distribution with the
board. After two openers only about 5 answers fit a board, so the fit share moves with a few
boards; the kept-greens share (about a third of the words) is the steadier measure.

    python bench/wordle_board_reading.py --model checkpoints/RUN/warmstart --model checkpoints/RUN/last
    python bench/wordle_board_reading.py --boards 64 --json bench/results/wordle_board_reading.json
    python bench/wordle_board_reading.py --quick          # tiny, seconds (a smoke run)
"""

from __future__ import annotations

import argparse
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
from gamerl.config import parse_overrides  # noqa: E402
from gamerl.core.evaluate import eval_instances, local_env_factory  # noqa: E402
from gamerl.core.rollout import (IM_END, RolloutConfig, ScriptedPolicy,  # noqa: E402
                                 encode, rollout)
from gamerl.games.wordle import fits_marks, keeps_greens  # noqa: E402
from gamerl.models import load_policy  # noqa: E402
from gamerl.models.kv_cache import CACHE_ARG, cache_of  # noqa: E402
from tasks.wordle import answers  # noqa: E402
from tasks.wordle.solver import EXPERT_OPENERS  # noqa: E402


def boards_of(cfg, tok, n: int) -> list[dict]:
    """The context of the policy's third turn on ``n`` held-out games (fewer where an opener
    wins, which no held-out answer does): a scripted player plays the expert's openers, records
    the context it is asked to answer next and ends the game with a repeat (what it plays after
    the capture does not matter)."""
    boards: list[dict] = []

    def openers_then_capture(ep) -> str:
        k = len(ep.turns)
        if k == len(EXPERT_OPENERS):
            obs = ep.last_obs
            boards.append({"context": list(ep.token_ids), "answer": ep.instance["answer"],
                           "history": list(zip(obs["guesses"], obs["marks"]))})
        return EXPERT_OPENERS[k] if k < len(EXPERT_OPENERS) else EXPERT_OPENERS[0]

    rcfg = RolloutConfig.from_train_config(cfg)
    rcfg.max_turns = len(EXPERT_OPENERS) + 1
    rollout(ScriptedPolicy(tok, openers_then_capture), tok, eval_instances(cfg, n),
            local_env_factory(cfg), rcfg)
    return boards


@torch.no_grad()
def word_logprobs(lm, context: list[int], words_ids: list[list[int]], chunk: int,
                  min_first_logprob: float = -math.inf) -> tuple[torch.Tensor, float]:
    """``([len(words_ids)], bound)``: log P(word's tokens | context), each word a complete
    answer (its last token <|im_end|>); and how much probability the words left unscored can
    hold at most.

    A word whose first token has a log-probability below ``min_first_logprob`` is not run
    (-inf): its probability is at most its first token's, so together the words left out hold
    at most the sum of their distinct first tokens' probabilities (``bound``, exact arithmetic,
    no estimate). A trained policy puts most of its mass on a few first tokens, so most words
    need no forward pass.

    The context runs once (one row of KV cache). The words then run as a prefix tree packed
    into one row per chunk of about ``chunk`` tokens: a prefix that several words share (the
    tokens of "sh" in SHIRK, SHALE, ...) runs once, and a 4D attention mask lets each token see
    the context and its own prefix only, at the positions it would have alone after the
    context. So every word is scored as if it were alone after the context, with no copy of the
    context's cache per word (2,309 copies of a 600-token cache are ~40 GB of memory traffic a
    board) and a third fewer tokens than the words have (SmolLM2: 3,064 prefixes for 4,297
    tokens). A word's last token (<|im_end|>) is only predicted, never run."""
    device = lm.device
    out = lm(input_ids=torch.tensor([context], device=device), use_cache=True)
    first = torch.log_softmax(out.logits[0, -1].float(), -1)
    cache = cache_of(out)
    n_ctx = len(context)
    run = [i for i, r in enumerate(words_ids) if float(first[r[0]]) >= min_first_logprob]
    left_out = {words_ids[i][0] for i in set(range(len(words_ids))) - set(run)}
    bound = float(sum(first[t].exp() for t in left_out)) if left_out else 0.0
    scores = torch.full((len(words_ids),), -math.inf)
    by_first: dict[int, list[int]] = {}  # a chunk holds whole subtrees: the words of a first token
    for i in run:
        by_first.setdefault(words_ids[i][0], []).append(i)
    groups, chunks, size = list(by_first.values()), [], 0
    for g in groups:
        prefixes = {tuple(words_ids[i][:j]) for i in g for j in range(1, len(words_ids[i]))}
        if not chunks or size + len(prefixes) > chunk:
            chunks.append([])
            size = 0
        chunks[-1] += g
        size += len(prefixes)
    for which in chunks:
        node: dict[tuple, int] = {}  # a prefix -> its place in the packed row
        ids, pos, parent = [], [], []
        for i in which:
            r = words_ids[i]
            for j in range(1, len(r)):  # the prefixes r[:1] .. r[:-1]: all but <|im_end|>
                if tuple(r[:j]) not in node:
                    node[tuple(r[:j])] = len(ids)
                    ids.append(r[j - 1])
                    pos.append(n_ctx + j - 1)
                    parent.append(node[tuple(r[:j - 1])] if j > 1 else -1)
        t = len(ids)
        # ALGO LOGIC: a token sees every context column and its own prefix (itself, its parent,
        # the parent's parent...), nothing of the other words
        allowed = torch.zeros(t, n_ctx + t, dtype=torch.bool, device=device)
        allowed[:, :n_ctx] = True
        for k in range(t):
            a = k
            while a >= 0:
                allowed[k, n_ctx + a] = True
                a = parent[a]
        mask = torch.zeros(1, 1, t, n_ctx + t, dtype=lm.dtype, device=device)
        mask.masked_fill_(~allowed, torch.finfo(lm.dtype).min)
        logits = lm(input_ids=torch.tensor([ids], device=device),
                    position_ids=torch.tensor([pos], device=device), attention_mask=mask,
                    **{CACHE_ARG: cache}).logits[0].float()
        cache.crop(-t)  # the words' columns out again: the next chunk sees the context only
        logp = torch.log_softmax(logits, -1)
        for i in which:
            r = words_ids[i]
            s = first[r[0]]
            for j in range(1, len(r)):  # token j is predicted where its prefix r[:j] ends
                s = s + logp[node[tuple(r[:j])], r[j]]
            scores[i] = s
    return scores, bound


def measure(lm, tok, boards: list[dict], words: list[str], chunk: int,
            min_first_logprob: float = -math.inf) -> dict:
    im_end = tok.convert_tokens_to_ids(IM_END)
    words_ids = [encode(tok, w) + [im_end] for w in words]
    index = {w: i for i, w in enumerate(words)}
    rows, dists = [], []
    t0 = time.perf_counter()
    for b in boards:
        logp, bound = word_logprobs(lm, b["context"], words_ids, chunk, min_first_logprob)
        mass = float(logp.exp().sum())
        p = torch.softmax(logp, 0)  # the distribution over answer words
        fit = torch.tensor([fits_marks(w, b["history"]) for w in words])
        kept = torch.tensor([keeps_greens(w, b["history"]) for w in words])
        ans = index[b["answer"]]
        rows.append({
            "answer_word_mass": mass, "unscored_bound": bound / mass,
            "words_scored": int(torch.isfinite(logp).sum()),
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
        "words_scored": avg["words_scored"],
        # the words left unscored hold at most this much of the mass (mean and worst board)
        "unscored_bound": avg["unscored_bound"],
        "unscored_bound_max": max(r["unscored_bound"] for r in rows),
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
    ap.add_argument("--chunk", type=int, default=1024,
                    help="tokens of the words' prefix tree packed into one forward pass")
    ap.add_argument("--min-first-logprob", type=float, default=math.log(1e-6),
                    help="words whose first token is less likely are not run; the mass they "
                         "can hold is reported (unscored_bound)")
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
        row = {"model": name, **measure(lm, tok, boards, words, args.chunk,
                                                 args.min_first_logprob)}
        results.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{'model':<44} {'fit share':>9} {'uniform':>8} {'fit lift':>8} {'kept lift':>9} "
          f"{'ans lift':>8} {'eff words':>9} {'board TV':>8} {'mass':>6}")
    for r in results:
        print(f"{r['model'][-44:]:<44} {r['fit_share']:>9.2%} {r['uniform_fit_share']:>8.2%} "
              f"{r['fit_lift']:>8.2f} {r['kept_lift']:>9.2f} {r['answer_lift']:>8.2f} "
              f"{r['effective_words']:>9.1f} {r['board_dependence_tv']:>8.2f} "
              f"{r['answer_word_mass']:>6.2f} (unscored <= {r['unscored_bound_max']:.2%})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
