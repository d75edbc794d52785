"""The old import path of `ngrules.ir.ops`, kept so code written against it (the peers'
benchmark adapter, for one) still runs: the names are those of `ngrules.ir.ops`."""

from ngrules.ir.ops import *  # noqa: F403
