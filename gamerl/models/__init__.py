"""The models: loading policies and tokenizers (``loading``), the policy with its value head
(``PolicyWithValue``, ``SplitTrunk``), the tiny model and its corpus, the pretrained models
offline (``pretrained``) and LoRA adapters (``lora``). The common names are re-exported here."""

from .loading import *  # noqa: F401,F403
from .loading import ENDOFTEXT, IM_END, TINY_MARKER, VALUE_HEAD_FILE  # noqa: F401
