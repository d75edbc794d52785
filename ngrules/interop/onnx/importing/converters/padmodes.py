"""Pad's reflect, edge and wrap modes: each padded dimension one `Gather` at constant
positions (those numpy's `pad` of the mode reads)."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import OnnxError
from ngrules.interop.onnx.importing.context import Context
from ngrules.interop.onnx.importing.shaping import Tensor, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.graph import make_node


def gather_positions(t: Tensor, pos: int, positions: np.ndarray) -> Tensor:
    """t at the given constant positions along position pos (a Gather)."""
    axis = temp_axis(len(positions))
    index = F.constant(positions.astype(np.int64), [axis], dtype=np.int64)
    node = make_node("Gather", (t.node, index), axis=t.axes[pos])
    return Tensor(node, t.axes[:pos] + (axis,) + t.axes[pos + 1 :])


def kept_range(ctx: Context, pos: int, length: int, before: int, after: int) -> tuple[int, int]:
    """The part of a dimension of `length` that negative pads leave: [start, stop), never
    empty (a model cropping a whole dimension away is refused, naming the node)."""
    start, stop = max(-before, 0), length - max(-after, 0)
    if stop <= start:
        raise OnnxError(f"{ctx.label}: pads {before} and {after} crop all of dimension {pos} "
                        f"(length {length})")
    return start, stop


_NUMPY_MODES = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def padded_by_mode(ctx: Context, t: Tensor, positions, pads, mode: str) -> Tensor:
    """Pad's reflect, edge and wrap modes: each padded dimension is one Gather at the positions
    numpy's pad of that mode would read (negative pads crop)."""
    n = len(positions)
    for k, pos in enumerate(positions):
        before, after = pads[k], pads[n + k]
        if not before and not after:
            continue
        start, stop = kept_range(ctx, pos, t.shape[pos], before, after)
        index = np.arange(start, stop)
        if mode == "reflect" and max(before, after) >= len(index):
            raise ctx.unsupported("reflect padding as long as the dimension")
        ctx.importer.folding.check_size(ctx.node, 8.0 * (len(index) + max(before, 0)
                                                         + max(after, 0)))
        index = np.pad(index, (max(before, 0), max(after, 0)), mode=_NUMPY_MODES[mode])
        t = gather_positions(t, pos, index)
    return t
