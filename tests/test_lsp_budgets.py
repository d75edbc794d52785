"""The language server's analyses share one budget of child processes (issue 37, F12): 16 open
documents of 1 MB once forked 16 children at once. At most MAX_CHILDREN run; the others wait,
each with its latest text, and every document still gets its diagnostics."""

from __future__ import annotations

import asyncio

from ngrules.lsp.background import MAX_CHILDREN, Background

RULES = "pass p\nrule r: Log(Exp(x)) => x\n"
WRONG = "pass p\nrule r: Lgo(x) => x\n"


def _run(starts, limit: int = MAX_CHILDREN, timeout: float = 60.0):
    """Start the analyses (key, text) in order; (diagnostics per key, most children at once)."""

    async def run():
        background, reported, most = Background(limit), {}, [0]

        def done_for(key):
            def done(found):
                reported[key] = found
                most[0] = max(most[0], len(background.running))
            return done

        for key, text in starts:
            background.start(key, text, f"/t/{key}.rules", done_for(key))
            most[0] = max(most[0], len(background.running))
        for _ in range(int(timeout / 0.05)):
            if len(reported) == len({k for k, _ in starts}):
                break
            await asyncio.sleep(0.05)
        background.close()
        return reported, most[0], len(background.waiting)

    return asyncio.run(run())


def test_sixteen_documents_never_run_more_than_the_limit_of_children():
    starts = [(f"d{i}", RULES if i % 2 else WRONG) for i in range(16)]
    reported, most, waiting = _run(starts)
    assert most <= MAX_CHILDREN == 2
    assert sorted(reported) == sorted(k for k, _ in starts) and waiting == 0
    assert all(reported[f"d{i}"] == [] for i in range(1, 16, 2))
    assert all("unknown op" in reported[f"d{i}"][0].message for i in range(0, 16, 2))


def test_a_waiting_document_is_analysed_with_its_latest_text_once():
    starts = [("a", RULES), ("b", RULES), ("c", WRONG), ("c", RULES)]
    reported, most, _ = _run(starts, limit=1)
    assert most == 1 and reported == {"a": [], "b": [], "c": []}
