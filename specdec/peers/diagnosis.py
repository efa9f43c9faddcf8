"""What a failing configuration's counts fit, and the token-for-token check of greedy decoding.

Diagnosis (`diagnose`): the multinomial log-likelihood of the fine cell counts under each candidate
law of `specdec.peers.laws.CANDIDATES` (computed exactly like the target's, with the wrong rule at
the verified positions).  A candidate is *excluded* when the engine's own acceptance counter rules
it out: the acceptance it implies (`laws.candidate_acceptance`) lies more than ``z_max`` binomial
standard errors from the measured rate (every draft kept implies acceptance 1; a measured 0.02 is
not that).  The best fit is the most likely candidate not excluded, with its log-likelihood lead
over the next; whether it *fits* (its own law is not rejected by the same test) is the caller's
`specdec.peers.conformance.law_test` against it -- where none fits, the diagnosis says so.

Greedy (`greedy_divergences`): speculative greedy must equal the engine's own plain greedy token
for token; at the first divergence the prefix both share is given to ``plain_at`` (plain decoding
of the same engine from that prefix, one token); the divergence counts against speculation only if
plain decoding emits the token plain emitted there, not the speculative one (then plain decoding
itself is not reproducible at that prefix: a near tie, `specdec.chapters.ch01.greedy_ties`).

Example: diagnose({"target": [law], "draft law": [alt]}, [counts], implied={"draft law": 1.0},
kept=20, drafts=1000)[0]["candidate"] -> "target" ("draft law" excluded: z far below -4).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["diagnose", "greedy_divergences"]


def _z(kept: int, drafts: int, a: float) -> float:
    """Binomial z of ``kept`` of ``drafts`` against acceptance a (a in (0, 1)); +-inf at a in {0, 1}
    when the count differs from what such an a forces."""
    if a <= 0:
        return 0.0 if kept == 0 else math.inf
    if a >= 1:
        return 0.0 if kept == drafts else -math.inf
    return (kept - drafts * a) / math.sqrt(drafts * a * (1 - a))


def diagnose(candidate_laws: dict, counts, *, implied: dict | None = None, kept: int | None = None,
             drafts: int | None = None, z_max: float = 4.0) -> list[dict]:
    """Rows, best fit first: per candidate (name -> one joint per prompt, the cells of the counts)
    its log-likelihood (-inf where a sample falls where the candidate puts no mass), its deficit
    from the best candidate not excluded, and -- given ``implied`` acceptances (name -> rate) and
    the measured ``kept`` of ``drafts`` -- its z against the counter and ``excluded``; excluded
    candidates sort last."""
    if not candidate_laws:
        raise ValueError("diagnose needs at least one candidate law")
    counts = [np.asarray(c, dtype=np.float64) for c in counts]
    if not counts or any(c.ndim != 1 or not np.all(np.isfinite(c)) or np.any(c < 0) for c in counts):
        raise ValueError("counts must be one finite, non-negative 1-D array per prompt")
    if (kept is None) != (drafts is None):
        raise ValueError("give both kept and drafts (the engine's counter) or neither")
    if drafts is not None and not (isinstance(drafts, int) and isinstance(kept, int) and 0 <= kept <= drafts
                                   and drafts > 0):
        raise ValueError(f"need ints 0 <= kept <= drafts, drafts > 0; got kept={kept!r}, drafts={drafts!r}")
    rows = []
    for name, laws in candidate_laws.items():
        if len(laws) != len(counts):
            raise ValueError(f"candidate {name!r} has {len(laws)} laws for {len(counts)} prompts")
        ll = 0.0
        for law, c in zip(laws, counts):
            law = np.asarray(law, dtype=np.float64)
            if law.shape != c.shape or not np.all(np.isfinite(law)):
                raise ValueError(f"candidate {name!r}: a law must be finite, with the counts' {c.size} cells")
            seen = c > 0
            ll += -math.inf if np.any(law[seen] <= 0) else float((c[seen] * np.log(law[seen])).sum())
        row = {"candidate": name, "loglik": ll, "implied_acceptance": math.nan, "z": math.nan, "excluded": False}
        if implied is not None and name in implied and drafts is not None:
            a = float(implied[name])
            row.update(implied_acceptance=a, z=_z(kept, drafts, a))
            row["excluded"] = abs(row["z"]) > z_max
        rows.append(row)
    rows.sort(key=lambda r: (r["excluded"], -r["loglik"]))
    best = rows[0]["loglik"]
    for r in rows:
        r["deficit"] = best - r["loglik"] if math.isfinite(best) else math.nan
    return rows


def greedy_divergences(spec, plain, plain_at) -> list[dict]:
    """Per pair of sequences (speculative, plain greedy of the same engine; lists of token ids), the
    first divergence and its class: "equal", "against speculation" (plain decoding from the shared
    prefix, ``plain_at(prefix) -> token``, emits plain's token), "plain not reproducible" (it emits
    the speculative token: a near tie or nondeterminism of plain decoding), "neither" (a third token),
    or "length" (one is a prefix of the other)."""
    if len(spec) != len(plain):
        raise ValueError(f"{len(spec)} speculative sequences against {len(plain)} plain ones")
    rows = []
    for s, p in zip(spec, plain):
        s, p = [int(t) for t in s], [int(t) for t in p]
        i = next((j for j, (a, b) in enumerate(zip(s, p)) if a != b), None)
        if i is None:
            rows.append({"position": None, "class": "equal" if len(s) == len(p) else "length"})
            continue
        again = int(plain_at(p[:i]))
        cls = "against speculation" if again == p[i] else "plain not reproducible" if again == s[i] else "neither"
        rows.append({"position": i, "class": cls, "spec_token": s[i], "plain_token": p[i], "plain_again": again})
    return rows
