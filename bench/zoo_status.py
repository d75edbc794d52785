"""Which stage each zoo model fails in, and why: import, then for no rules and each shipped
pipeline rewrite, export and comparison with onnxruntime on random inputs.

Run: `python bench/zoo_status.py [--only bert_legacy_op17 ...] [--json out.json]`.
Prints a Markdown table, one row per file of tests/zoo/, a cell per stage: `ok`, or the first
stage that failed with the error's first line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo_stages as zs  # noqa: E402  (bench/zoo_stages.py)


def status_row(path: Path, pipelines: list[str], rules) -> dict[str, str]:
    import onnx

    model = onnx.load(str(path))
    row = {"model": path.stem}
    try:
        imported = zs.import_zoo_model(model)
    except Exception as exc:
        row["import"] = zs.short_reason(exc)
        return row
    row["import"] = "ok"
    for pipeline in [None, *pipelines]:
        row[pipeline or "no rules"] = zs.through_pipeline(model, imported, pipeline, rules).cell()
    return row


def main() -> None:
    from ngrules.lang.library import load_library

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="file stems of tests/zoo/ (default: all)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rules = load_library()
    pipelines = zs.shipped_pipelines()
    files = [p for p in zs.zoo_files() if not args.only or p.stem in args.only]
    columns = ["model", "import", "no rules", *pipelines]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    rows = []
    for path in files:
        row = status_row(path, pipelines, rules)
        rows.append(row)
        print("| " + " | ".join(row.get(c, "") for c in columns) + " |", flush=True)
    passing = [r["model"] for r in rows if all(r.get(c) == "ok" for c in columns[1:])]
    print(f"\n{len(passing)} of {len(rows)} models pass every stage: {', '.join(passing)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
