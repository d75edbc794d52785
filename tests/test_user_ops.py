"""Python-registered ops in every command: `register_op` defaults, `--ops`, `[tool.ngrules] ops`,
`ngrules.ops` entry points, and the pytest plugin."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import central_difference

import ngrules as ng
from ngrules.cli.main import main

pytestmark = pytest.mark.usefixtures("scratch_ops")

DOCS = Path(__file__).parents[1] / "docs"


def _python_block(text: str) -> str:
    return text.split("```python\n", 1)[1].split("```", 1)[0]


#: docs/ops.md's example, as the module that `--ops` imports.
SILU_OPS = _python_block((DOCS / "ops.md").read_text(encoding="utf-8"))
FUSE = "pass fuse\nrule silu: x * Sigmoid(x) => Silu(x)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder with the ops module, a rules file using Silu and a front-end graph file."""
    (tmp_path / "silu_ops.py").write_text(SILU_OPS)
    (tmp_path / "fuse.rules").write_text(FUSE)
    x = ng.placeholder({"A": 3, "B": 4}, name="x")
    ng.save_graph(tmp_path / "g.json", [ng.sum(x * ng.sigmoid(x), out_axes=())])
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "silu_ops", raising=False)
    yield tmp_path
    sys.modules.pop("silu_ops", None)


def _check_verify_apply(project, ops_args, capsys):
    assert main(["check", "fuse.rules", *ops_args]) == 0
    assert main(["verify", "fuse.rules", "--examples", "20", *ops_args]) == 0
    assert main(["apply", "g.json", "-o", "out.json", "--rules", "fuse.rules", *ops_args]) == 0
    assert "fired      1  silu" in capsys.readouterr().out
    (before,), (after,) = ng.load_graph(project / "g.json"), ng.load_graph(project / "out.json")
    assert "Silu" in {n.op for n in ng.toposort([after])}
    xv = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    np.testing.assert_allclose(
        ng.execute([after], {"x": xv})[0], ng.execute([before], {"x": xv})[0], rtol=1e-5
    )


def test_without_the_module_the_commands_stop_at_the_unknown_op(project, capsys):
    assert main(["check", "fuse.rules"]) == 1
    assert "unknown op 'Silu'" in capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["silu_ops", "silu_ops.py"])
def test_ops_option_reaches_check_verify_and_apply(project, capsys, spelling):
    _check_verify_apply(project, ["--ops", spelling], capsys)


def test_pyproject_ops_reach_every_command(project, capsys):
    (project / "pyproject.toml").write_text('[tool.ngrules]\nops = ["silu_ops"]\n')
    _check_verify_apply(project, [], capsys)


def test_every_command_that_needs_ops_takes_ops():
    from ngrules.cli.main import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) == len(COMMANDS)
    for name, command in sub.choices.items():
        takes = any("--ops" in a.option_strings for a in command._actions)
        assert takes == (name != "fmt"), name  # formatting reads no op table entry


def test_a_module_that_fails_is_one_line_and_exit_2(project, capsys):
    (project / "broken_ops.py").write_text("raise RuntimeError('no GPU here')\n")
    assert main(["check", "fuse.rules", "--ops", "broken_ops.py"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken_ops.py" in err[0] and "RuntimeError: no GPU here" in err[0]
    assert main(["check", "fuse.rules", "--ops", "no_such_module"]) == 2
    assert "cannot import ops module 'no_such_module'" in capsys.readouterr().err


def test_installed_packages_offer_ops_through_entry_points(project, monkeypatch, capsys):
    """A real (tiny) installed distribution: a dist-info folder on sys.path, read by
    importlib.metadata exactly as for a pip-installed package."""
    site = project / "site"
    dist = site / "siluext-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: siluext\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ngrules.ops]\nsilu = siluext_ops:register\n")
    body = SILU_OPS.replace("ng.register_op(", "def register():\n  ng.register_op(")
    (site / "siluext_ops.py").write_text(body)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "siluext_ops", raising=False)
    assert main(["check", "fuse.rules"]) == 0
    assert ng.OPS["Silu"].doc == "x * sigmoid(x), one kernel"


def test_the_entry_point_search_finds_the_group_before_importlib_metadata(tmp_path,
                                                                         monkeypatch):
    """importlib.metadata (10-25 ms to import and scan) is asked only where a folder of
    sys.path has a distribution whose entry_points.txt names the group, or where the quick
    search cannot tell (an archive on the path)."""
    from ngrules import config

    site = tmp_path / "site"
    other = site / "other-1.0.dist-info"
    other.mkdir(parents=True)
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing")])
    assert not config._may_declare_ops()
    egg = site / "old.egg-info"
    egg.mkdir()
    (egg / "entry_points.txt").write_text("[x]\na = b\n\n[ ngrules.ops ]\nsilu = m:f\n")
    assert config._may_declare_ops()
    (egg / "entry_points.txt").unlink()
    (tmp_path / "deps.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty archive
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "deps.zip")])
    assert config._may_declare_ops()


def test_pytest_plugin_loads_pyproject_ops(project):
    (project / "pyproject.toml").write_text('[tool.ngrules]\nops = ["silu_ops"]\n')
    cmd = [sys.executable, "-m", "pytest", "fuse.rules", "-p", "no:cacheprovider",
           "--ngrules-examples=10", "-v"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fuse.rules::silu PASSED" in result.stdout


# -- register_op's defaults ---------------------------------------------------------------------
def test_the_documented_fused_op_is_about_fifteen_lines():
    code = [line for line in SILU_OPS.splitlines() if line.strip() and not line.startswith("#")]
    assert len(code) <= 16, code


def test_register_op_defaults_for_an_elementwise_fused_op(project):
    namespace = {}
    exec(compile(textwrap.dedent(SILU_OPS), "silu_ops.py", "exec"), namespace)  # docs' example
    op = ng.OPS["Silu"]
    assert op.arity == 1 and op.has("elementwise")
    x = ng.placeholder({"A": 2, "B": 3}, np.float64, name="x")
    y = ng.make_node("Silu", (x,))
    assert (y.axes, y.dtype) == (x.axes, x.dtype)
    xv = np.random.default_rng(3).normal(size=(2, 3))
    cost = ng.sum(y, out_axes=())
    (grad,) = ng.execute([ng.deriv(cost, x)], {x: xv})
    program = ng.compile_graph([cost])
    fd = central_difference(lambda v: program.run({x: v})[0].item(), xv)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


def test_register_op_without_gradient_or_inference():
    ng.register_op("Cube", compute=lambda x: x**3, traits={"elementwise"})
    x = ng.placeholder({"A": 2}, np.float64, name="x")
    with pytest.raises(ng.OpError, match="Cube is not differentiable"):
        ng.deriv(ng.sum(ng.make_node("Cube", (x,)), out_axes=()), x)
    with pytest.raises(ng.OpError, match="missing infer"):
        ng.register_op("Pool2", compute=lambda x: x)
    with pytest.raises(ng.OpError, match="exactly one of compute"):
        ng.register_op("Pool3", traits={"elementwise"})
