"""The release, in one place (the package, the CLI's --version and pyproject read it)."""

__version__ = "0.2.0"
