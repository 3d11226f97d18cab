"""The user docs stay readable: a short README whose two commands come first, a word budget for
the whole set, no words of the project's own process (issue numbers, commit hashes in prose,
machine nicknames), links that lead somewhere, and every results table written by
bench/doc_numbers.py from its committed run files. Fast: reads files, trains nothing.

The user docs are README.md, PASSWORD_GAME_README.md and docs/**/*.md except the experiments log
(docs/experiments.md), which is where dated history, commits and machines belong."""

import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXPERIMENTS = ROOT / "docs" / "experiments.md"
README_WORDS, USER_DOCS_WORDS = 700, 20_000

_spec = importlib.util.spec_from_file_location("doc_numbers", ROOT / "bench" / "doc_numbers.py")
doc_numbers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doc_numbers)


def user_docs() -> list[Path]:
    docs = [README, ROOT / "PASSWORD_GAME_README.md"]
    docs += sorted(p for p in (ROOT / "docs").rglob("*.md") if p != EXPERIMENTS)
    return docs


def words(path: Path) -> int:
    return len(path.read_text().split())


BLOCK = re.compile(r"<!-- ([\w-]+):begin[^>]*-->\n.*?<!-- \1:end -->", re.S)


def prose(text: str) -> str:
    """The text a person wrote: without the blocks bench/doc_numbers.py writes (their stamp
    line names a commit and a CPU model on purpose)."""
    return BLOCK.sub("", text)


# ----------------------------------------------------------------------------- sizes


def test_readme_is_short_and_its_two_commands_come_first():
    assert words(README) <= README_WORDS, f"README.md: {words(README)} words"
    lines = README.read_text().splitlines()
    for marker, command in (("<!-- main-command -->", "python -m gamerl train --preset tiny"),
                            ("<!-- test-command -->", "python -m pytest")):
        at = lines.index(marker)
        assert lines[at + 1] == "```bash" and lines[at + 2].endswith(command), marker
        assert at + 3 <= 40, f"{marker}'s command is on line {at + 3}, past line 40"


def test_the_user_docs_fit_their_budget():
    counts = {p.relative_to(ROOT).as_posix(): words(p) for p in user_docs()}
    assert sum(counts.values()) <= USER_DOCS_WORDS, counts


def test_the_experiments_log_is_apart_and_points_at_the_full_history():
    text = EXPERIMENTS.read_text()
    assert "git show 5de0b7f:docs/benchmarks.md" in text
    assert "git show 5de0b7f:PASSWORD_GAME_README.md" in text


# ----------------------------------------------------------------------------- process words

PROCESS_WORDS = {
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "a lease": re.compile(r"\bleases?\b", re.I),
    "the seed's (say: the original notebook's)": re.compile(r"\bthe seed's\b", re.I),
    "a machine nickname": re.compile(
        r"\b(?:the|this) (?:CI(?:'s)? machine|(?:\d-core )?(?:Intel )?Xeon|(?:\d-core )?"
        r"(?:AMD )?EPYC)\b|\bCI's machine\b|\bthis session\b", re.I),
    "a commit hash": re.compile(r"(?<![\w.-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}"
                                r"(?![\w-])"),
}


# Phrases a generated page takes from the code's comments, until the comment is reworded there:
# docs/reference.md quotes gamerl/games/password_game.py's comment on reward_per_rule.
@pytest.mark.parametrize("path", user_docs(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_process_words(path):
    text = prose(path.read_text())
    found = [(what, m.group(0)) for what, pattern in PROCESS_WORDS.items()
             for m in pattern.finditer(text)]
    assert not found, f"{path.relative_to(ROOT)}: {found}"


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


@pytest.mark.parametrize("path", user_docs(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_dates_only_in_stamps(path):
    """A date in prose says when something was measured, in the same paragraph; history goes
    to the experiments log."""
    bad = [paragraph[:120] for paragraph in re.split(r"\n\s*\n", prose(path.read_text()))
           if DATE.search(paragraph) and "measured" not in paragraph.lower()]
    assert not bad, f"{path.relative_to(ROOT)}: dates outside a measurement stamp: {bad}"


# ----------------------------------------------------------------------------- links

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


@pytest.mark.parametrize("path", user_docs(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_lead_somewhere(path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{path.relative_to(ROOT)}: {broken}"


def test_slugs_are_github_s():
    assert slug("Qwen3-0.6B on a GPU") == "qwen3-06b-on-a-gpu"
    assert slug("Wordle: smollm2-135m --task wordle") == "wordle-smollm2-135m---task-wordle"
    assert slug("The `tiny` preset") == "the-tiny-preset"


def test_training_md_is_gone_and_nothing_links_it():
    assert not (ROOT / "docs" / "training.md").exists()
    for path in user_docs():
        assert "training.md" not in path.read_text(), path


# ----------------------------------------------------------------------------- result tables


def test_the_results_page_holds_every_results_block():
    text = (ROOT / "docs" / "results.md").read_text()
    for name in ("main-run", "quick-run", "r12-preset", "r26-preset"):
        doc_numbers.read_block(text, name)  # ValueError if missing


def _spread_blocks():
    """(doc, block name, the run files its begin marker names) for each spread-written block."""
    found = []
    for path in user_docs():
        for m in re.finditer(r"<!-- ([\w-]+):begin: written by `python bench/doc_numbers.py "
                             r"(spread [^`]*)`", path.read_text()):
            args = shlex.split(m.group(2))
            at = args.index("--write")
            found.append((path, m.group(1), args[1:at]))
    return found


def test_spread_blocks_name_their_run_files():
    blocks = _spread_blocks()
    assert any(name == "r12-preset" for _, name, _ in blocks)
    for path, name, files in blocks:
        assert files and all(f.startswith("bench/results/") and (ROOT / f).exists()
                             for f in files), (path, name, files)


@pytest.mark.parametrize("path,name,files", _spread_blocks(),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_a_results_table_is_what_its_run_files_give(path, name, files):
    """Every number of the block comes from its committed run files: rewrite it with the
    command in its begin marker when they change."""
    summaries = [json.loads((ROOT / f).read_text()) for f in files]
    expected = doc_numbers.spread_table(summaries) + "\n" + doc_numbers.stamp_line(summaries)
    assert doc_numbers.read_block(path.read_text(), name) == expected, (
        f"{path.relative_to(ROOT)}'s {name} block differs from {files}: "
        f"python bench/doc_numbers.py spread {' '.join(files)} --write {name} "
        f"{path.relative_to(ROOT)}")


def test_the_readme_presets_table_is_what_its_run_files_give():
    """README's one-row-per-preset table: each row from its kept runs, the files named in the
    block's begin marker (rewrite it with that command when they change)."""
    text = README.read_text()
    m = re.search(r"<!-- presets:begin: written by `python bench/doc_numbers.py presets "
                  r"([^`]*) --write`", text)
    assert m, "README.md has no presets block written by bench/doc_numbers.py presets"
    groups = [[json.loads((ROOT / f).read_text()) for f in group.split(",")]
              for group in m.group(1).split()]
    assert {g[0]["config"]["preset"] for g in groups} >= {"smollm2-135m-r12", "smollm2-135m"}
    assert doc_numbers.read_block(text, "presets") == doc_numbers.presets_table(groups)


def test_the_peer_benchmark_table_is_what_its_result_file_gives():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    m = re.search(r"<!-- peer-bench:begin: written by `python bench/doc_numbers.py peer (\S+) ", text)
    assert m, "docs/benchmarks.md has no peer-bench block written by bench/doc_numbers.py peer"
    result = json.loads((ROOT / m.group(1)).read_text())
    assert doc_numbers.read_block(text, "peer-bench") == doc_numbers.peer_table(result, m.group(1))
