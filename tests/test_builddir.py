"""gamerl.models.builddir: a model directory appears whole or not at all."""

import json

import pytest

from gamerl.models.builddir import build_atomically, is_current

MARKER = "marker.json"


def write_model(tmp):
    (tmp / "config.json").write_text("{}")
    return {"extra": 1}


def test_build_writes_marker_and_renames_into_place(tmp_path):
    out = build_atomically(tmp_path / "m", write_model, MARKER, {"v": 2})
    assert json.loads((out / MARKER).read_text()) == {"v": 2, "extra": 1}
    assert is_current(out, MARKER, {"v": 2}) and not is_current(out, MARKER, {"v": 3})
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no temporary directory left


def test_failed_build_leaves_nothing_and_raises(tmp_path):
    def broken(tmp):
        (tmp / "config.json").write_text("{}")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        build_atomically(tmp_path / "m", broken, MARKER, {"v": 1})
    assert list(tmp_path.iterdir()) == []


def test_error_forgiven_when_another_process_built_it_but_never_an_interrupt(tmp_path):
    out = tmp_path / "m"

    def racing(error):
        def write(tmp):  # another process renames its complete build into place meanwhile
            build_atomically(out, write_model, MARKER, {"v": 1})
            raise error
        return write

    assert build_atomically(out, racing(OSError("rename lost the race")), MARKER, {"v": 1}) == out
    with pytest.raises(KeyboardInterrupt):
        build_atomically(out, racing(KeyboardInterrupt()), MARKER, {"v": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["m"]
