"""LoRA through peft: train low-rank adapters instead of every weight.

Why: full fine-tuning of Qwen3-0.6B with AdamW keeps ~4 copies of every weight (weights, grads,
two moments), and PPO wants a frozen reference model on top. With LoRA the trainable part is a
few million adapter weights, the optimizer state shrinks accordingly, and the reference is free:
it is the same network with the adapters switched off (``adapter_disabled``).

    lm, tok = load_policy("tiny")
    lm = apply_lora(lm, LoraSettings(rank=16))      # a peft PeftModel; only adapters train
    policy = PolicyWithValue(lm)                    # value head on the (adapted) trunk
    with adapter_disabled(lm):                      # the frozen reference, no second copy
        ref_logits, _ = policy(ids)
    save_adapters(lm, "run/adapters")               # adapter_config.json + adapter weights
    merge_adapters("tiny", "run/adapters", "run/merged")   # a standalone model for from_pretrained

4-bit (QLoRA) loading needs CUDA and bitsandbytes (``pip install .[gpu]``): ``load_4bit`` says so
clearly on any other machine instead of failing deep inside transformers.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import torch
import torch.nn as nn

log = logging.getLogger("gamerl")

# Every attention and MLP projection of a Qwen3 decoder layer (transformers' Qwen3Attention:
# q_proj, k_proj, v_proj, o_proj; Qwen3MLP: gate_proj, up_proj, down_proj). Adapting all of them,
# not only q/v, is what the QLoRA paper found to match full fine-tuning.
QWEN3_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


@dataclass
class LoraSettings:
    """LoRA hyper-parameters. The update is ``(alpha / rank) * B @ A`` with B zero-initialised,
    so an adapted model starts exactly equal to its base.

    rank=16, alpha=32 (scale 2) is the common default for sub-1B models. dropout acts on the
    adapter's input in train mode only; PPO's old log-probs are computed in eval mode, so with
    dropout > 0 old and new log-probs differ before any update (the trainer's TrainConfig
    refuses it; 0, the default, is what RL uses).
    """

    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: list(QWEN3_TARGET_MODULES))

    @classmethod
    def from_dict(cls, d: dict) -> "LoraSettings":
        """From a config dict; ``target_modules: None`` means the default."""
        d = {k: v for k, v in d.items() if v is not None}
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------- applying


def is_peft(model: nn.Module) -> bool:
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


@contextlib.contextmanager
def _quiet_peft() -> Iterator[None]:
    # peft 0.21 asks transformers 5 `is_gradient_checkpointing`, deprecated there: noise only.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                category=FutureWarning)
        yield


def trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts, tied weights counted once."""
    unique = {id(p): p for p in model.parameters()}.values()
    return sum(p.numel() for p in unique if p.requires_grad), sum(p.numel() for p in unique)


def _check_targets(lm: nn.Module, targets: list[str]) -> None:
    """Every target name must match some Linear layer: peft only complains when *none* match, so
    a typo in one name would silently train fewer layers than asked."""
    linear_names = {name.rsplit(".", 1)[-1] for name, m in lm.named_modules()
                    if isinstance(m, nn.Linear)}
    missing = [t for t in targets if t not in linear_names]
    if missing:
        raise ValueError(f"LoRA target modules {missing} are not Linear layers of this model; "
                         f"its Linear layer names are: {sorted(linear_names)}")


def apply_lora(lm: nn.Module, settings: Optional[LoraSettings] = None):
    """Wrap ``lm`` (a transformers causal LM) in a peft ``PeftModel`` with fresh adapters.

    Every base weight is frozen; only the adapters train. The trainable count is logged (and
    available as ``trainable_parameters(model)``). The base model is modified in place (peft
    injects its layers into it), so do not keep using ``lm`` as if it were untouched.
    """
    from peft import LoraConfig, get_peft_model

    if is_peft(lm):
        raise ValueError("apply_lora: the model already has adapters (it is a PeftModel)")
    settings = settings or LoraSettings()
    _check_targets(lm, list(settings.target_modules))
    config = LoraConfig(r=settings.rank, lora_alpha=settings.alpha,
                        lora_dropout=settings.dropout,
                        target_modules=list(settings.target_modules),
                        bias="none", task_type="CAUSAL_LM")
    with _quiet_peft():
        model = get_peft_model(lm, config)
    trainable, total = trainable_parameters(model)
    log.info("LoRA rank %d on %s: %s trainable of %s parameters (%.2f%%)", settings.rank,
             ",".join(settings.target_modules), f"{trainable:,}", f"{total:,}",
             100.0 * trainable / max(total, 1))
    return model


# ----------------------------------------------------------------------------- the reference


@contextlib.contextmanager
def adapter_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Run ``model`` (a PeftModel) as its base model inside the block: the LoRA reference.

    peft's ``disable_adapter()`` switches the adapter layers off in place, so any forward in the
    block, through the PeftModel or through its unwrapped trunk (PolicyWithValue,
    gamerl.models.lm_trunk), computes the frozen base model. No second copy of the weights.
    Wrap the reference forward in ``torch.no_grad()`` as usual.
    """
    if not is_peft(model):
        raise TypeError(
            f"adapter_disabled needs a peft PeftModel (from apply_lora/load_adapters), got "
            f"{type(model).__name__}: without adapters there is nothing to disable; use "
            f"gamerl.models.load_reference for a separate frozen copy instead")
    with model.disable_adapter():
        yield model


# ----------------------------------------------------------------------------- 4-bit


def quantization_config(load_in_4bit: bool = True, compute_dtype: torch.dtype = torch.bfloat16):
    """A transformers ``BitsAndBytesConfig`` for QLoRA-style 4-bit NF4 weights, or None when
    ``load_in_4bit`` is False. Raises a RuntimeError saying what to do when this machine cannot
    load 4-bit weights (bitsandbytes' kernels are CUDA-only here)."""
    if not load_in_4bit:
        return None
    if not torch.cuda.is_available():
        raise RuntimeError(
            "4-bit loading needs a CUDA GPU and bitsandbytes (pip install .[gpu]); this machine "
            "has no CUDA: use full fine-tuning or LoRA in bf16/fp32 (load_in_4bit=False)")
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as e:
        raise RuntimeError(
            "4-bit loading needs bitsandbytes, which is not installed: pip install .[gpu] "
            "(or pip install bitsandbytes); or use LoRA in bf16 (load_in_4bit=False)") from e
    from transformers import BitsAndBytesConfig

    # NF4 + double quantisation + bf16 compute: the QLoRA recipe (Dettmers et al., 2023).
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                              bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype)


def load_4bit(name: str, *, gradient_checkpointing: bool = True,
              attn_implementation: Optional[str] = None):
    """``(model, tokenizer)`` with the base weights in 4-bit on the GPU, ready for apply_lora.

    peft's ``prepare_model_for_kbit_training`` casts the norms to fp32 and (optionally) turns on
    gradient checkpointing, as QLoRA training needs. Fails early with quantization_config's
    message on machines without CUDA or bitsandbytes.
    """
    bnb = quantization_config(True)
    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM

    from . import default_attn_implementation, load_tokenizer, resolve_model

    path, _ = resolve_model(name)
    attn = attn_implementation or default_attn_implementation(torch.device("cuda"), torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(
        path, quantization_config=bnb, dtype=torch.bfloat16, attn_implementation=attn,
        device_map={"": 0})
    model = prepare_model_for_kbit_training(
        model, use_gradient_checkpointing=gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False})
    tokenizer = load_tokenizer(path)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


# ----------------------------------------------------------------------------- save / load


def save_adapters(model: nn.Module, directory: str | Path) -> Path:
    """Write the adapters only: ``adapter_config.json`` + ``adapter_model.safetensors`` (a few MB
    for Qwen3-0.6B at rank 16, against 1.2 GB for the base weights, which are not written).
    Embedding layers are never saved: we do not train or resize them."""
    if not is_peft(model):
        raise TypeError(f"save_adapters needs a PeftModel, got {type(model).__name__}")
    directory = Path(directory)
    model.save_pretrained(str(directory), save_embedding_layers=False)
    return directory


def load_adapters(base_lm: nn.Module, directory: str | Path, trainable: bool = True):
    """Put the adapters saved in ``directory`` on ``base_lm`` (modified in place) and return the
    PeftModel. ``trainable=True`` to continue training (adapters require grad), False for
    inference."""
    from peft import PeftModel

    directory = Path(directory)
    if not (directory / ADAPTER_CONFIG).exists():
        raise FileNotFoundError(f"{directory / ADAPTER_CONFIG} not found: not an adapter "
                                "directory (save_adapters / PolicyWithValue.save of a LoRA policy)")
    if not (directory / ADAPTER_WEIGHTS).exists():  # never fall back to a pickled .bin
        raise FileNotFoundError(f"{directory / ADAPTER_WEIGHTS} not found: adapters are loaded "
                                "from safetensors only")
    with _quiet_peft():
        return PeftModel.from_pretrained(base_lm, str(directory), is_trainable=trainable)


def load_base(name: str, *, device: str | torch.device | None = None,
              dtype: torch.dtype | None = None, load_in_4bit: bool = False,
              gradient_checkpointing: bool = False, attn_implementation: Optional[str] = None):
    """``(model, tokenizer)``: the base that LoRA adapters sit on, loaded as the run's settings
    say: 4-bit on the GPU (``load_4bit``, QLoRA) or as ``load_policy`` loads it. A fresh run and
    its resume both load through here, so a resumed run has the policy and KL reference that
    the saved run had, setting for setting."""
    if load_in_4bit:
        return load_4bit(name, gradient_checkpointing=gradient_checkpointing,
                         attn_implementation=attn_implementation)
    from . import load_policy

    return load_policy(name, device=device, dtype=dtype,
                       gradient_checkpointing=gradient_checkpointing,
                       attn_implementation=attn_implementation)


def load_lora_policy(base: str, directory: str | Path, *, trainable: bool = True,
                     device: str | torch.device | None = None, dtype: torch.dtype | None = None,
                     load_in_4bit: bool = False, gradient_checkpointing: bool = False,
                     attn_implementation: Optional[str] = None):
    """``(PolicyWithValue, tokenizer)`` from a directory that ``PolicyWithValue.save`` wrote for
    a LoRA policy (adapters + value_head.pt [+ tokenizer]), on top of the base model ``base``
    ("tiny", a hub id or a directory: what the run started from), loaded with the run's own
    ``load_in_4bit``, ``gradient_checkpointing`` and ``attn_implementation`` (``load_base``).
    The resume path of a LoRA run: ``PolicyWithValue.load`` cannot read such a directory (it
    holds no base weights)."""
    from . import VALUE_HEAD_FILE, PolicyWithValue, load_tokenizer

    directory = Path(directory)
    head_file = directory / VALUE_HEAD_FILE
    if not head_file.exists():
        raise FileNotFoundError(f"{head_file} not found: not saved by PolicyWithValue.save")
    lm, tokenizer = load_base(base, device=device, dtype=dtype, load_in_4bit=load_in_4bit,
                              gradient_checkpointing=gradient_checkpointing,
                              attn_implementation=attn_implementation)
    if (directory / "tokenizer_config.json").exists():
        tokenizer = load_tokenizer(str(directory))
    policy = PolicyWithValue(load_adapters(lm, directory, trainable=trainable))
    from ..runs.checkpoint import load_tensors

    policy.value_head.load_state_dict(load_tensors(head_file, map_location=policy.device))
    return policy, tokenizer


def merge_adapters(base: str, adapters: str | Path, output: str | Path, *,
                   dtype: Optional[torch.dtype] = None) -> Path:
    """Fold the adapters into the base weights and save a standalone model + tokenizer.

    ``output`` then loads with ``AutoModelForCausalLM.from_pretrained(output)`` (or
    ``load_policy(output)``) without peft. The merge runs on the CPU in fp32 (W + scale * B @ A
    is exact there, whatever the training precision), and the result is saved in ``dtype``,
    by default the base checkpoint's own dtype. The tokenizer comes from the adapter directory
    when it has one (a PolicyWithValue checkpoint), else from the base; a value_head.pt next to
    the adapters is copied too, so PolicyWithValue.load(output) also works. Written atomically.
    """
    from transformers import AutoConfig

    from ..runs.checkpoint import atomic_write_dir
    from . import VALUE_HEAD_FILE, load_policy, load_tokenizer, resolve_model

    adapters = Path(adapters)
    if dtype is None:  # the checkpoint's dtype, read before loading overrides it with fp32
        dtype = getattr(AutoConfig.from_pretrained(resolve_model(base)[0]), "dtype", None)
        dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype or torch.float32
    lm, tokenizer = load_policy(base, device="cpu", dtype=torch.float32)
    if (adapters / "tokenizer_config.json").exists():
        tokenizer = load_tokenizer(str(adapters))
    merged = load_adapters(lm, adapters, trainable=False).merge_and_unload()
    merged.to(dtype)
    merged.config.dtype = dtype

    def write(tmp: Path) -> None:
        merged.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if (adapters / VALUE_HEAD_FILE).exists():
            shutil.copy2(adapters / VALUE_HEAD_FILE, tmp / VALUE_HEAD_FILE)

    out = atomic_write_dir(output, write)
    log.info("merged %s + adapters %s -> %s", base, adapters, out)
    return out


__all__ = ["ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "LoraSettings", "QWEN3_TARGET_MODULES",
           "adapter_disabled", "apply_lora", "load_4bit", "load_adapters", "load_base",
           "load_lora_policy",
           "merge_adapters", "quantization_config", "save_adapters", "trainable_parameters"]
