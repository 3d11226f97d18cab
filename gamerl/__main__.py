"""``python -m gamerl``: see gamerl/cli.py."""

from .cli import main

raise SystemExit(main())
