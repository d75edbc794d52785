"""What saturation changed and why: the changed regions of the extracted graph with the rules
that led there, and a picture of a small e-graph with the chosen e-nodes.

A *region* is a connected set of extracted nodes that are not in the input graph. Its rules
are those that built its nodes and those whose matches joined its classes with other terms,
in the order they were applied (`EGraph.history`): the chain that made the region equal to
the input's terms, with any other joins of those classes (a superset of the chain the
extraction used).
"""

from __future__ import annotations

from dataclasses import dataclass

from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node, toposort

#: The most e-nodes a picture of an e-graph shows.
PICTURE_LIMIT = 300


@dataclass
class Region:
    """Extracted nodes not in the input, connected through their arguments; the rules that
    led there (name, location) in the order they were applied."""

    nodes: list[Node]
    rules: list[tuple[str, str]]

    def __str__(self) -> str:
        top = self.nodes[-1]
        ops = ", ".join(n.op for n in self.nodes)
        chain = " -> ".join(f"{name} ({where})" for name, where in self.rules) or "none"
        return f"{top.op} {top.axes!r} ({len(self.nodes)} new: {ops})\n    rules: {chain}"


def regions(result, inputs: list[Node]) -> list[Region]:
    """The changed regions of `result.outputs` against the input graph `inputs`."""
    eg = result.egraph
    old = set(toposort(inputs))
    new = [n for n in toposort(result.outputs) if n not in old]
    near: dict[Node, list[Node]] = {n: [] for n in new}
    for n in new:
        for a in n.args:
            if a in near:
                near[n].append(a)
                near[a].append(n)
    out, seen = [], set()
    for start in new:
        if start in seen:
            continue
        seen.add(start)
        stack, found = [start], set()
        while stack:
            n = stack.pop()
            found.add(n)
            for m in near[n]:
                if m not in seen:
                    seen.add(m)
                    stack.append(m)
        nodes = [n for n in new if n in found]  # arguments first
        classes = {eg.class_of(n) for n in nodes}
        made = [result.extraction.choice[c] for c in classes]
        steps = [(e.serial, e.rule) for e in made if e.rule is not None]
        steps += [(when, rule) for rule, a, b, when in eg.history
                  if eg.find(a) in classes or eg.find(b) in classes]
        out.append(Region(nodes, _named(rule for _, rule in sorted(steps, key=_first))))
    return out


def _first(step: tuple[int, object]) -> int:
    return step[0]


def _named(rules) -> list[tuple[str, str]]:
    """Each rule once, in order of first application, as (name, location)."""
    seen: dict[str, str] = {}
    for rule in rules:
        name = getattr(rule, "name", str(rule))
        seen.setdefault(name, getattr(rule, "location", "built-in"))
    return list(seen.items())


def egraph_dot(result, title: str = "egraph") -> str:
    """The e-graph under the outputs as Graphviz DOT: a dashed box per class, its e-nodes
    inside (those of the extracted graph filled, each labelled with the rule that built it),
    an edge from each e-node to each argument class."""
    eg, choice = result.egraph, result.extraction.choice
    classes = eg.reachable(result.roots)
    size = sum(len(eg.classes[c]) for c in classes)
    if size > PICTURE_LIMIT:
        raise NgrulesError(
            f"the e-graph has {size} e-nodes under the outputs; pictures are drawn up to "
            f"{PICTURE_LIMIT} (lower --max-enodes or --max-iterations)"
        )
    lines = [f'digraph "{_quote(title)}" {{', "  compound=true; rankdir=BT;",
             '  node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];']
    first = {c: f"e{c}_0" for c in classes}
    used = _used(choice, [eg.find(r) for r in result.roots])
    for c in classes:
        lines.append(f'  subgraph cluster_{c} {{ label="class {c}"; style=dashed; '
                     'fontname="Helvetica"; fontsize=9;')
        for k, enode in enumerate(eg.classes[c]):
            label = enode.op + (f"\\n{_quote(_rule_name(enode.rule))}" if enode.rule else "")
            chosen = c in used and choice[c] is enode
            style = ', style="rounded,filled,bold", fillcolor="#ffd966"' if chosen else ""
            lines.append(f'    e{c}_{k} [label="{label}"{style}];')
        lines.append("  }")
    for c in classes:
        for k, enode in enumerate(eg.classes[c]):
            for a in dict.fromkeys(enode.args):
                lines.append(f"  e{c}_{k} -> {first[a]} [lhead=cluster_{a}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _used(choice: dict, roots: list[int]) -> set[int]:
    """The classes of the extracted graph: reached from the roots through the choice."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        c = stack.pop()
        if c not in seen:
            seen.add(c)
            stack.extend(choice[c].args)
    return seen


def _rule_name(rule) -> str:
    return getattr(rule, "name", str(rule))


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
