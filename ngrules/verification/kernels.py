"""Fast kernels of declared ops checked against their bodies.

`register_kernel("Silu", fn)` makes the executor run `fn` instead of the body of `op Silu`;
here both run on random instances of the op (its own generator, inputs from its domain, in
float64) and must agree within the verification tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ngrules.ir import declared
from ngrules.ir.graph import Node, make_node
from ngrules.ir.ops import OPS
from ngrules.verification.instances.domains import domain_values


@dataclass
class KernelVerdict:
    """Whether a declared op's fast kernel agrees with its body."""

    op: str
    ok: bool
    examples: int = 0
    problem: str = ""
    what: str = "kernel"  # or "onnx": the ONNX op the declaration names, under onnxruntime
    unverified: str = ""  # why it could not be checked (not a failure)

    def __str__(self) -> str:
        if self.unverified:
            return f"unverified    {self.what} {self.op}: {self.unverified}"
        if self.ok:
            return (f"verified      {self.what} {self.op}: agrees with its body "
                    f"({self.examples} ex.)")
        return f"FAILED        {self.what} {self.op}: {self.problem}"


def _run_both(node: Node, rng: np.random.Generator, fast_of=None) -> tuple[list, list]:
    opdef = OPS[node.op]
    arrays = [
        domain_values(rng, a.axes.lengths, a.dtype, opdef.arg_domain(i))
        for i, a in enumerate(node.args)
    ]
    fast = (fast_of or opdef.kernel)(node)(*arrays)
    reference = declared.REFERENCE[node.op](node)(*arrays)
    as_list = lambda v: list(v) if isinstance(v, tuple) else [v]  # noqa: E731
    return as_list(fast), as_list(reference)


def verify_kernel(name: str, examples: int = 20, rtol: float = 1e-6, atol: float = 1e-9,
                  fast_of=None, what: str = "kernel", dtype=np.float64):
    """Run op `name`'s fast kernel (or `fast_of(node)`, a function of arrays) and its body on
    `examples` random instances."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    rng = np.random.default_rng(0)
    problems: list[str] = []

    def leaf(axes):
        return make_node("Placeholder", name=f"k{len(axes)}", axes=axes, dtype=dtype)

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data) -> None:
        node = OPS[name].gen(data.draw, leaf)
        fast, reference = _run_both(node, rng, fast_of)
        for i, (f, r) in enumerate(zip(fast, reference)):
            f = np.asarray(f)
            if f.shape != r.shape:
                problems.append(f"output {i} has shape {f.shape}, the body's {r.shape}")
                raise AssertionError
            if not np.allclose(f, r, rtol=rtol, atol=atol):
                worst = float(np.max(np.abs(f - r), initial=0.0))
                problems.append(
                    f"output {i} differs on axes {node.args[0].axes!r}: "
                    f"max |{'fast' if what == 'kernel' else what} - body| = {worst:.6g}"
                )
                raise AssertionError

    try:
        check()
    except AssertionError:
        return KernelVerdict(name, False, problem=problems[-1], what=what)
    except Exception as e:  # the fast kernel raised: that is the finding
        problem = f"the fast {what} fails: {type(e).__name__}: {e}"
        return KernelVerdict(name, False, problem=problem, what=what)
    return KernelVerdict(name, True, examples, what=what)


def verify_kernels(ops) -> list[KernelVerdict]:
    """A verdict for each of these declared ops that has a fast kernel registered."""
    return [verify_kernel(name) for name in ops if name in declared.FAST]
