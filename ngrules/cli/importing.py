"""`ngrules import MODEL.onnx -o GRAPH.json`: an ONNX model as an ngrules graph file (an `-o`
ending in `.onnx` writes the imported graph back as ONNX, as every command writes by extension)."""

from __future__ import annotations

from ngrules.cli.common import add_command, add_length_option


def run(args) -> int:
    from ngrules.cli import graphio
    from ngrules.interop.onnx.importer import import_model
    from ngrules.ir.fileio import check_outputs
    from ngrules.ir.graph import toposort

    check_outputs(graphio.output_files(args.output), [args.model])  # before any work
    graphio.check_graph_output(args.output)
    imported = import_model(args.model, lengths=graphio.parse_lengths(args.length),
                            axis_names=_axis_names(args.axes))
    graphio.save(args.output, imported.outputs, imported.output_names)
    nodes = len(toposort(imported.outputs))
    print(f"imported {args.model}: {nodes} nodes, outputs "
          + ", ".join(f"{n} {o.axes!r}" for n, o in zip(imported.output_names, imported.outputs)))
    return 0


def _axis_names(items) -> dict[str, list[str | None]]:
    """`INPUT=A,B,C` (an empty name keeps the default) as {input: [names]}."""
    from ngrules.errors import NgrulesError

    out: dict[str, list[str | None]] = {}
    for item in items or ():
        value, _, names = item.partition("=")
        if not value or not names:
            raise NgrulesError(f"--axes expects INPUT=NAME,NAME,..., got {item!r}")
        out[value] = [n or None for n in names.split(",")]
    return out


def register(sub) -> None:
    p = add_command(
        sub,
        "import",
        run,
        "convert an ONNX model to an ngrules graph file (needs pip install 'ngrules[onnx]')",
        "ngrules import model.onnx -o g.json --length batch=8",
    )
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("-o", "--output", required=True, metavar="GRAPH.json")
    add_length_option(p)
    p.add_argument("--axes", action="append", metavar="INPUT=A,B,..",
                   help="name the axes of an input or initializer (repeatable)")
