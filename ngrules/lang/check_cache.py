"""The checked rule set of rules files, kept beside their syntax trees (`code_cache`): the
shipped library is type-checked once, not at every command (30 ms of a short `ngrules apply`).

A rule set is kept only when the check found nothing wrong: a file with errors is checked at
every run, so its located errors are reported as they always were (and warnings, which the
loader finds in the text, are never cached). The key names everything the result depends on:
each file's path and text in load order, `code_digest(ABOVE)` (the sources of the language
layer and below), the installed lark and the grammar (which made the trees), and a digest of
the op table and the function library as they are when the check runs (a model's composite
ops, a user's registered functions and ops). A kept rule set refers to its rules' declarations
in the trees just read (pickle's persistent ids), so a rule's `decl` is the file's own object;
a file that cannot be read back, or refers to a declaration the trees do not have, is checked
again (never an error).
"""

from __future__ import annotations

import hashlib
import io
import pickle
from collections.abc import Sequence

from ngrules.errors import RuleError
from ngrules.ir.ops import OPS
from ngrules.lang import code_cache
from ngrules.lang.checker import check
from ngrules.lang.functions import BUILT_IN, FUNCTIONS
from ngrules.lang.rules import RuleSet
from ngrules.lang.syntax import RuleDecl, RulesFile


def checked_kept(files: Sequence[RulesFile], errors: Sequence[RuleError] = (),
                 order: Sequence[str] = ()) -> RuleSet:
    """`checker.check(files, errors, order)`, read back from the private cache when these
    files were checked before with nothing wrong (see the module docstring)."""
    if errors or not files or any(f.path.startswith("<") for f in files):
        return check(files, errors, order)
    name = f"{_key(files)}.checked"
    data = code_cache.read(name)
    if data is not None:
        rules = _loads(data, files)
        if rules is not None:
            return rules
    rules = check(files, errors, order)  # raises with every problem found: nothing kept
    try:
        data = _dumps(rules, files)
    except Exception:  # noqa: BLE001 - something that will not pickle: not kept, still right
        return rules
    code_cache.write(name, data)
    return rules


def _key(files: Sequence[RulesFile]) -> str:
    texts = [part for f in files for part in (f.path, f.text)]
    return code_cache.trees_key("checked", table_digest(), *texts)


def table_digest() -> str:
    """A digest of what the checker reads of the op table and the function library: each
    op's arity, attributes, traits, outputs, derived attributes and domains; each function's
    arity and kind, and the signature of one that is not built in (a built-in one's code is
    in `code_digest`)."""
    ops = sorted(
        (name, o.name, o.arity, [(a.name, a.kind, a.required) for a in o.attrs],
         sorted(o.traits), o.outputs, list(o.derived), o.domain)
        for name, o in OPS.items()
    )
    functions = sorted(
        (name, f.name, f.min_args, f.max_args, f.kind, f.bounded,
         "" if BUILT_IN.get(name) is f else str(f.signature()))
        for name, f in FUNCTIONS.items()
    )
    return hashlib.sha256(repr((ops, functions)).encode()).hexdigest()


def _references(files: Sequence[RulesFile]) -> dict[int, tuple]:
    """id -> a reference into the trees, for each rule declaration, its clauses and its
    replacement (what a checked `Rule` shares with its declaration)."""
    refs: dict[int, tuple] = {}
    for i, f in enumerate(files):
        for j, d in enumerate(f.decls):
            if isinstance(d, RuleDecl):
                refs[id(d)] = ("d", i, j)
                if d.replacement:  # (not the empty tuple, which every `()` is)
                    refs[id(d.replacement)] = ("r", i, j)
                for k, c in enumerate(d.clauses):
                    refs[id(c)] = ("c", i, j, k)
    return refs


def _dumps(rules: RuleSet, files: Sequence[RulesFile]) -> bytes:
    refs = _references(files)

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return refs.get(id(obj))

    out = io.BytesIO()
    Pickler(out, pickle.HIGHEST_PROTOCOL).dump(rules)
    return out.getvalue()


def _loads(data: bytes, files: Sequence[RulesFile]) -> RuleSet | None:
    """The kept rule set, its references resolved in `files`; None if it cannot be."""

    def resolve(ref):
        kind, i, j, *k = ref
        decl = files[i].decls[j]
        if not isinstance(decl, RuleDecl):
            raise pickle.UnpicklingError("not a rule declaration")
        return decl if kind == "d" else decl.replacement if kind == "r" else decl.clauses[k[0]]

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            return resolve(pid)

    try:
        rules = Unpickler(io.BytesIO(data)).load()  # a file of this user's private folder
    except Exception:  # noqa: BLE001 - a stale, truncated or foreign file: checked again
        return None
    return rules if isinstance(rules, RuleSet) else None
