"""The policy with its value head: ``PolicyWithValue`` (logits ``[B, T, V]`` and values ``[B, T]``
from one trunk pass), ``ValueHead``, and ``SplitTrunk`` (train only the top layers: the frozen
layers run once, their output feeds every update pass)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import transformers
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from .loading import (_load_lm, default_attn_implementation, default_device, default_dtype,
                      load_policy)
from .tiny import VALUE_HEAD_FILE

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
    never changes during an epoch's updates, so the trainer keeps what the rollout computed
    (``gamerl.core.bottom_states``; where that is missing it runs the bottom once, when
    scoring), and every scoring and update pass (and the reference's, whose bottom is the same
    frozen weights) runs only the top: n_top / L of a full pass
    (``TrainConfig.trainable_layers``)."""

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


__all__ = ["PolicyWithValue", "SplitTrunk", "ValueHead", "count_parameters",
           "freeze_below_top_layers", "lm_head", "lm_trunk", "positions_from_mask", "unwrap_lm"]
