"""Equality saturation: verified rules applied into an e-graph, the cheapest graph extracted."""

#: The default limits: e-nodes, seconds of saturation, iterations (here, not in `run`, so that
#: the command line's options show them without importing the e-graph).
MAX_ENODES, SECONDS, ITERATIONS = 50_000, 10.0, 1_000
