"""The embedded ``tiny`` model: a randomly initialised Qwen3-architecture model (a few hundred
thousand parameters) with a byte-level BPE tokenizer trained on the project's own text
(``tiny_corpus``) and a Qwen3-style chat template, built once into ``checkpoints/tiny`` (about a
second). Also Qwen's special tokens and the chat template, which every loaded model shares."""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import torch
import tokenizers
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from .builddir import build_atomically, is_current

QWEN3_0_6B = "Qwen/Qwen3-0.6B"
TINY = "tiny"
TINY_MARKER = "gamerl_tiny.json"
TINY_FILES = ("config.json", "tokenizer.json")  # a build is complete with these
TINY_BUILD_FORMAT = 1  # bump when build_tiny changes what it writes, so caches rebuild
VALUE_HEAD_FILE = "value_head.pt"

# Qwen's special tokens, in this order, get ids 0..4 in the tiny tokenizer. As in Qwen3,
# <|endoftext|> pads, <|im_end|> ends a chat turn (the eos for generation), and <think> tags are
# ordinary added tokens (not "special"), so skip_special_tokens keeps them.
ENDOFTEXT, IM_START, IM_END, THINK, END_THINK = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")

# Qwen2/Qwen3's pre-tokenizer split: contractions, letter runs, single digits (so digit sums stay
# visible to the model), punctuation runs, newlines, spaces. After the split, GPT-2 byte-level
# mapping turns every byte into a symbol, so any UTF-8 string (emoji, ZWJ sequences) round-trips.
# Unlike Qwen we add no NFC normalizer: it would change non-NFC input and break losslessness.
_PRETOKENIZE_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# A Qwen3-style chat template (written for this project, same output as Qwen3's for system, user
# and assistant messages; no tools). What matters for us, as in Qwen3:
# * add_generation_prompt opens "<|im_start|>assistant\n"; with enable_thinking=False it also
#   writes an empty "<think>\n\n</think>\n\n" block, which is how Qwen3 is told not to think;
# * assistant turns *before* the last user message lose their <think> block when re-rendered;
#   assistant turns after it keep it (and the final one always gets one, possibly empty).
CHAT_TEMPLATE = """\
{%- if messages and messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(last_query_index=messages|length - 1) %}
{%- for message in messages %}
    {%- if message.role == 'user' %}
        {%- set ns.last_query_index = loop.index0 %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- elif message.role == 'assistant' %}
        {%- set content = message.content %}
        {%- set reasoning = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning = message.reasoning_content %}
        {%- elif '</think>' in content %}
            {%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and (loop.last or reasoning) %}
            {{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
        {%- else %}
            {{- '<|im_start|>assistant\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role != 'system' %}
        {{- raise_exception('unsupported chat role: ' + message.role) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""


# ----------------------------------------------------------------------------- the tiny model


@dataclass(frozen=True)
class TinyConfig:
    """Build parameters of the embedded `tiny` model (all of them go into the marker file).

    vocab_size=1024: on held-out game observations a 1024-token BPE gives 3.2 characters per
    token (a full 26-rule observation is ~1000 tokens), 512 gives 2.2 and 2048 only 3.4: the
    corpus is small and repetitive, so more merges buy little. Short sequences matter more on
    CPU (attention is O(T^2)) than the 64k embedding parameters.
    The transformer is as small as Qwen3's structure allows while keeping its features: GQA
    (4 query heads share 2 kv heads), q/k RMSNorm, SwiGLU MLP, RoPE, tied embeddings.
    """

    seed: int = 0
    vocab_size: int = 1024
    hidden_size: int = 64
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 192
    max_position_embeddings: int = 4096
    rope_theta: float = 1_000_000.0  # Qwen3's


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024,
                    model_max_length: int = 4096) -> PreTrainedTokenizerFast:
    """A byte-level BPE with Qwen's special tokens and our Qwen3-style chat template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_PRETOKENIZE_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 2,  # leaves room for <think> and </think>, added below
        min_frequency=2,
        show_progress=False,
        special_tokens=[ENDOFTEXT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes, always
    )
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in (THINK, END_THINK)])
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, unk_token=None,
                                 eos_token=IM_END, pad_token=ENDOFTEXT,
                                 model_max_length=model_max_length)
    hf.chat_template = CHAT_TEMPLATE
    return hf


def tiny_qwen3_config(cfg: TinyConfig, tokenizer: PreTrainedTokenizerFast) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=len(tokenizer),  # exactly the tokenizer: no unused rows a random model samples
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings,
        rope_theta=cfg.rope_theta,  # transformers 5 moves this into config.rope_parameters
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),  # as Qwen3 (never prepended)
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
    )


@functools.lru_cache(maxsize=4)  # ~1 s to generate (the game renders 64 instances); fixed per process
def _corpus(seed: int) -> tuple[tuple[str, ...], str]:
    from .tiny_corpus import corpus_texts

    texts = tuple(corpus_texts(seed))
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()
    return texts, digest


def _marker(cfg: TinyConfig, corpus_sha256: str) -> dict:
    # Only what determines the files: no paths, no clocks (rebuilds must be byte-identical).
    return {"format": TINY_BUILD_FORMAT, "params": asdict(cfg), "corpus_sha256": corpus_sha256}


def build_tiny(out_dir: str | Path = "checkpoints/tiny", **params) -> Path:
    """Train the tokenizer, initialise the tiny Qwen3 from ``seed``, save both to ``out_dir``.

    ``params`` are TinyConfig fields (seed, vocab_size, hidden_size, ...). Deterministic: the
    same params and corpus give byte-identical files. Written to a temporary sibling directory
    and renamed into place, so a reader never sees a half-built model.
    """
    cfg = TinyConfig(**params)
    out = Path(out_dir)
    texts, corpus_sha = _corpus(cfg.seed)

    tokenizer = train_tokenizer(texts, cfg.vocab_size, cfg.max_position_embeddings)
    config = tiny_qwen3_config(cfg, tokenizer)
    with torch.random.fork_rng(devices=[]):  # seeded init without disturbing the caller's RNG
        torch.manual_seed(cfg.seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, pad_token_id=config.pad_token_id,
        eos_token_id=[config.eos_token_id, config.pad_token_id])  # as Qwen3: stop on either

    def write(tmp: Path) -> dict:
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        return {"vocab_size": len(tokenizer), "num_parameters": model.num_parameters(),
                "versions": {"transformers": transformers.__version__,
                             "tokenizers": tokenizers.__version__}}

    return build_atomically(out, write, TINY_MARKER, _marker(cfg, corpus_sha), TINY_FILES)


def _tiny_is_current(path: Path, expected: dict) -> bool:
    return is_current(path, TINY_MARKER, expected, TINY_FILES)


def default_tiny_dir() -> Path:
    """Where `tiny` lives: $GAMERL_TINY_DIR, else checkpoints/tiny (relative to the cwd)."""
    return Path(os.environ.get("GAMERL_TINY_DIR", "checkpoints/tiny"))


def ensure_tiny(path: str | Path | None = None, **params) -> Path:
    """The tiny model's directory, built on first use and rebuilt when its build parameters (or
    the corpus) changed. The first check in a process costs ~1 s (regenerating the corpus to
    hash it); later ones are free."""
    path = Path(path) if path is not None else default_tiny_dir()
    cfg = TinyConfig(**params)
    if _tiny_is_current(path, _marker(cfg, _corpus(cfg.seed)[1])):
        return path
    return build_tiny(path, **params)


__all__ = ["CHAT_TEMPLATE", "END_THINK", "ENDOFTEXT", "IM_END", "IM_START", "QWEN3_0_6B", "THINK",
           "TINY", "TINY_MARKER", "TinyConfig", "VALUE_HEAD_FILE", "build_tiny", "default_tiny_dir",
           "ensure_tiny", "train_tokenizer"]
