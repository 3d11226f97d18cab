"""The verl scale-out bridge: our games as verl 0.9 multi-turn agent-loop rollouts.

* ``games``: what the bridge knows about each game (environment, config, answer extraction,
  feedback messages, the secret shown in dataset rows). Pure Python; no verl.
* ``episode``: one episode as a token sequence (prompt, then policy tokens with mask 1 and
  environment tokens with mask 0), played against any async ``generate`` function. No verl.
* ``dataset``: the parquet exporter for ``verl.trainer.main_ppo`` (needs pyarrow).
* ``agent_loop``: ``GameAgentLoop``, the ``AgentLoopBase`` subclass registered as ``game_rl``
  (imports verl; install the ``verl`` extra).
* ``config/``: the agent-loop registration file and hydra configs (GRPO, PPO with a critic);
  ``launch.sh`` runs them. See README.md in this directory.

Importing this package does not import verl, so the exporter and the tests of ``games`` and
``episode`` run without it.
"""
