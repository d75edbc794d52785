"""ONNX tensors as numpy arrays and back, without importing the `onnx` package.

`onnx.numpy_helper` and `onnx.helper`'s dtype tables import `ml_dtypes` (0.5 s, registering
its dtypes with numpy). These are written for the element types numpy has; a tensor of another
(bfloat16, float8, int4...) goes to onnx's own, which then imports onnx and ml_dtypes.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ngrules.interop.onnx import proto
from ngrules.interop.onnx.proto import onnx_module, utf8

#: The element types numpy has: (its dtype, the TensorProto field holding its values when they
#: are not raw bytes, that field's dtype).
PLAIN = {1: ("float32", "float_data", "float32"), 2: ("uint8", "int32_data", "int32"),
          3: ("int8", "int32_data", "int32"), 4: ("uint16", "int32_data", "int32"),
          5: ("int16", "int32_data", "int32"), 6: ("int32", "int32_data", "int32"),
          7: ("int64", "int64_data", "int64"), 8: ("object", "string_data", "object"),
          9: ("bool", "int32_data", "int32"), 10: ("float16", "int32_data", "int32"),
          11: ("float64", "double_data", "float64"), 12: ("uint32", "uint64_data", "uint64"),
          13: ("uint64", "uint64_data", "uint64"), 14: ("complex64", "float_data", "float32"),
          15: ("complex128", "double_data", "float64")}
_ELEMS = {np.dtype(dtype): elem for elem, (dtype, _, _) in PLAIN.items()}
_STRING, _EXTERNAL = 8, 1
_BITS = {9: np.uint8, 10: np.uint16, 14: np.float32, 15: np.float64}


def tensor_dtype_to_np_dtype(elem: int) -> np.dtype:
    """The numpy dtype of an ONNX element type (KeyError for one onnx does not know)."""
    if elem in PLAIN:
        return np.dtype(PLAIN[elem][0])
    return onnx_module("helper").tensor_dtype_to_np_dtype(elem)


def np_dtype_to_tensor_dtype(dtype) -> int:
    """The ONNX element type of a numpy dtype (ValueError for one ONNX has not)."""
    dtype = np.dtype(dtype)
    if dtype in _ELEMS:
        return _ELEMS[dtype]
    if np.issubdtype(dtype, np.str_):
        return _STRING
    if "ml_dtypes" in sys.modules:  # bfloat16, float8...: onnx's table knows them
        return onnx_module("helper").np_dtype_to_tensor_dtype(dtype)
    raise ValueError(f"Unable to convert type {dtype!r} into TensorProto element type.")


def to_array(tensor, base_dir: str = "") -> np.ndarray:
    """A TensorProto's values (`onnx.numpy_helper.to_array`); raw data viewed, read-only."""
    elem, dims = tensor.data_type, tuple(tensor.dims)
    if (elem not in PLAIN or sys.byteorder != "little" or tensor.HasField("segment")
            or tensor.data_location == _EXTERNAL):
        return onnx_module("numpy_helper").to_array(tensor, base_dir)
    dtype, field, stored = PLAIN[elem]
    if elem == _STRING:
        return np.asarray([s.decode("utf-8") for s in tensor.string_data]).astype(object) \
            .reshape(dims)
    if tensor.HasField("raw_data"):
        return np.frombuffer(tensor.raw_data, dtype).reshape(dims)
    data = getattr(tensor, field)
    if elem in (4, 5, 9, 10):  # 16-bit and bool values, kept as int32
        narrow = np.uint8 if elem == 9 else np.uint16
        return np.array(data, np.int32).view(np.uint32).astype(narrow).view(dtype).reshape(dims)
    if elem in (14, 15):  # complex: (real, imaginary) pairs
        return np.array(data, stored).view(dtype).reshape(dims)
    return np.asarray(data, stored).astype(dtype).reshape(dims)


def from_array(array: np.ndarray, name: str | None = None):
    """A TensorProto of the array (`onnx.numpy_helper.from_array`): raw little-endian bytes,
    strings in string_data."""
    if array.dtype == object or np.issubdtype(array.dtype, np.str_):
        tensor = proto.TensorProto(dims=array.shape, data_type=_STRING)
        for e in array.flatten():
            if not isinstance(e, (str, bytes)):
                raise NotImplementedError(f"an object array holds a {type(e)}, not a string")
            tensor.string_data.append(utf8(e))
    else:
        elem = np_dtype_to_tensor_dtype(array.dtype)
        if elem not in PLAIN:
            return onnx_module("numpy_helper").from_array(array, name)
        tensor = proto.TensorProto(dims=array.shape, data_type=elem,
                                   raw_data=np.asarray(array, array.dtype.newbyteorder("<"))
                                   .tobytes())
    if name:
        tensor.name = name
    return tensor


def make_tensor(name: str, data_type: int, dims, vals, raw: bool = False):
    """A TensorProto of the values (`onnx.helper.make_tensor`): in the field of its type, or
    with `raw`, `vals` (bytes or an array) as its raw data."""
    if data_type not in PLAIN or (raw and data_type == _STRING):
        return onnx_module("helper").make_tensor(name, data_type, dims, vals, raw)
    tensor = proto.TensorProto(name=name, data_type=data_type, dims=dims)
    dtype, field, _ = PLAIN[data_type]
    count = math.prod(dims)
    if raw:
        if isinstance(vals, np.ndarray):
            vals = np.asarray(vals, vals.dtype.newbyteorder("<")).tobytes()
        if not isinstance(vals, bytes) or len(vals) != count * np.dtype(dtype).itemsize:
            raise ValueError(f"tensor {name}: raw data of {count} {dtype} values expected")
        tensor.raw_data = vals
        return tensor
    values = ([utf8(v) for v in np.array(vals).flatten()] if data_type == _STRING
              else np.asarray(vals, dtype).flatten())
    if len(values) != count:
        raise ValueError(f"Number of values ({len(values)}) does not match tensor dimensions "
                         f"requiring {count} elements.")
    if data_type in _BITS:  # float16 as its bits, complex as (real, imaginary), bool as 0/1
        values = values.view(_BITS[data_type]) if data_type != 9 else values.astype(np.uint8)
    getattr(tensor, field).extend(values)
    return tensor
