"""`ngrules show GRAPH`: a graph file as text, one node a line (and `--picture` to draw it)."""

from __future__ import annotations

from pathlib import Path

from ngrules.cli.common import (
    add_command,
    add_graph_argument,
    add_import_path_option,
    load_graph_argument,
)


def graph_lines(outputs) -> list[str]:
    """`%3 = Multiply(%1, %2)  [A:3, B:2] float32  slope=0.1  (rule mul_one)`, in order."""
    from ngrules.cli.picture import attribute_text, rule_name
    from ngrules.ir.graph import toposort

    nodes = toposort(outputs)
    ids = {n: f"%{i}" for i, n in enumerate(nodes)}
    lines = []
    for n in nodes:
        label = f"{n.op} {n.name}" if n.name else n.op
        args = f"({', '.join(ids[a] for a in n.args)})" if n.args else ""
        kind = (
            f"{n.axes!r} {n.dtype}" if n.outputs is None
            else "; ".join(f"{ax!r} {dt}" for ax, dt in n.outputs)
        )
        extra = "  ".join(attribute_text(n))
        rule = rule_name(n)
        line = f"{ids[n]:>5s} = {label}{args}  {kind}" + (f"  {extra}" if extra else "")
        lines.append(line + (f"  (rule {rule})" if rule else ""))
    marks = ", ".join(f"#{i} {ids[o]}" for i, o in enumerate(outputs))
    lines.append(f"outputs: {marks}")
    return lines


def run(args) -> int:
    from ngrules.cli import graphio
    from ngrules.cli.picture import picture_files, picture_line, save_picture
    from ngrules.ir.fileio import check_outputs

    if args.picture is not None:  # before any work: never an input, never a folder
        check_outputs(picture_files(args.picture), graphio.files(args.graph))
    from ngrules.errors import printable

    rules = None
    if args.rules:  # first: the graph may use the ops they declare
        from ngrules.cli.common import rules_or_library
        from ngrules.engine.reading import as_read

        rules = rules_or_library(args.rules, args.import_path)
    outputs = load_graph_argument(args)[0]
    if rules is not None:
        outputs = as_read(outputs, rules.rules)
    print("\n".join(printable(line) for line in graph_lines(outputs)))  # a model's names
    if args.picture is not None:
        picture = save_picture(outputs, args.picture, Path(args.picture).stem)
        print(picture_line(picture, args.picture))
    return 0


def register(sub) -> None:
    p = add_command(
        sub, "show", run, "print a graph file as text (and draw it)",
        "ngrules show g.json --picture g.dot", ops="explicit",
    )
    add_graph_argument(p)
    p.add_argument("--rules", nargs="+", metavar="PATH",
                   help="show the graph as these rules read it by default: the ONNX ops their "
                        "patterns read into lowered, layout views moved out of elementwise ops")
    add_import_path_option(p)
    p.add_argument("--picture", metavar="DOT",
                   help="also write Graphviz DOT (and SVG when Graphviz is installed)")
