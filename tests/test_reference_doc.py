"""docs/reference.md is what gamerl.config.reference writes from the parser and TrainConfig: a
new flag, setting or default that is not in the page fails here (rewrite it with
``python -m gamerl.config.reference --write``)."""

from gamerl.config.reference import DOC, reference_markdown
from gamerl.config.train_config import SETTING_SECTION


def test_the_reference_page_is_the_code_s():
    assert DOC.read_text() == reference_markdown(), (
        "docs/reference.md is stale: python -m gamerl.config.reference --write")


def test_every_setting_is_in_the_reference():
    text = DOC.read_text()
    for name in SETTING_SECTION:
        assert f"| `{name}` |" in text, name
