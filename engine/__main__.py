"""python -m engine trace ... (see engine/cli.py)."""
from .cli import main

raise SystemExit(main())
