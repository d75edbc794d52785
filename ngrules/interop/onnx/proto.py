"""onnx's protobuf classes and C++ checks without importing the `onnx` package.

`import onnx` takes 0.6 s, most of it `ml_dtypes` (imported by `onnx.helper`) registering its
dtypes with numpy; ngrules' ONNX path needs none of it. What it needs is onnx's generated
protobuf module (`onnx_ml_pb2.py`) and its C++ extension (checker, shape inference, op
schemas), which load from the installed package's folder in 0.02 s without running
`onnx/__init__.py`; and a few constructors and tensor conversions, written here for the element
types that numpy has (an exotic one, bfloat16, float8, int4..., goes to `onnx.numpy_helper`,
which then imports onnx).

The two modules are loaded under their own names (`onnx.onnx_ml_pb2`,
`onnx.onnx_cpp2py_export`) and handed to a later `import onnx` by a finder on `sys.meta_path`:
onnx then uses the same module objects (the extension cannot be loaded twice; the message
classes are one set), so `onnx.ModelProto is proto.ModelProto`, and onnx's own checker raises
the `ValidationError` this module raises. Where onnx is imported already, its modules are used.
"""

from __future__ import annotations

import collections.abc
import importlib
import importlib.machinery
import importlib.util
import numbers
import os
import sys
import threading
from typing import Any

from ngrules.interop.onnx import INSTALL_HINT, OnnxError

#: The modules' names in the onnx package (and in `sys.modules` once onnx imports them).
_PB, _CPP = "onnx.onnx_ml_pb2", "onnx.onnx_cpp2py_export"

_loaded: dict[str, Any] = {}
_LOCK = threading.Lock()

#: protobuf's limit for one serialised message (onnx's `checker.MAXIMUM_PROTOBUF`).
MAXIMUM_PROTOBUF = 2147483647


class _Preloaded:
    """A `sys.meta_path` finder handing the modules loaded here to a later `import onnx`."""

    def find_spec(self, name, path=None, target=None):
        module = _loaded.get(name)
        if module is None or name in sys.modules:
            return None
        return importlib.util.spec_from_loader(name, self, origin=getattr(module, "__file__", None))

    def create_module(self, spec):
        return _loaded[spec.name]

    def exec_module(self, module) -> None:
        """Run already: nothing to do."""


def _folder() -> str:
    """The installed onnx package's folder, or the error saying how to install it."""
    try:
        spec = importlib.util.find_spec("onnx")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise OnnxError(f"ONNX support needs the onnx extra: {INSTALL_HINT}")
    return list(spec.submodule_search_locations)[0]


def _load_file(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _extension(folder: str) -> str:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "onnx_cpp2py_export" + suffix)
        if os.path.exists(path):
            return path
    raise ImportError(f"no onnx_cpp2py_export extension in {folder}")


def load() -> None:
    """Load the protobuf module and the C++ extension (once), or raise `OnnxError` saying how
    to install onnx. A copy that does not load alone is imported with onnx."""
    if _PB in _loaded:
        return
    with _LOCK:  # the extension must not be loaded twice, by two threads at once
        if _PB not in _loaded:
            _load()


def _load() -> None:
    if all(n in sys.modules for n in (_PB, _CPP)):  # onnx imported already
        _loaded.update({n: sys.modules[n] for n in (_PB, _CPP)})
        return
    folder = _folder()
    try:
        pb = sys.modules.get(_PB) or _load_file(_PB, os.path.join(folder, "onnx_ml_pb2.py"))
        cpp = sys.modules.get(_CPP) or _load_file(_CPP, _extension(folder))
    except Exception:  # noqa: BLE001  an unusual install: onnx itself says what is wrong
        try:
            import onnx
        except ImportError:
            raise OnnxError(f"ONNX support needs the onnx extra: {INSTALL_HINT}") from None
        pb, cpp = onnx.onnx_ml_pb2, onnx.onnx_cpp2py_export
    _loaded.update({_CPP: cpp, _PB: pb})
    if not any(isinstance(f, _Preloaded) for f in sys.meta_path):
        sys.meta_path.insert(0, _Preloaded())


def _pb():
    load()
    return _loaded[_PB]


def _cpp():
    load()
    return _loaded[_CPP]


def __getattr__(name: str):
    """The protobuf classes and constants (`proto.ModelProto`, `proto.TensorProto.FLOAT`, ...),
    and onnx's error types (`proto.ValidationError`, `proto.InferenceError`)."""
    if name == "ValidationError":
        return _cpp().checker.ValidationError
    if name == "InferenceError":
        return _cpp().shape_inference.InferenceError
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(_pb(), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


# -- the C++ extension ---------------------------------------------------------------------------
def _serialised(model) -> bytes:
    data = model if isinstance(model, bytes) else model.SerializeToString()
    if len(data) > MAXIMUM_PROTOBUF:
        raise ValueError("This protobuf of onnx model is too large (>2GiB).")
    return data


def check_model(model, full_check: bool = False) -> None:
    """onnx's checker (`onnx.checker.check_model`): raises `ValidationError` (or, with
    `full_check`, shape inference's `InferenceError`)."""
    _cpp().checker.check_model(_serialised(model), full_check, False, False)


def infer_shapes(model, check_type: bool = False, strict_mode: bool = False,
                 data_prop: bool = False):
    """onnx's shape inference (`onnx.shape_inference.infer_shapes`): a new ModelProto."""
    data = _cpp().shape_inference.infer_shapes(_serialised(model), check_type, strict_mode,
                                               data_prop)
    return load_model(data)


def load_model(data: bytes):
    """The ModelProto serialised in `data` (`onnx.load_model_from_string`)."""
    model = _pb().ModelProto()
    decoded = model.ParseFromString(data)
    if decoded is not None and decoded != len(data):
        from google.protobuf.message import DecodeError

        raise DecodeError(f"Protobuf decoding consumed too few bytes: {decoded} out of "
                          f"{len(data)}")
    return model


def get_schema(op_type: str, max_inclusive_version: int, domain: str = ""):
    """The op's schema in force at that opset (`onnx.defs.get_schema`); `SchemaError` if none."""
    return _cpp().defs.get_schema(op_type, max_inclusive_version, domain)


def build_schemas() -> None:
    """onnx's op schemas built: its first checker, shape inference or schema call builds every
    one (0.01 s, holding the interpreter), which a caller may do while a thread waits on the
    kernel (`loading.read_model`: while the model file is read)."""
    _cpp().defs.has_schema("Conv")


def onnx_opset_version() -> int:
    """The newest opset of the default domain the installed onnx knows."""
    return _cpp().defs.schema_version_map()[""][1]


# -- constructors (onnx.helper's, for what ngrules writes) ------------------------------------
def onnx_module(name: str):
    """onnx's own module (`helper`, `numpy_helper`), imported for what is written here only
    for numpy's types: a tensor of bfloat16, float8, int4..., whose dtypes are ml_dtypes'."""
    load()
    return importlib.import_module(f"onnx.{name}")


def make_node(op_type: str, inputs, outputs, name: str | None = None,
              doc_string: str | None = None, domain: str | None = None,
              overload: str | None = None, **attrs):
    """A NodeProto (`onnx.helper.make_node`): attributes sorted by name, None ones left out."""
    node = _pb().NodeProto(op_type=op_type, input=inputs, output=outputs)
    if name:
        node.name = name
    if doc_string:
        node.doc_string = doc_string
    if domain is not None:
        node.domain = domain
    if overload is not None:
        node.overload = overload
    node.attribute.extend(make_attribute(k, v) for k, v in sorted(attrs.items()) if v is not None)
    return node


def utf8(value) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _kind(value) -> str | None:
    """The attribute field a value goes in (`onnx.helper.make_attribute`'s inference)."""
    pb = _pb()
    if isinstance(value, numbers.Integral):
        return "i"
    if isinstance(value, numbers.Real):
        return "f"
    if isinstance(value, (str, bytes)):
        return "s"
    classes = (("t", pb.TensorProto), ("sparse_tensor", pb.SparseTensorProto),
               ("g", pb.GraphProto), ("tp", pb.TypeProto))
    return next((kind for kind, cls in classes if isinstance(value, cls)), None)


def _list_kind(values: list) -> str | None:
    """The one kind of all the values (ints among floats: floats), or None."""
    kinds = {_kind(v) for v in values}
    if kinds == {"i", "f"}:
        return "f"
    return kinds.pop() if len(kinds) == 1 else None


#: The field of each single kind, and of a list of them; and their AttributeProto types.
_LISTS = {"i": "ints", "f": "floats", "s": "strings", "t": "tensors",
          "sparse_tensor": "sparse_tensors", "g": "graphs", "tp": "type_protos"}
_TYPES = {"f": 1, "i": 2, "s": 3, "t": 4, "g": 5, "floats": 6, "ints": 7, "strings": 8,
          "tensors": 9, "graphs": 10, "sparse_tensor": 11, "sparse_tensors": 12,
          "tp": 13, "type_protos": 14}
_KINDS = {t: k for k, t in _TYPES.items()}  # an AttributeProto type -> its field


def make_attribute(key: str, value, doc_string: str | None = None,
                   attr_type: int | None = None):
    """An AttributeProto of the value's type (`onnx.helper.make_attribute`)."""
    attr = _pb().AttributeProto(name=key)
    if doc_string:
        attr.doc_string = doc_string
    kind = _kind(value)
    if kind in ("i", "f", "s"):
        setattr(attr, kind, {"i": int, "f": float, "s": utf8}[kind](value))
    elif kind is not None:
        getattr(attr, kind).CopyFrom(value)
    elif isinstance(value, collections.abc.Iterable):
        value = list(value)
        if attr_type is not None:
            kind = next(k for k, t in _TYPES.items() if t == attr_type)
        else:
            kind = _LISTS.get(_list_kind(value), "")
            if not kind:
                raise ValueError(f"Could not infer attribute `{key}` type from {value!r}")
        getattr(attr, kind).extend([utf8(v) for v in value] if kind == "strings" else value)
    else:
        raise TypeError(f"'{value}' is not an accepted attribute value.")
    attr.type = _TYPES[kind]
    if attr_type is not None and attr.type != attr_type:
        raise TypeError(f"attribute {key}: type {attr.type} inferred, {attr_type} given")
    return attr


def get_attribute_value(attr):
    """The attribute's value (`onnx.helper.get_attribute_value`): lists as lists."""
    if attr.ref_attr_name:
        raise ValueError(f"Cannot get value of reference attribute: {attr}")
    if attr.type == 0:
        return None
    kind = _KINDS.get(attr.type)
    if kind is None:
        raise ValueError(f"Unsupported ONNX attribute: {attr}")
    value = getattr(attr, kind)
    return list(value) if kind in _LISTS.values() else value


def make_tensor_value_info(name: str, elem_type: int, shape, doc_string: str = ""):
    """A ValueInfoProto of a tensor (`onnx.helper.make_tensor_value_info`): a dimension an int
    (its length), a str (a dim_param) or None (unknown); shape None: rank unknown."""
    info = _pb().ValueInfoProto(name=name)
    if doc_string:
        info.doc_string = doc_string
    tensor = info.type.tensor_type
    tensor.elem_type = elem_type
    if shape is not None:
        tensor.shape.dim.extend([])  # an empty shape is written: a scalar, not an unknown rank
        for d in shape:
            dim = tensor.shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, str):
                dim.dim_param = d
            elif d is not None:
                raise ValueError(f"Invalid item in shape: {d}. Needs to be of int or str.")
    return info


def make_empty_tensor_value_info(name: str):
    return _pb().ValueInfoProto(name=name)


def make_opsetid(domain: str, version: int):
    return _pb().OperatorSetIdProto(domain=domain, version=version)


def make_graph(nodes, name: str, inputs, outputs, initializer=None, doc_string=None,
               value_info=None):
    graph = _pb().GraphProto(node=nodes, name=name, input=inputs, output=outputs,
                             initializer=initializer or [], value_info=value_info or [])
    if doc_string:
        graph.doc_string = doc_string
    return graph


def make_model(graph, opset_imports=None, functions=None, **fields):
    """A ModelProto at the installed onnx's IR version (`onnx.helper.make_model`)."""
    pb = _pb()
    model = pb.ModelProto(ir_version=pb.IR_VERSION)
    model.graph.CopyFrom(graph)
    if opset_imports is None:
        opset_imports = [make_opsetid("", onnx_opset_version())]
    model.opset_import.extend(opset_imports)
    model.functions.extend(functions or [])
    for key, value in fields.items():
        setattr(model, key, value)
    return model


def make_function(domain: str, fname: str, inputs, outputs, nodes, opset_imports,
                  attributes=None, attribute_protos=None, doc_string=None, overload=None,
                  value_info=None):
    function = _pb().FunctionProto(
        domain=domain, name=fname, input=inputs, output=outputs, node=nodes,
        opset_import=opset_imports, attribute=attributes or [],
        attribute_proto=attribute_protos or [], value_info=value_info or [])
    if doc_string:
        function.doc_string = doc_string
    if overload is not None:
        function.overload = overload
    return function
