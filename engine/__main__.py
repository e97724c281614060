"""python -m engine bench|trace|fairness ... (see engine/cli.py)."""
from .cli import main

raise SystemExit(main())
