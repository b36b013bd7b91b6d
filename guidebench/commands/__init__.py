"""CLI subcommands: every module here exposes `register(subparsers)` and is discovered by the CLI."""
