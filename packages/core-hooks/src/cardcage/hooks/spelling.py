"""The one "did you mean" of every cardcage message: the candidate a mistyped name meant.

Users type entry-point and plugin names into environment variables by hand, in whatever case
their shell history holds (``SGLANG_PLATFORM=ACME_NPU`` for ``acme_npu``), with ``-`` for ``_``,
or with a typo. A difference of case or separator is not a typo a fuzzy match should have to
find (``difflib`` scores ``ACME_NPU`` against ``acme_npu`` below its cutoff), so the candidates
are compared in a normalised spelling first and fuzzily only after that. Imported on error paths
only: ``difflib`` is not cheap to import.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["closest", "normalised"]


def normalised(name: str) -> str:
    """``name`` in the spelling two names are compared in: stripped, lower case, ``-`` as ``_``."""
    return name.strip().lower().replace("-", "_")


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``name`` most likely meant, or None when none is close.

    A candidate that differs only in case, surrounding spaces or ``-``/``_`` wins outright;
    otherwise the closest by ``difflib`` (ratio ≥ 0.6) in the normalised spelling. The
    candidate is returned as it is spelt, never ``name`` itself.
    """
    pool = sorted({c for c in candidates if c != name})
    if not pool:
        return None
    wanted = normalised(name)
    by_spelling = {normalised(c): c for c in pool}
    if wanted in by_spelling:
        return by_spelling[wanted]
    import difflib

    close = difflib.get_close_matches(wanted, sorted(by_spelling), n=1, cutoff=0.6)
    return by_spelling[close[0]] if close else None
