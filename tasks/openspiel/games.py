"""The registry of supported OpenSpiel games: parameters, rules summaries, renderers, tags.

Every entry is a two-player, zero-sum, turn-based OpenSpiel game with terminal rewards. The model
plays one seat; the other seat is a bot. What the model sees of the position is drawn by the
entry's renderer from the *model's* view only (the observation string where the game has one,
else the information-state string), so hidden cards and dice never leak.

This module does not import ``pyspiel`` (renderers only call methods on the state they are
given), so ``python -m tasks.openspiel games`` and the server's ``/games`` work without it.

Difficulty tags, for a curriculum: ``simple`` (tic_tac_toe, kuhn_poker) and ``harder`` (the rest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

SIMPLE, HARDER = "simple", "harder"

Renderer = Callable[[Any, int, list], str]  # (pyspiel state, model seat, public history) -> text


@dataclass(frozen=True)
class GameSpec:
    """One supported game.

    ``name`` is our registry key (what clients send); ``openspiel_name`` and ``params`` are what
    ``pyspiel.load_game`` receives. ``marks`` are the players' marks that prefix move names
    (``x(1,1)``, ``x3``): with marks, a move may be written without its mark. ``seat_names``
    describe each seat in the text ("x (moves first)"). ``render`` draws the position for the
    model's seat. ``reward_scale`` divides chip returns into [-1, 1] (``1 / max_utility``).
    ``aliases`` are accepted synonyms (lower-case word -> move name), e.g. poker's ``check``.
    ``public_chance(k, outcome)`` names the ``k``-th (0-based) chance outcome of an episode if
    every player sees it (Leduc's public card), which then appears in the move history; it
    returns ``None`` for private ones (deals, dice), which never do.
    """

    name: str
    openspiel_name: str
    title: str
    difficulty: str
    rules: str
    render: Renderer
    seat_names: tuple[str, str]
    params: dict[str, Any] = field(default_factory=dict)
    marks: tuple[str, ...] = ()
    reward_scale: float = 1.0
    perfect_information: bool = True
    example_answer: str = ""
    public_chance: Optional[Callable[[int, int], Optional[str]]] = None
    aliases: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """JSON-able description (``/games``, ``python -m tasks.openspiel games``)."""
        return {"name": self.name, "openspiel_name": self.openspiel_name, "title": self.title,
                "difficulty": self.difficulty, "params": dict(self.params),
                "players": 2, "seats": list(self.seat_names),
                "perfect_information": self.perfect_information,
                "reward_scale": self.reward_scale, "rules": self.rules}


# ============================================================================ renderers
def _own_view(state: Any, seat: int) -> str:
    """The observation string for ``seat`` where the game has one, else the information state."""
    game_type = state.get_game().get_type()
    if game_type.provides_observation_string:
        return state.observation_string(seat)
    return state.information_state_string(seat)


def render_tic_tac_toe(state: Any, seat: int, history: list) -> str:
    rows = [line for line in _own_view(state, seat).splitlines() if line.strip()]
    out = ["    0 1 2"]
    for r, line in enumerate(rows):
        out.append(f"{r}   " + " ".join(line.strip()))
    return "\n".join(out)


def render_connect_four(state: Any, seat: int, history: list) -> str:
    rows = [line for line in _own_view(state, seat).splitlines() if line.strip()]
    out = [" ".join(line.strip()) for line in rows]
    out.append(" ".join(str(c) for c in range(len(rows[0].strip()))) + "   <- column")
    return "\n".join(out)


def render_hex(state: Any, seat: int, history: list) -> str:
    rows = [line.split() for line in _own_view(state, seat).splitlines() if line.strip()]
    n = len(rows[0])
    letters = " ".join("abcdefghijklmnopqrstuvwxyz"[:n])
    out = ["    " + letters]
    for r, cells in enumerate(rows):
        out.append(f"{r + 1:>2}  " + " " * r + " ".join(cells))
    return "\n".join(out)


def render_verbatim(state: Any, seat: int, history: list) -> str:
    """The game's own observation string (othello, breakthrough draw labelled boards)."""
    return "\n".join(line.rstrip() for line in _own_view(state, seat).rstrip().splitlines())


KUHN_CARDS = "JQK"


def render_kuhn(state: Any, seat: int, history: list) -> str:
    info = state.information_state_string(seat)  # e.g. "1pb": my card, then p(ass)/b(et)s
    card = KUHN_CARDS[int(info[0])] if info[:1].isdigit() else "?"
    put_in = [1, 1]
    for h in history:
        if h["move"] == "Bet":
            put_in[h["player"]] += 1
    return (f"Your card: {card}   (deck J < Q < K; the opponent holds one of the other two)\n"
            f"Pot: {sum(put_in)} chips (you put in {put_in[seat]}, the opponent "
            f"{put_in[1 - seat]})")


def _leduc_fields(info: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in re.findall(r"\[([^:\]]+):([^\]]*)\]", info)}


def leduc_card(card: str) -> str:
    try:
        c = int(card)
    except ValueError:
        return "?"
    return "JQK"[c // 2] if 0 <= c < 6 else "not dealt yet"


def render_leduc(state: Any, seat: int, history: list) -> str:
    info = state.information_state_string(seat)
    f = _leduc_fields(info)
    rnd = re.search(r"\[Round (\d+)\]", info)
    lines = [f"Your card: {leduc_card(f.get('Private', '-1'))}",
             f"Public card: {leduc_card(f['Public']) if 'Public' in f else 'not dealt yet'}",
             f"Betting round: {rnd.group(1) if rnd else '?'} of 2"]
    money = f.get("Money", "").split()
    if len(money) == 2 and not state.is_terminal():  # at the end the pot has been paid out
        mine, theirs = 100 - int(money[seat]), 100 - int(money[1 - seat])
        lines.append(f"Pot: {mine + theirs} chips (you put in {mine}, the opponent {theirs})")
    return "\n".join(lines)


def render_liars_dice(state: Any, seat: int, history: list) -> str:
    info = state.information_state_string(seat)  # e.g. "6 1-1 2-3": my die, then the bids
    die = info.split()[0] if info.strip() else "?"
    bids = [h["move"] for h in history if h["move"] != "Liar"]
    last = f"the last bid is {bids[-1]}" if bids else "no bid yet"
    return f"Your die: {die}   (the opponent's die is hidden)\nDice in play: 2; {last}"


# ============================================================================ the registry
GAMES: dict[str, GameSpec] = {}


def _register(spec: GameSpec) -> None:
    GAMES[spec.name] = spec


_register(GameSpec(
    name="tic_tac_toe", openspiel_name="tic_tac_toe", title="Tic-tac-toe", difficulty=SIMPLE,
    seat_names=("x (moves first)", "o (moves second)"), marks=("x", "o"),
    rules=("Players take turns putting their mark (x or o) in an empty cell of a 3x3 grid. Three "
           "marks in a row, column or diagonal win; a full grid without a line is a draw. A move "
           "is written mark(row,col), rows and columns numbered 0-2 from the top left: x(1,1) is "
           "the centre."),
    render=render_tic_tac_toe, example_answer="x(1,1)"))

_register(GameSpec(
    name="connect_four", openspiel_name="connect_four", title="Connect Four", difficulty=HARDER,
    seat_names=("x (moves first)", "o (moves second)"), marks=("x", "o"),
    rules=("A 6-row, 7-column grid stands upright. Players take turns dropping a disc (x or o) "
           "into a column that is not full; it falls to the lowest empty cell. Four discs in a "
           "line (horizontal, vertical or diagonal) win; a full grid is a draw. A move is "
           "written mark + column, columns 0-6 from the left: x3 drops an x into the middle "
           "column. The bottom line of the board is the bottom of the grid."),
    render=render_connect_four, example_answer="x3"))

_register(GameSpec(
    name="kuhn_poker", openspiel_name="kuhn_poker", title="Kuhn poker", difficulty=SIMPLE,
    seat_names=("the first to act", "the second to act"),
    reward_scale=0.5, perfect_information=False,
    rules=("A deck of three cards, J < Q < K. Each player puts 1 chip in the pot and gets one "
           "card; the third card is not used. Player 0 acts first. Moves: Pass (check, or fold "
           "when facing a bet) and Bet (put 1 more chip in, or call a bet). If a bet is called, "
           "or both players pass, the higher card wins the pot; a player who passes facing a "
           "bet folds and loses what they put in. Your reward is the chips you win or lose, "
           "divided by 2 (at most 2 chips change hands)."),
    render=render_kuhn, example_answer="Bet",
    aliases={"check": "Pass", "fold": "Pass", "call": "Bet"}))

_register(GameSpec(
    name="leduc_poker", openspiel_name="leduc_poker", title="Leduc poker", difficulty=HARDER,
    seat_names=("the first to act in each round", "the second to act in each round"),
    public_chance=lambda k, a: f"public card {leduc_card(str(a))} shown" if k >= 2 else None,
    reward_scale=1.0 / 13.0, perfect_information=False,
    rules=("A deck of six cards: two J, two Q, two K. Each player puts 1 chip in the pot and gets "
           "one private card. Round 1 of betting (a raise is 2 chips), then one public card is "
           "shown and round 2 follows (a raise is 4 chips); at most two raises per round. "
           "Moves: Fold (give up the pot), Call (match the current bet, or check when there is "
           "none) and Raise. At the showdown a private card that pairs the public card wins; "
           "otherwise the higher card wins, and equal ranks split the pot. Your reward is the "
           "chips you win or lose divided by 13 (the most that can change hands)."),
    render=render_leduc, example_answer="Call", aliases={"check": "Call", "bet": "Raise"}))

_register(GameSpec(
    name="liars_dice", openspiel_name="liars_dice", title="Liar's dice", difficulty=HARDER,
    seat_names=("the first to bid", "the second to bid"), perfect_information=False,
    rules=("Each player rolls one six-sided die in secret (2 dice in play). Players take turns "
           "either bidding or calling Liar. A bid q-f claims that at least q of the 2 dice show "
           "face f; a 6 is wild and counts as every face. Each bid must be higher than the last "
           "in the order 1-1 < 1-2 < ... < 1-6 < 2-1 < ... < 2-6. Liar challenges the last "
           "bid: the dice are shown, and if the bid holds the bidder wins, otherwise the "
           "challenger wins. Win +1, loss -1."),
    render=render_liars_dice, example_answer="1-3",
    aliases={"challenge": "Liar", "call": "Liar"}))

_register(GameSpec(
    name="hex", openspiel_name="hex", params={"board_size": 5}, title="Hex (5x5)",
    difficulty=HARDER, seat_names=("x (moves first; joins top and bottom)",
                                   "o (moves second; joins left and right)"),
    rules=("Players take turns placing a stone in an empty cell of a 5x5 rhombus of hexagons. "
           "x wins by a connected chain of x stones from the top row (1) to the bottom row (5); "
           "o wins by a chain from the left column (a) to the right column (e). Each cell "
           "touches six others: left and right in its row, the two above it (same column and "
           "one to the right) and the two below it (same column and one to the left), as the "
           "slanted drawing shows. There are no draws. A move is a cell name, column letter "
           "then row number: c3 is the centre."),
    render=render_hex, example_answer="c3"))

_register(GameSpec(
    name="othello", openspiel_name="othello", title="Othello", difficulty=HARDER,
    seat_names=("Black, x (moves first)", "White, o (moves second)"),
    rules=("An 8x8 board starts with four discs in the centre. Players take turns placing a disc "
           "of their colour so that at least one straight line (row, column or diagonal) of "
           "opponent discs lies between the new disc and another disc of theirs; those "
           "opponent discs flip to the mover's colour. A player with no such move must answer "
           "pass. The game ends when neither player can move; more discs wins, equal is a "
           "draw. A move is a square name, column letter then row number: d3."),
    render=render_verbatim, example_answer="d3"))

_register(GameSpec(
    name="breakthrough", openspiel_name="breakthrough", params={"rows": 6, "columns": 6},
    title="Breakthrough (6x6)", difficulty=HARDER,
    seat_names=("b, black (moves first, starts on rows 5-6, moves down)",
                "w, white (starts on rows 1-2, moves up)"),
    rules=("Each player starts with two full rows of pieces. A piece moves one square forward, "
           "straight or diagonally, to an empty square, or captures an opponent piece one "
           "square diagonally forward (never straight ahead). The first player to reach the "
           "far row, or to capture every opponent piece, wins. A move is the from-square then "
           "the to-square, e.g. a5a4 (columns a-f, rows 1-6); a trailing * marks a capture "
           "(e4f3*) and may be left out of answers."),
    render=render_verbatim, example_answer="a5a4"))

# The built-in opponents a session can name (game.OpenSpielGame also takes a bot object); here,
# beside the game table, so that the trainer reads them without importing pyspiel.
OPPONENTS = ("random", "mcts")
SIMPLE_GAMES = tuple(n for n, s in GAMES.items() if s.difficulty == SIMPLE)
HARDER_GAMES = tuple(n for n, s in GAMES.items() if s.difficulty == HARDER)


def get_spec(name: str) -> GameSpec:
    """The registry entry, or ``ValueError`` naming the supported games."""
    spec = GAMES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ValueError(f"unknown game {name!r}; supported games: {', '.join(GAMES)}")
    return spec


def list_games() -> list[dict[str, Any]]:
    return [spec.summary() for spec in GAMES.values()]
