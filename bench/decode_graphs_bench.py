"""Would CUDA graphs pay for decoding? HF ``generate`` with its default growing cache, against a
static cache, against a static cache with the decoding step compiled into CUDA graphs.

    python bench/decode_graphs_bench.py                       # Qwen3-0.6B size, random bf16, CUDA
    python bench/decode_graphs_bench.py --quick               # tiny on CPU, seconds (no compile)
    python bench/decode_graphs_bench.py --json out/graphs.json --batch 20 --new-tokens 256

Why: on the GPU a Qwen3-0.6B decode step costs ~40-55 ms at a batch of 20 (docs/benchmarks.md,
the H200 leases) while its weights are read in well under 1 ms: the step is ~1,500 kernel
launches and the Python around them. CUDA graphs replay a step's launches as one; they need
tensors at fixed addresses, so a static KV cache (``cache_implementation="static"``), and
transformers then compiles the model's forward (``torch.compile``, mode ``reduce-overhead``) by
itself. This measures that lever on the library's own ``generate`` before we build it into the
multi-turn rollout (where the batch shrinks as games end, which a graph must be captured for).

Variants, each a warm-up call (its time kept: it holds the compile) and then ``--repeats`` timed
calls of the same inputs:
* ``dynamic``: ``generate`` as the trainer's GPU path runs it today (growing cache, eager);
* ``static``: the static cache, compile off (``disable_compile``): the cache alone;
* ``static+graphs``: the static cache, compiled (CUDA only; ``--no-compile`` skips it).

Random weights never write the end token and the generation config's end token is removed, so
every call decodes exactly ``--new-tokens`` steps; sampling as the presets sample (temperature
0.7, top-k 50, top-p 0.9). ms per step = a call's seconds / new tokens (the prefill of the
prompt, one step of ``--prompt-tokens``, is in it and small).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from machine import machine_info, sync, write_json  # noqa: E402  (bench/, the script's folder)


def build_model(size: str, device: torch.device):
    from transformers import AutoModelForCausalLM

    from gamerl.models import load_policy, qwen3_0_6b_config

    torch.manual_seed(0)
    if size == "tiny":
        lm, _ = load_policy("tiny", device=str(device))
    else:
        lm = AutoModelForCausalLM.from_config(qwen3_0_6b_config(), dtype=torch.bfloat16,
                                              attn_implementation="sdpa").to(device)
    lm.eval()
    lm.generation_config.eos_token_id = None  # every call decodes exactly new_tokens steps
    lm.generation_config.pad_token_id = 0
    return lm


def time_variant(lm, input_ids, new_tokens: int, repeats: int, **kwargs) -> dict:
    """One warm-up call, then ``repeats`` timed calls; seconds and ms per decode step."""
    device = input_ids.device
    gen = dict(max_new_tokens=new_tokens, do_sample=True, temperature=0.7, top_k=50, top_p=0.9,
               attention_mask=torch.ones_like(input_ids), **kwargs)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds = []
    for i in range(repeats + 1):
        torch.manual_seed(i)
        sync(device)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = lm.generate(input_ids, **gen)
        sync(device)
        seconds.append(time.perf_counter() - t0)
        assert out.shape[1] == input_ids.shape[1] + new_tokens, out.shape
    timed = seconds[1:]
    best = min(timed)
    row = {"warmup_s": seconds[0], "seconds": timed, "ms_per_step": 1000 * best / new_tokens,
           "tokens_per_s": input_ids.shape[0] * new_tokens / best}
    if device.type == "cuda":
        row["peak_gpu_gb"] = torch.cuda.max_memory_allocated(device) / 1e9
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny on CPU, small sizes: a smoke run")
    p.add_argument("--batch", type=int, default=20, help="rows decoded together (preset: 20)")
    p.add_argument("--prompt-tokens", type=int, default=300)
    p.add_argument("--new-tokens", type=int, default=256, help="decode steps (preset: 256)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--no-compile", action="store_true", help="skip static+graphs")
    p.add_argument("--size", choices=["tiny", "qwen3-0.6b"],
                   help="the model (default: qwen3-0.6b on CUDA, tiny on a CPU)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    cuda = torch.cuda.is_available() and not args.quick
    device = torch.device("cuda" if cuda else "cpu")
    size = args.size or ("qwen3-0.6b" if cuda else "tiny")
    if args.quick:
        args.batch, args.prompt_tokens, args.new_tokens, args.repeats = 4, 16, 8, 1
    lm = build_model(size, device)
    vocab = min(lm.config.vocab_size, 1024)  # ids every model here knows
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, vocab, (args.batch, args.prompt_tokens), generator=g).to(device)
    variants = {"dynamic": {}, "static": {"cache_implementation": "static",
                                          "disable_compile": True}}
    if cuda and not args.no_compile:
        variants["static+graphs"] = {"cache_implementation": "static"}
    rows = {}
    for name, kwargs in variants.items():
        print(f"[{name}] {args.batch} rows x {args.new_tokens} steps ...", flush=True)
        rows[name] = time_variant(lm, input_ids, args.new_tokens, args.repeats, **kwargs)
        r = rows[name]
        print(f"[{name}] warm-up {r['warmup_s']:.1f} s, timed {[round(s, 2) for s in r['seconds']]}"
              f" s: {r['ms_per_step']:.1f} ms a step, {r['tokens_per_s']:,.0f} tok/s"
              + (f", peak {r['peak_gpu_gb']:.1f} GB" if "peak_gpu_gb" in r else ""), flush=True)
    base = rows["dynamic"]["ms_per_step"]
    for name, r in rows.items():
        r["speedup_vs_dynamic"] = base / r["ms_per_step"]
        print(f"{name:<14} {r['ms_per_step']:7.1f} ms/step  {r['speedup_vs_dynamic']:5.2f}x")
    import transformers

    result = {"model": size, "device": str(device), "batch": args.batch,
              "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "rows": rows,
              "machine": machine_info(transformers=transformers.__version__),
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
