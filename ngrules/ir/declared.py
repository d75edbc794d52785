"""Ops defined by a body (`op Silu(x) = x * Sigmoid(x)` in a `.rules` file), as the IR sees them.

Such an op sits in the op table like any other; its inference, reference kernel and gradient are
closures the language layer builds from the body. What the IR keeps here is what other layers
need without reading the language: which ops are declared, their reference kernels, and the
fast numpy kernels registered for them from Python (`register_kernel`), which the executor runs
instead of the body and verification checks against it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ngrules.errors import NgrulesError, OpError
from ngrules.ir.graph import Node
from ngrules.ir.ops import OPS
from ngrules.records import frozen

#: op name -> the reference kernel factory built from its body (node -> function of arrays).
REFERENCE: dict[str, Callable] = {}
#: op name -> a fast kernel `fn(*arrays, **attrs)` registered with `register_kernel`.
FAST: dict[str, Callable] = {}
#: op name -> its declaration as canonical text (`op Silu(x) = x * Sigmoid(x)`): what a graph
#: file carries so that it loads in a process that never read the rules file.
SOURCE: dict[str, str] = {}
#: op name -> the declared ops its body calls (declared before it).
USES: dict[str, tuple[str, ...]] = {}
#: `fn(text, where)` declaring the ops of a declarations text with the checks of a rules file;
#: the language layer installs it (the IR cannot parse).
_DECLARER: list[Callable[[str, str], None]] = []


def set_declarer(fn: Callable[[str, str], None]) -> None:
    _DECLARER[:] = [fn]


def declarations(ops: Iterable[str]) -> list[str]:
    """The declarations of the declared ops among `ops` and of those their bodies call, each
    after the ones it calls."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order or name not in REFERENCE or name not in SOURCE:
            return
        for used in USES.get(name, ()):
            visit(used)
        order.append(name)

    for name in ops:
        visit(name)
    return [SOURCE[name] for name in order]


def declare(texts: object, where: str) -> None:
    """Declare the ops of these declarations (a graph file's `ops`, read at `where`): a new op
    is declared, the same declaration again is a no-op, a different one is an error."""
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise NgrulesError(f"{where}: 'ops' must be a list of op declarations (strings)")
    text = "\n".join(texts)
    if not text:
        return
    if not _DECLARER:
        raise NgrulesError(f"{where}: it declares ops; import ngrules to read declarations")
    _DECLARER[0](text, where)


@frozen
class OnnxOp:
    """The ONNX op a declaration names (`onnx Op(attr=expr)`): `attributes(node_attrs)` gives
    its attributes for one node of the declared op."""

    op: str
    domain: str
    attributes: Callable[[Mapping[str, Any]], dict[str, Any]]


@frozen
class Declaration:
    """What export needs of a declared op: `body(node)` builds its body on stand-in
    placeholders for the node's arguments, as (stand-ins, outputs); `source` is the rules
    file that declares it; `onnx` the ONNX op it names, if any."""

    body: Callable[[Node], tuple[list[Node], tuple[Node, ...]]]
    source: str
    onnx: OnnxOp | None = None


#: op name -> its declaration, as export reads it.
DECLARATIONS: dict[str, Declaration] = {}


def register_kernel(name: str, fn: Callable) -> None:
    """Run `fn(*arrays, **attrs)` for the declared op `name` instead of its body.

    It may be registered before the op's rules file is loaded (an `--ops` module does so).
    `ngrules verify` and `ng.verify` check it against the body on random instances.
    Ops registered from Python give their kernel to `register_op` instead.
    """
    if not callable(fn):
        raise OpError(f"register_kernel({name!r}, ...): the kernel must be callable")
    if name in OPS and name not in REFERENCE:
        raise OpError(
            f"{name} is not declared in a rules file; a built-in or Python-registered op "
            "gets its kernel from register_op"
        )
    FAST[name] = fn


def kernel_for(name: str, reference: Callable) -> Callable:
    """The op table's kernel factory for a declared op: the fast kernel when one is
    registered, else the body's reference kernel. The choice is made at each call, so a
    program compiled (and cached) before `register_kernel` still runs the kernel registered."""

    def kernel(node):
        attrs = dict(node.attrs)
        body = None

        def run(*arrays):
            nonlocal body
            fast = FAST.get(name)
            if fast is not None:
                return fast(*arrays, **attrs)
            if body is None:
                body = reference(node)
            return body(*arrays)

        return run

    return kernel


def forget(name: str) -> None:
    """Remove a declared op from the table (a load that failed takes back what it declared)."""
    OPS.pop(name, None)
    REFERENCE.pop(name, None)
    SOURCE.pop(name, None)
    USES.pop(name, None)
    DECLARATIONS.pop(name, None)
