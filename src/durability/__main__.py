"""`python -m durability`: the `durability` command."""

from durability.cli import main

raise SystemExit(main())
