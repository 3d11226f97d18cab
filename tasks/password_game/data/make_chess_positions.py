"""Generate ``chess_mate_in_one.json``: positions where the side to move mates in one.

How the data is generated
-------------------------
Semi-random games are played from the standard starting position with
``python-chess`` and a fixed-seed ``random.Random(SEED)``:

* at every ply, with probability ``P_CAPTURE`` a random capture is played (if
  any exists), otherwise with probability ``P_CHECK`` a random checking move
  (if any), otherwise a uniformly random legal move;
* a game stops at ``MAX_PLIES`` plies or when it is over.

From ply ``MIN_PLY`` on, before each move, every legal move of the side to move
is tried; a position is recorded when

* it has between 1 and ``MAX_MATES`` (= 3) checkmating moves,
* none of those mating moves is a promotion (design choice: keeps answers to
  plain piece/pawn moves, and avoids "=Q#" vs "=R#" duplicates),
* it has at least ``MIN_PIECES`` (= 6) pieces on the board (kings included),
* it has not been recorded before (compared by EPD, i.e. ignoring the move
  clocks),
* the game has not already yielded ``MAX_PER_GAME`` (= 2) positions and at least
  ``MIN_GAP`` plies have passed since the previous recorded one,
* the side to move has not already reached its quota (``TARGET // 2`` each), so
  that exactly half of the positions have white to move and half black.

Each entry is ``{"fen": ..., "turn": "white"|"black", "mates": [SAN, ...]}``
where ``mates`` is the sorted list of the SAN (including the trailing ``#``) of
every legal move that checkmates.  Before writing, every entry is re-verified
from its FEN alone: each listed SAN must parse as a legal move and give
``board.is_checkmate()``, and no other legal move may checkmate.

The output is deterministic: re-running the script rewrites an identical file.

Re-run (from the repository root)::

    python tasks/password_game/data/make_chess_positions.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import chess

SEED = 20240613
TARGET = 320  # total number of positions (half white to move, half black)
MAX_GAMES = 20000  # safety bound on the number of games played
MAX_PLIES = 160
MIN_PLY = 12
MAX_MATES = 3
MIN_PIECES = 6
MAX_PER_GAME = 2
MIN_GAP = 8
P_CAPTURE = 0.45
P_CHECK = 0.25

OUT_PATH = Path(__file__).resolve().parent / "chess_mate_in_one.json"


def checking_moves(board: chess.Board, legal: list[chess.Move]) -> list[chess.Move]:
    return [m for m in legal if board.gives_check(m)]


def mating_moves(board: chess.Board, checks: list[chess.Move]) -> list[chess.Move]:
    """The moves among ``checks`` (all checking moves) that deliver checkmate."""
    mates = []
    for move in checks:
        board.push(move)
        if board.is_checkmate():
            mates.append(move)
        board.pop()
    return mates


def choose_move(
    board: chess.Board,
    legal: list[chess.Move],
    checks: list[chess.Move] | None,
    rng: random.Random,
) -> chess.Move:
    r = rng.random()
    if r < P_CAPTURE:
        captures = [m for m in legal if board.is_capture(m)]
        if captures:
            return rng.choice(captures)
    elif r < P_CAPTURE + P_CHECK:
        if checks is None:
            checks = checking_moves(board, legal)
        if checks:
            return rng.choice(checks)
    return rng.choice(legal)


def generate() -> list[dict]:
    rng = random.Random(SEED)
    quota = {chess.WHITE: TARGET // 2, chess.BLACK: TARGET - TARGET // 2}
    seen: set[str] = set()
    entries: list[dict] = []
    for _ in range(MAX_GAMES):
        if all(q == 0 for q in quota.values()):
            break
        board = chess.Board()
        taken = 0
        last_ply = -MIN_GAP
        for ply in range(MAX_PLIES):
            if board.is_game_over(claim_draw=False):
                break
            legal = list(board.legal_moves)
            checks = None
            if (
                ply >= MIN_PLY
                and taken < MAX_PER_GAME
                and ply - last_ply >= MIN_GAP
                and quota[board.turn] > 0
                and len(board.piece_map()) >= MIN_PIECES
            ):
                checks = checking_moves(board, legal)
                mates = mating_moves(board, checks)
                if (
                    1 <= len(mates) <= MAX_MATES
                    and not any(m.promotion for m in mates)
                    and board.epd() not in seen
                ):
                    seen.add(board.epd())
                    entries.append(
                        {
                            "fen": board.fen(),
                            "turn": "white" if board.turn == chess.WHITE else "black",
                            "mates": sorted(board.san(m) for m in mates),
                        }
                    )
                    quota[board.turn] -= 1
                    taken += 1
                    last_ply = ply
            board.push(choose_move(board, legal, checks, rng))
    return entries


def verify(entry: dict) -> None:
    """Independent check of one entry, starting from its FEN only."""
    board = chess.Board(entry["fen"])
    assert board.is_valid(), entry
    assert entry["turn"] == ("white" if board.turn == chess.WHITE else "black"), entry
    assert len(board.piece_map()) >= MIN_PIECES, entry
    mates = entry["mates"]
    assert 1 <= len(mates) <= MAX_MATES and mates == sorted(set(mates)), entry
    listed = set()
    for san in mates:
        assert san.endswith("#"), entry
        move = board.parse_san(san)  # raises if illegal or ambiguous
        assert move in board.legal_moves and board.san(move) == san, entry
        board.push(move)
        assert board.is_checkmate(), entry
        board.pop()
        listed.add(move)
    # brute force: no other legal move mates (no gives_check shortcut here)
    for move in board.legal_moves:
        board.push(move)
        is_mate = board.is_checkmate()
        board.pop()
        assert is_mate == (move in listed), (entry, move)


def main() -> None:
    entries = generate()
    assert len(entries) == TARGET, len(entries)
    for entry in entries:
        verify(entry)
    assert len({chess.Board(e["fen"]).epd() for e in entries}) == len(entries)
    n_white = sum(e["turn"] == "white" for e in entries)
    OUT_PATH.write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(entries)} positions ({n_white} white to move) to {OUT_PATH}")


if __name__ == "__main__":
    main()
