"""Chapter 10's runs: every configuration of `specdec.measure.engine_audit.plan` on every engine,
the law and acceptance samples and the greedy comparison (the timing: `specdec.measure.engine_speed`).

Which tokens a run yields.  Sampled settings: ``n`` samples of the first tokens per prompt
(``n_hf`` for Hugging Face's assisted generation, which decodes one sample per call); vLLM gets
max_new_tokens 2 (x1 from prefill, one verification step, so its position-1 counter is that step's
exactly), ours and Hugging Face 3 (their first step verifies x1 too; 3 keeps k = 2 unclipped).
Greedy: one sample of ``greedy_len`` tokens per prompt.  vLLM's jobs run in one worker process,
ordered so that consecutive jobs share an LLM.
"""

from __future__ import annotations

from specdec.measure.engine_audit import SETTINGS, Config, NegativeControl

__all__ = ["collect", "greedy_next"]



def _tokens(engine: str) -> int:
    return 2 if engine == "vllm" else 3


def collect(configs: list[Config], engines: dict, prompts, *, n: int, n_hf: int, greedy_len: int, seed: int,
            target=None, draft=None) -> dict:
    """(Config, setting) -> Continuations for every configuration at every setting (module
    docstring): the sampled settings' first tokens and one greedy sample of ``greedy_len`` tokens
    per prompt (negative controls: sampled settings only).  ``engines`` maps "ours" / "hf" / "vllm"
    to an adapter (a missing engine: no rows); negative controls run `NegativeControl` on ``target``
    and ``draft``; every vLLM job runs in one worker process, one configuration's jobs together."""
    out, vjobs = {}, []
    for cfg in configs:
        if cfg.engine not in engines:
            continue
        for name, s in SETTINGS.items():
            if s.temperature == 0 and cfg.role == "negative control":
                continue
            size = 1 if s.temperature == 0 else n_hf if (cfg.engine == "hf" and cfg.spec is not None) else n
            length = greedy_len if s.temperature == 0 else _tokens(cfg.engine)
            job = (prompts, size, length, s, cfg.spec, seed)
            if cfg.engine == "vllm":
                vjobs.append(((cfg, name), job))
            elif cfg.variant is not None:
                out[(cfg, name)] = NegativeControl(target, draft, cfg.variant).continue_prompts(*job)
            else:
                out[(cfg, name)] = engines[cfg.engine].continue_prompts(*job)
    if vjobs:
        for (key, _), res in zip(vjobs, engines["vllm"].run_many([j for _, j in vjobs])):
            out[key] = res
    return out


def greedy_next(engines: dict, seed: int):
    """plain_at(engine, prompt, prefix) -> that engine's plain greedy next token after prompt +
    prefix (one call each: used only where a speculative greedy output differs from plain's)."""
    def plain_at(engine: str, prompt, prefix) -> int:
        res = engines[engine].continue_prompts([list(prompt) + list(prefix)], 1, 1, SETTINGS["greedy"], None, seed)
        if res.error:
            raise RuntimeError(res.error)
        return int(res.tokens[0][0][0])
    return plain_at


