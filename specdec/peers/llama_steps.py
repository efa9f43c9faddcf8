"""Each llama-server request's verification steps, (drafted, accepted) in order, from what the
server reports: only per-request totals ``draft_n`` / ``draft_n_accepted`` (`specdec.peers.llama`'s
module docstring).  A draft model's steps follow from the totals where only one step sequence gives
them (`step_record`); a lookup draft's length varies, so its steps are replayed from the tokens by
llama.cpp's own lookup rule and kept only where the replay gives the totals (`ngram_steps`).

Example: step_record(3, 1, k=2, n_predict=4) -> [(2, 0), (1, 1)]
"""
from __future__ import annotations

__all__ = ["step_record", "ngram_steps", "step_records"]


def step_record(draft_n: int, accepted: int, k: int, n_predict: int, budget: int = 20000) -> list[tuple[int, int]] | None:
    """Every step of one request, (drafted, accepted) in order, steps without drafts as (0, 0), where
    the request's totals determine them; None where several step sequences give the same totals (or
    the search passes ``budget`` nodes).  The server drafts min(k, n_predict - decoded - 1) tokens a
    step after the prefill token (module docstring), and a step emits its accepted drafts and one
    more token.  Example: step_record(3, 1, k=2, n_predict=4) -> [(2, 0), (1, 1)]."""
    found, nodes = [], [0]

    def walk(decoded: int, dn: int, da: int, steps: list) -> None:
        nodes[0] += 1
        if len(found) > 1 or nodes[0] > budget:
            return
        if decoded >= n_predict:
            if dn == draft_n and da == accepted:
                found.append(list(steps))
            return
        m = max(0, min(k, n_predict - decoded - 1))
        if dn + m > draft_n:
            return
        for a in range(min(m, accepted - da) + 1):
            walk(decoded + a + 1, dn + m, da + a, steps + [(m, a)])

    walk(1, 0, 0, [])
    return found[0] if len(found) == 1 and nodes[0] <= budget else None


def ngram_steps(prompt: list[int], tokens: list[int], k: int, n_predict: int) -> list[tuple[int, int]]:
    """Every step of one ngram-simple request (size n 1, size m ``k``), (drafted, accepted), replayed
    on its tokens by llama.cpp's lookup (``common_ngram_simple_draft``, common/ngram-map.cpp): the
    context is the prompt and the tokens before the last sampled one; that token is looked up at
    positions len(context) - 2 down to 1 (llama.cpp skips position 0 and the context's last
    position); the tokens after the match, at most k and at most n_predict - decoded - 1, are the
    draft, kept while they equal the tokens the target sampled (sample-and-match).  A caller checks
    the sums against the server's totals: a difference means the replay is not what ran.  It assumes
    no partial draft is carried to the next step, which llama-server does only for targets whose
    memory is a full-sequence or recurrent state (never this family's KV cache)."""
    toks, out, decoded = list(prompt) + list(tokens), [], 1
    while decoded < n_predict:
        cur, last = len(prompt) + decoded - 1, toks[len(prompt) + decoded - 1]
        ctx, m, draft = toks[:cur], 0, []
        if cur > 1 + k + 1:
            match = next((j for j in range(cur - 2, 0, -1) if ctx[j] == last), 0)
            if match:
                m = min(k, n_predict - decoded - 1, cur - (match + 1))
                draft = ctx[match + 1:match + 1 + m]
        emitted = toks[len(prompt) + decoded:len(prompt) + n_predict]
        a = next((i for i, (d, t) in enumerate(zip(draft, emitted)) if d != t), len(draft))
        out.append((len(draft), a))
        decoded += a + 1
    return out


def step_records(method: str, prompt: list[int], tokens: list[int], draft_n: int, accepted: int, k: int,
                 n_predict: int) -> list[tuple[int, int]] | None:
    """One sample's step record for a request of ``method`` ("draft_model" or "ngram"); None where it
    is not determined (the totals admit several sequences, or the lookup replay does not give them)."""
    if method != "ngram":
        return step_record(draft_n, accepted, k, n_predict)
    steps = ngram_steps(prompt, tokens, k, n_predict)
    return steps if (sum(m for m, _ in steps), sum(a for _, a in steps)) == (draft_n, accepted) else None
