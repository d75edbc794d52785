"""Equality saturation: verified rules applied into an e-graph, the cheapest graph extracted."""
