"""The command line (`ngrules ...`), the demo and graph pictures: the top layer."""

from ngrules.cli.main import command_line, main

__all__ = ["command_line", "main"]
