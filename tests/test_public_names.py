"""Public names are never shadowed by submodules (issue 11, "also found"): `ng.verify` once
became the module `ngrules.verify` after that module was imported, and `ng.verify(...)` worked
once per process. Every name of `ngrules.__all__` is checked twice after every submodule is
imported."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from types import ModuleType

import pytest

import ngrules as ng

#: Public names that are modules; every other public name must not be one.
MODULES = {"testing": "ngrules.testing", "functions": "ngrules.lang.functions"}
#: Extras that some submodules import at import time (CI installs them all).
OPTIONAL = {"onnx", "onnxruntime", "z3", "pygls", "lsprotocol"}


def _import_every_submodule() -> list[str]:
    imported = []
    for info in pkgutil.walk_packages(ng.__path__, "ngrules."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as e:
            assert e.name and e.name.split(".")[0] in OPTIONAL, e
            continue
        imported.append(info.name)
    return imported


def test_every_public_name_is_the_right_kind_of_object_after_every_submodule_is_imported():
    imported = _import_every_submodule()
    assert {"ngrules.verification.verify", "ngrules.testing", "ngrules.cli.main"} <= set(imported)
    for _ in range(2):
        for name in ng.__all__:
            value = getattr(ng, name)
            assert getattr(ng, name) is value, name
            if name in MODULES:
                assert value is sys.modules[MODULES[name]], name
            else:
                assert not isinstance(value, ModuleType), f"ng.{name} is a module"


def test_the_lazy_names_are_the_real_objects_every_time():
    from ngrules.verification import testing, verify

    _import_every_submodule()
    for _ in range(2):
        assert ng.verify is verify.verify and callable(ng.verify)
        assert ng.check_rewrite is testing.check_rewrite
        assert ng.VerificationReport is verify.VerificationReport
        from ngrules import testing as public_testing

        assert public_testing is sys.modules["ngrules.testing"] and ng.testing is public_testing


def test_the_old_re_export_modules_are_gone():
    # ngrules.ops and ngrules.opgen only re-exported ngrules.ir.ops and ngrules.ir.opgen
    import importlib

    for name in ("ngrules.ops", "ngrules.opgen"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(name)
