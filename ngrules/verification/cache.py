"""The verdict cache: a rule verified once is not verified again until something it depends on
changes.

An entry is keyed by everything a verdict depends on: the rule's text, the rules before it in
its pass (they take nodes first), the definitions of the ops it uses (a declared op's
declaration), the verification settings (seed or the derandomized profile, examples,
tolerances, semantics, floats, prove and bound), the versions of ngrules, hypothesis and numpy,
and a digest of the code that decides a verdict (`code_digest`: the sources of the
verification layer and every layer below it, and the grammar), so that a developer changing
the verifier, prover, builder, executor or an op's kernel between releases misses too. A
changed rule or op changes the key; an old entry is never read again. A rule using an op
registered from Python (whose kernel cannot be keyed) is never cached, nor is a run with a
random seed (it cannot repeat), nor a verdict that fails (its counterexample's graphs are
wanted in full).

Entries are JSON files in a private folder of the user's cache (`$XDG_CACHE_HOME/ngrules/
verdicts`, default `~/.cache/ngrules/verdicts`, created 0700; `NGRULES_VERDICT_CACHE` names
another folder, as the test suite does), written to a temporary file and renamed into place
(a reader never sees half an entry). A file that cannot be read or parsed is ignored. Besides
the entry of each key, `last/` keeps the last verdict of each rule text whatever the settings:
`last_verdict(rule)` is what the language server's hover and `apply --saturate` read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ngrules.ir import declared
from ngrules.ir.ops import OPS
from ngrules.lang import code_cache
from ngrules.lang.rules import Rule
from ngrules.verification.verdicts import FAILING, STATUSES, Verdict

#: The environment variable naming the folder of the verdict cache instead of the default.
ENV = "NGRULES_VERDICT_CACHE"
#: An entry is at most this many bytes (a verdict's text); a larger file is not read.
LIMIT = 1 << 20
#: The statuses an entry may hold: every verdict's but a failure's (failures are not cached).
KEPT_STATUSES = frozenset(STATUSES) - FAILING
#: The figures of a verdict an entry keeps (its counterexample stays out: failures are not
#: cached).
FIGURES = ("status", "examples", "attempts", "reason", "seconds", "out_of_time", "semantics",
           "floats", "bound", "rank", "note", "layouts", "dtypes")


def folder() -> Path | None:
    """The private folder of the cache, created if need be; None if none can be trusted."""
    named = os.environ.get(ENV)
    if named:
        base = Path(named)
    else:
        from ngrules.lang.parser_cache import cache_folder

        parent = cache_folder()
        if parent is None:
            return None
        base = parent / "verdicts"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(base)
    except OSError:
        return None
    private = st.st_uid == os.geteuid() and not st.st_mode & 0o077
    return base if stat.S_ISDIR(st.st_mode) and private else None


#: The packages of ngrules above the verification layer (pyproject's layer contract): nothing
#: they hold is imported by the verifier, so their code does not decide a verdict.
ABOVE = ("cli", "lsp", "saturation")


def code_digest(root: Path | None = None) -> str:
    """A digest of the sources that decide a verdict: every `.py` file of the package `root`
    (ngrules) outside the `ABOVE` packages, and the grammar; the version alone when none can
    be read (an install without sources). Once per process (about 10 ms; the files of the
    language layer and below are read once for this and the parse cache's key)."""
    return code_cache.code_digest(ABOVE, root)


def _ops_of(rule: Rule) -> set[str]:
    from ngrules.lang.syntax import walk

    nodes = [*rule.roots, *rule.clauses, *rule.replacement]
    found = {getattr(n, "op", None) for n in walk(nodes)}
    found |= {getattr(n, "func", None) for n in walk(nodes)}
    return {name for name in found if isinstance(name, str) and name in OPS}


def _op_definition(name: str) -> str | None:
    """What the op's behaviour depends on beyond the version: its declaration, or None if it
    was registered from Python (or has a fast kernel), which cannot be keyed."""
    if name in declared.SOURCE and name not in declared.FAST:
        return "\n".join(declared.declarations([name]))
    module = getattr(OPS[name].kernel, "__module__", "") or ""
    return "built-in" if module.startswith("ngrules.") and name not in declared.FAST else None


def rule_text(rule: Rule, earlier: Iterable[Rule] = ()) -> str | None:
    """The rule's text with what it depends on (the rules before it in its pass, the ops it and
    they use); None if an op cannot be keyed."""
    from ngrules.version import __version__

    rules = [*earlier, rule]
    ops = sorted(set().union(*(_ops_of(r) for r in rules)))
    definitions = [_op_definition(name) for name in ops]
    if any(d is None for d in definitions):
        return None
    parts = [f"ngrules {__version__} code {code_digest()}"]
    parts += [f"rule {r.pass_name}.{r.name}:\n{r.source or repr(r)}" for r in rules]
    parts += [f"op {name}: {d}" for name, d in zip(ops, definitions)]
    return "\n\0".join(parts)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n\0".join(parts).encode()).hexdigest()


def settings_text(settings: dict) -> str:
    """The settings as a stable text, with the versions of the libraries drawing instances."""
    import hypothesis
    import numpy

    versions = {"hypothesis": hypothesis.__version__, "numpy": numpy.__version__}
    return json.dumps({**settings, **versions}, sort_keys=True, default=repr)


def _read(path: Path) -> dict | None:
    from ngrules.ir.fileio import read_regular

    try:
        entry = json.loads(read_regular(path, LIMIT))
    except (OSError, ValueError, Exception):  # noqa: BLE001 - a bad entry is no entry
        return None
    ok = isinstance(entry, dict) and entry.get("status") in KEPT_STATUSES
    return entry if ok and all(isinstance(entry.get(k), str) for k in ("head", "text")) else None


def _write(path: Path, entry: dict) -> None:
    """Written whole to a temporary file beside it, then renamed over it (atomic)."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".entry-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise


def _verdict(rule: Rule, entry: dict) -> Verdict | None:
    from ngrules.verification.workers import Sent

    figures = {k: entry[k] for k in FIGURES if k in entry}
    try:
        verdict = Sent(rule, **figures, head=entry["head"], text=entry["text"])
    except TypeError:
        return None
    verdict.cached = True
    return verdict


class Cache:
    """The entries of one verification run's settings (a dict: see `verify`)."""

    def __init__(self, settings: dict, base: Path | None = None):
        self.base = base if base is not None else folder()
        self.settings = settings_text(settings)

    def key(self, rule: Rule, earlier: Iterable[Rule] = ()) -> str | None:
        text = rule_text(rule, earlier)
        return None if text is None or self.base is None else _digest(text, self.settings)

    def lookup(self, rule: Rule, earlier: Iterable[Rule] = ()) -> Verdict | None:
        """The verdict cached for the rule under these settings, or None."""
        key = self.key(rule, earlier)
        entry = None if key is None else _read(self.base / "entries" / f"{key}.json")
        return None if entry is None else _verdict(rule, entry)

    def store(self, verdict: Verdict, earlier: Iterable[Rule] = ()) -> None:
        """Keep a verdict that does not fail, under its key and as its rule's last."""
        if verdict.status in FAILING or getattr(verdict, "cached", False):
            return
        key = self.key(verdict.rule, earlier)
        if key is None:
            return
        entry = {k: getattr(verdict, k) for k in FIGURES}
        entry.update(head=verdict.headline, text=str(verdict), settings=self.settings,
                     when=time.time())
        _write(self.base / "entries" / f"{key}.json", entry)
        last = _digest(rule_text(verdict.rule, earlier) or "")
        _write(self.base / "last" / f"{last}.json", entry)


def last_verdict(rule: Rule, earlier: Iterable[Rule] = (), ruleset=None) -> Verdict | None:
    """The last verdict computed for this rule's text (and the ops it uses, and `earlier`, the
    rules before it in its pass: those of `ruleset`'s pass when it is given), whatever the
    settings, or None. Its `headline` and text are as printed then; a failing verdict is
    never cached, so None also after a failure."""
    if ruleset is not None:
        earlier = _earlier(rule, ruleset)
    base, text = folder(), rule_text(rule, earlier)
    if base is None or text is None:
        return None
    entry = _read(base / "last" / f"{_digest(text)}.json")
    return None if entry is None else _verdict(rule, entry)


def _earlier(rule: Rule, ruleset) -> list[Rule]:
    order = list(ruleset.passes.get(rule.pass_name, ())) if ruleset is not None else []
    return order[: order.index(rule)] if rule in order else []


def with_cache(rules: list[Rule], ruleset, settings: dict | None,
               judge: Callable[[list[Rule]], Iterator[Verdict]],
               progress: bool = False) -> Iterator[Verdict]:
    """The rules' verdicts in order: those the cache holds for these `settings` (None: no
    cache) read from it, the others from `judge(rules missed)` and then stored. With
    `progress`, one line per rule on stderr as its verdict is known."""
    cache = Cache(settings) if settings is not None else None
    hits: dict[int, Verdict] = {}
    if cache is not None and cache.base is not None:
        for i, rule in enumerate(rules):
            found = cache.lookup(rule, _earlier(rule, ruleset))
            if found is not None:
                hits[i] = found
    fresh = judge([r for i, r in enumerate(rules) if i not in hits])
    start = time.perf_counter()
    for i, rule in enumerate(rules):
        verdict = hits[i] if i in hits else next(fresh)
        if cache is not None and cache.base is not None and i not in hits:
            cache.store(verdict, _earlier(rule, ruleset))
        if progress:
            show(i + 1, len(rules), verdict, time.perf_counter() - start)
        yield verdict


def show(i: int, n: int, verdict: Verdict, elapsed: float) -> None:
    """`[ 3/60] verified     mul_one (0.8 s)`, or `(cached)`, on stderr."""
    width = len(str(n))
    took = "cached" if getattr(verdict, "cached", False) else f"{verdict.seconds:.1f} s"
    print(f"[{i:{width}d}/{n}] {verdict.status:12s} {verdict.rule.name} ({took}; "
          f"{elapsed:.0f} s so far)", file=sys.stderr, flush=True)
