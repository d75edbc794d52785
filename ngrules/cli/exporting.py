"""`ngrules export GRAPH.json -o MODEL.onnx`: an ngrules graph file as a checked ONNX model."""

from __future__ import annotations

from ngrules.cli.common import add_command


def run(args) -> int:
    from ngrules.cli.graphio import check_graph_output, files, output_files, save
    from ngrules.ir.fileio import check_outputs
    from ngrules.ir.graphfile import load_graph

    check_outputs(output_files(args.output), files(args.graph))  # before any work
    check_graph_output(args.output)
    outputs = load_graph(args.graph)
    save(args.output, outputs, args.names.split(",") if args.names else None)
    print(f"exported {len(outputs)} output(s) to {args.output}")
    return 0


def register(sub) -> None:
    p = add_command(
        sub,
        "export",
        run,
        "convert an ngrules graph file to an ONNX model (needs pip install 'ngrules[onnx]')",
        "ngrules export g.json -o model.onnx",
    )
    p.add_argument("graph", metavar="GRAPH.json")
    p.add_argument("-o", "--output", required=True, metavar="MODEL.onnx")
    p.add_argument("--names", metavar="A,B,..", help="output names (default output_0, ...)")
