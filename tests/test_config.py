"""[tool.ngrules] in the nearest pyproject.toml."""

import pytest

from ngrules.config import ProjectConfig, load_config
from ngrules.errors import NgrulesError


def test_nearest_pyproject_is_read_from_a_subfolder(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ngrules]\nops = ["my.ops"]\nrules = ["r/"]\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    config = load_config(tmp_path / "a" / "b")
    assert config.ops == ("my.ops",) and config.rules == ("r/",)
    assert config.root == tmp_path


def test_no_table_is_an_empty_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert load_config(tmp_path) == ProjectConfig(tmp_path / "pyproject.toml")


@pytest.mark.parametrize(
    "text, words",
    [
        ("[tool.ngrules]\nopz = []\n", "unknown key(s) in [tool.ngrules]: opz"),
        ("[tool.ngrules]\nops = 'x'\n", "ops must be a list of strings"),
        ("[tool.ngrules\n", "cannot read [tool.ngrules]"),
    ],
)
def test_bad_tables_are_named_errors(tmp_path, text, words):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(NgrulesError) as e:
        load_config(tmp_path)
    assert words in str(e.value)
