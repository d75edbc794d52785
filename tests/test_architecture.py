"""The package's layers: import-linter's contracts hold, and fail when a lower layer imports an
upper one; the docs' layout tables match the tree; no module outgrows one screenful of jobs."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "ngrules"
LAYERS = ("ir", "lang", "engine", "verification", "saturation", "lsp", "cli")
MAX_LINES = 450

pytest.importorskip("importlinter", reason="the dev extra: pip install '.[dev]'")


def _lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(lint), "--config", str(cwd / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy_tree(tmp_path: Path) -> Path:
    shutil.copytree(PACKAGE, tmp_path / "ngrules", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_contracts_hold_on_the_tree(tmp_path):
    result = _lint_imports(_copy_tree(tmp_path), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    "module, planted, broken",
    [
        ("ir/axes.py", "from ngrules.cli import main", "Layers"),
        ("lang/rules.py", "from ngrules.engine import driver", "Layers"),
        ("engine/explain.py", "from ngrules.verification import verify", "Layers"),
        ("ir/values.py", "from ngrules.ir import executor", "No import cycles"),
    ],
)
def test_an_upward_import_or_a_cycle_breaks_the_build(tmp_path, module, planted, broken):
    root = _copy_tree(tmp_path)
    target = root / "ngrules" / module
    target.write_text(target.read_text() + f"\n{planted}  # planted by the test\n")
    if "executor" in planted:  # close the cycle: the executor gains an import of values
        executor = root / "ngrules" / "ir" / "executor.py"
        executor.write_text(executor.read_text() + "\nfrom ngrules.ir import values\n")
    result = _lint_imports(root, tmp_path)
    assert result.returncode != 0
    assert re.search(rf"{re.escape(broken)}.*BROKEN", result.stdout), result.stdout


def test_no_module_is_over_the_size_limit():
    sizes = {p.relative_to(REPO): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    too_big = {str(p): n for p, n in sizes.items() if n > MAX_LINES}
    assert not too_big, f"split these along their seams: {too_big}"


def test_readme_layout_table_names_every_layer_and_only_real_paths():
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("## Layout") :]
    for layer in LAYERS:
        assert f"`ngrules/{layer}/`" in table
    for path in re.findall(r"^\| `([^`]+)`", table, flags=re.M):
        assert (REPO / path).exists(), path


def test_architecture_page_lists_each_folders_modules_as_they_are():
    page = (REPO / "docs" / "architecture.md").read_text()
    for layer in LAYERS:
        row = next(line for line in page.splitlines() if line.startswith(f"| `ngrules/{layer}/`"))
        named = re.findall(r"`([a-z_]+(?:\.py|/))`", row)
        assert named, row
        for name in named:
            assert (PACKAGE / layer / name.rstrip("/")).exists(), f"{layer}/{name}"
        modules = {p.name for p in (PACKAGE / layer).glob("*.py")} - {"__init__.py"}
        folder = PACKAGE / layer
        packages = {p.name + "/" for p in folder.iterdir() if (p / "__init__.py").exists()}
        missing = (modules | packages) - set(named)
        assert not missing, f"docs/architecture.md does not say what {layer}/{missing} owns"


def test_architecture_page_lists_the_onnx_package_as_it_is():
    """The interop row names every module and folder of `interop/onnx/` (docs/architecture.md),
    and its family table every converter and every writer."""
    page = (REPO / "docs" / "architecture.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `ngrules/interop/`"))
    named = set(re.findall(r"`([a-z_]+(?:\.py|/))`", row))
    onnx = PACKAGE / "interop" / "onnx"
    present = {p.name for p in onnx.rglob("*.py") if p.name != "__init__.py"}
    present |= {p.parent.name + "/" for p in onnx.rglob("__init__.py") if p.parent != onnx}
    assert not present - named, f"the interop row does not say what {present - named} own"
    families = page[page.index("## ONNX: where an op family is read and written"):]
    families = families[: families.index("\n## ")]
    for folder in ("importing/converters", "exporting/writers"):
        modules = {p.name for p in (onnx / folder).glob("*.py")} - {"__init__.py"}
        missing = {m for m in modules if f"`{m}`" not in families}
        assert not missing, f"the ONNX family table does not name {folder}/{missing}"
