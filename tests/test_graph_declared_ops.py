"""Graph files carry the declarations of the declared ops they use, and loading declares them."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import ngrules as ng

SILU = "op Silu(x) = x * Sigmoid(x)\npass fuse\nrule silu: x * Sigmoid(x) => Silu(x)\n"
NESTED = "op Silu(x) = x * Sigmoid(x)\nop Swish2(x) = Silu(x) * 2\n"


def _save(path, text):
    ng.parse_rules(text, "ops.rules")
    a = ng.make_axis(3, "A")
    x = ng.placeholder([a], name="x")
    res = ng.rewrite([ng.tanh(x * ng.sigmoid(x))], ng.parse_rules(text, "ops.rules"))
    ng.save_graph(path, res.outputs)
    return res.outputs


def _in_a_new_process(path) -> list[float]:
    code = (f"import numpy as np, ngrules as ng\n(y,) = ng.load_graph({str(path)!r})\n"
            "print(ng.execute([y], {'x': np.arange(3, dtype=np.float32)})[0].tolist())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_graph_with_a_declared_op_loads_in_a_new_process(tmp_path, scratch_ops):
    (out,) = _save(tmp_path / "g.json", SILU)
    assert "Silu" in {n.op for n in ng.toposort([out])}
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["ops"] == ["op Silu(x) = x * Sigmoid(x)"]
    x = np.arange(3, dtype=np.float32)
    want = np.tanh(x / (1 + np.exp(-x)))
    np.testing.assert_allclose(_in_a_new_process(tmp_path / "g.json"), want, rtol=1e-6)


def test_ops_a_body_calls_come_first(tmp_path, scratch_ops):
    ng.parse_rules(NESTED, "nested.rules")
    a = ng.make_axis(3, "A")
    y = ng.make_node("Swish2", (ng.placeholder([a], name="x"),))
    ng.save_graph(tmp_path / "g.json", [y])
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["ops"] == ["op Silu(x) = x * Sigmoid(x)", "op Swish2(x) = Silu(x) * 2"]
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(_in_a_new_process(tmp_path / "g.json"),
                               2 * x / (1 + np.exp(-x)), rtol=1e-6)


def test_a_graph_without_declared_ops_has_no_ops_key(tmp_path):
    a = ng.make_axis(3, "A")
    ng.save_graph(tmp_path / "g.json", [ng.tanh(ng.placeholder([a], name="x"))])
    assert "ops" not in json.loads((tmp_path / "g.json").read_text())


def test_loading_declares_the_op_and_the_same_declaration_again_is_reused(tmp_path, scratch_ops):
    _save(tmp_path / "g.json", SILU)
    from ngrules.ir import declared
    from ngrules.lang import declared_ops

    for table in (ng.OPS, declared.REFERENCE, declared_ops.DECLARED):
        table.pop("Silu")
    (y,) = ng.load_graph(tmp_path / "g.json")
    assert "Silu" in ng.OPS and ng.parse_rules(SILU, "again.rules")
    assert ng.load_graph(tmp_path / "g.json")[0] is y


def test_a_conflicting_declaration_is_a_located_error(tmp_path, scratch_ops):
    _save(tmp_path / "g.json", SILU)
    from ngrules.ir import declared
    from ngrules.lang import declared_ops

    for table in (ng.OPS, declared.REFERENCE, declared_ops.DECLARED):
        table.pop("Silu")
    ng.parse_rules("op Silu(x) = x * Tanh(x)\n", "other.rules")
    with pytest.raises(ng.NgrulesError, match=r"g.json \(its declared ops\):1:4: .*op 'Silu' "
                                              r"is already declared differently"):
        ng.load_graph(tmp_path / "g.json")


@pytest.mark.parametrize(
    "ops, message",
    [
        ("op Silu(x) = x", "'ops' must be a list"),
        ([1], "'ops' must be a list"),
        (['import "x.rules"'], "may only declare ops"),
        (["pass p\nrule r: x * 1 => x"], "may only declare ops"),
        (["op Tanh(x) = x"], "op 'Tanh' already exists"),
        (["op Silu(x) = x *"], "(its declared ops):1:"),
    ],
)
def test_bad_declarations_are_errors_and_declare_nothing(tmp_path, scratch_ops, ops, message):
    a = ng.make_axis(3, "A")
    ng.save_graph(tmp_path / "g.json", [ng.tanh(ng.placeholder([a], name="x"))])
    doc = json.loads((tmp_path / "g.json").read_text())
    doc["ops"] = ops
    (tmp_path / "g.json").write_text(json.dumps(doc))
    before = set(ng.OPS)
    with pytest.raises(ng.NgrulesError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ng.load_graph(tmp_path / "g.json")
    assert set(ng.OPS) == before
