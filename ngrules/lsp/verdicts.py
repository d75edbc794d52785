"""A rule's last verdict for hover, from verification's verdict cache.

The cache keys a verdict by the rule's text, the rules before it in its pass and the ops they
use, so the document is checked again (its ops declared only while the cache is read) and
the checked rule looked up. Never an error in an editor: no cache, nothing cached, a document
with errors or a cache that cannot answer is None.
"""

from __future__ import annotations

from ngrules.lang.loader import checked_text


def last_verdict(text: str, path: str, name: str) -> str | None:
    """The headline of the last verdict of the rule `name` in the document, or None."""
    try:
        from ngrules.verification import cache
    except ImportError:
        return None
    try:
        with checked_text(text, path) as rules:
            rule = None if rules is None else next((r for r in rules.rules if r.name == name), None)
            found = None if rule is None else cache.last_verdict(rule, ruleset=rules)
    except Exception:  # noqa: BLE001 - a broken cache must not break hover
        return None
    return None if found is None else found.headline
