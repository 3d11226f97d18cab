"""Bridges from our games and policies to other RL frameworks (today: verl, in ``verl/``)."""
