"""`ngrules export GRAPH.json -o MODEL.onnx`: an ngrules graph file as a checked ONNX model (read
and written by suffix through `graphio`, like every command)."""

from __future__ import annotations

from ngrules.cli.common import add_command, add_length_option, add_target_option


def run(args) -> int:
    from ngrules.cli import graphio
    from ngrules.ir.fileio import check_outputs

    check_outputs(graphio.output_files(args.output), graphio.files(args.graph))  # before work
    graphio.check_graph_output(args.output)
    graphio.check_target(args.output, args.target, args.opset)
    outputs, names, opset = graphio.load_with_opset(args.graph, graphio.read_options(args))
    graphio.save(args.output, outputs, args.names.split(",") if args.names else names,
                 args.target, graphio.written_opset(args.opset, opset),
                 graphio.budget_of(args, "export"))
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
    add_length_option(p)
    add_target_option(p)
