"""The old import path of `ngrules.ir.opgen`, kept so code written against it (the peers'
benchmark adapter, for one) still runs: the names are those of `ngrules.ir.opgen`."""

from ngrules.ir.opgen import *  # noqa: F403
