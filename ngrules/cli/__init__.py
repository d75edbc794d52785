"""The command line (`ngrules ...`), the demo and graph pictures: the top layer."""

from ngrules.cli.main import main

__all__ = ["main"]
