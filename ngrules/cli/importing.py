"""`ngrules import MODEL.onnx -o GRAPH.json`: an ONNX model as an ngrules graph file. Both files
are read and written by suffix (`graphio`), as every command does: an `-o` ending in `.onnx`
writes the imported graph back as ONNX."""

from __future__ import annotations

from ngrules.cli.common import add_command, add_length_option
from ngrules.errors import printable


def run(args) -> int:
    from ngrules.cli import graphio
    from ngrules.ir.fileio import check_outputs
    from ngrules.ir.graph import toposort

    check_outputs(graphio.output_files(args.output), graphio.files(args.model))  # before work
    graphio.check_graph_output(args.output)
    outputs, names, opset = graphio.load_with_opset(args.model, graphio.read_options(args))
    graphio.save(args.output, outputs, names, opset=graphio.written_opset(None, opset))
    nodes = len(toposort(outputs))
    labels = names or [f"output_{i}" for i in range(len(outputs))]
    print(printable(f"imported {args.model}: {nodes} nodes, outputs "
                    + ", ".join(f"{n} {o.axes!r}" for n, o in zip(labels, outputs))))
    return 0


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
