"""Reproducer: vLLM draft model, k = 2 (defaults) at temperature 1.

Plain decoding and the speculative configuration below continue one prompt 2000 times each at
temperature 1 for 2 tokens; under an exact rule both samples of the second token follow the same law,
so their total-variation distance is only sampling noise, which a second plain run (another seed)
shows.  Run from the repository root after `make vllm-env`:

    .venv-vllm/bin/python data/results/10_engines/reproduce_vllm_draft_model_k_2_defaults.py
"""
import collections
import os
import pathlib
import tempfile

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
ROOT = pathlib.Path(__file__).resolve().parents[3]
PROMPT = [701, 325, 992, 455, 44, 423, 281, 7]
SPEC = {'method': 'draft_model', 'num_speculative_tokens': 2, 'model': 'draft-distilled'}
SAMPLING = dict(temperature=1.0, top_k=0, top_p=1.0)


def folder(member, into):
    d = pathlib.Path(into, member)
    d.mkdir()
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        (d / f).symlink_to(ROOT / "data" / "models" / member / f)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (d / f).symlink_to(ROOT / "data" / "models" / f)
    return str(d)


def second_tokens(llm, n):
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    params = SamplingParams(n=n, max_tokens=2, ignore_eos=True, detokenize=False, **SAMPLING)
    out = llm.generate([TokensPrompt(prompt_token_ids=PROMPT)], params, use_tqdm=False)
    return collections.Counter(c.token_ids[1] for c in out[0].outputs)


def tv(a, b):
    na, nb = sum(a.values()), sum(b.values())
    return 0.5 * sum(abs(a[x] / na - b[x] / nb) for x in set(a) | set(b))


if __name__ == "__main__":
    from vllm import LLM
    with tempfile.TemporaryDirectory() as tmp:
        target = folder("target", tmp)
        spec = dict(SPEC, model=folder(SPEC["model"], tmp)) if "model" in SPEC else SPEC
        counts = {}
        for name, cfg, seed in (("plain", None, 0), ("plain, another seed", None, 1), ("speculative", spec, 0)):
            llm = LLM(model=target, dtype="float32", enforce_eager=True, max_model_len=512, seed=seed,
                      speculative_config=cfg, disable_log_stats=False)
            counts[name] = second_tokens(llm, 2000)
            if cfg:
                print({m.name: getattr(m, "value", getattr(m, "values", None)) for m in llm.get_metrics()
                       if m.name.startswith("vllm:spec_decode")})
            llm.llm_engine.engine_core.shutdown()
            del llm
        print("TV(second token), plain vs plain, another seed:", round(tv(counts["plain"], counts["plain, another seed"]), 3))
        print("TV(second token), plain vs speculative:        ", round(tv(counts["plain"], counts["speculative"]), 3))
