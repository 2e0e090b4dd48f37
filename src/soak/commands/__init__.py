"""The `soak` subcommands, one module each, named after the command: the top layer.

A command reads its options, calls the layers below and says what happened; soak.cli
maps a SoakError to its one line and exit code."""
