"""Running a graph again and again with its variables kept between runs (ngraph's executor).

`executor(outputs, *placeholders)` compiles the outputs once; each call feeds the placeholders
in order, feeds every variable its current value (its initial value on the first run), runs,
and then stores the assignments the run made (`Assign` nodes, in the order their `Sequential`
lists them). An output that is a variable gives its value after those stores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ngrules.errors import ExecutionError
from ngrules.ir.executor import Program
from ngrules.ir.graph import Node, toposort


class Executor:
    """A compiled graph whose variables keep their values from call to call. `state` maps
    each variable to its value; executors given one state dict share their variables."""

    def __init__(self, outputs: Node | Sequence[Node], *placeholders: Node,
                 state: dict[Node, np.ndarray] | None = None):
        self.single = isinstance(outputs, Node)
        self.outputs = [outputs] if self.single else list(outputs)
        self.placeholders = placeholders
        self.state = {} if state is None else state
        self.assigns = _assigns(self.outputs)
        self.variables = [n for n in toposort(self.outputs) if n.op == "Variable"]
        self.program = Program(self.outputs + self.assigns)

    def __call__(self, *values):
        if len(values) != len(self.placeholders):
            raise ExecutionError(f"this executor takes {len(self.placeholders)} value(s) (for "
                                 f"its placeholders, in order), got {len(values)}")
        feeds: dict = dict(zip(self.placeholders, values))
        feeds.update((v, self.state[v]) for v in self.variables if v in self.state)
        results = self.program.run(feeds)
        stored = results[len(self.outputs):]
        for node, value in zip(self.assigns, stored):
            self.state[node.args[0]] = np.array(value)
        out = [self.state.get(o, r) if o.op == "Variable" else r
               for o, r in zip(self.outputs, results)]
        return out[0] if self.single else out

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        return None


def _assigns(outputs: Sequence[Node]) -> list[Node]:
    """Every assignment under the outputs, in an order that stores the last one last: a
    Sequential's assignments in its order, after any it reaches through its arguments."""
    order: list[Node] = []
    for node in toposort(outputs):
        if node.op == "Assign":
            order.append(node)
        elif node.op == "Sequential":
            order.extend(a for a in node.args[1:] if a.op == "Assign")
    return order


def executor(outputs: Node | Sequence[Node], *placeholders: Node,
             state: dict[Node, np.ndarray] | None = None) -> Executor:
    """ngraph's `executor(results, *placeholders)`: call it with the placeholders' values."""
    return Executor(outputs, *placeholders, state=state)
