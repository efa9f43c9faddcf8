"""Chapter 10's reproducers and diagnosis paragraphs: for every configuration the law test rejects,
the words that say what the test shows, and for a vLLM or Hugging Face one a standalone script
(that engine's own packages only) that shows its second-token law against plain decoding's, with a
plain-against-plain control for the size of sampling noise.

Example: write_reproducers(laws, configs, prompt, folder) -> [folder / "reproduce_vllm_<label>.py", ...]
"""

from __future__ import annotations

import pathlib
import re

from specdec.chapters.ch10.audit import SETTINGS, Config
from specdec.peers.vllm import speculative_config

__all__ = ["diagnosis_text", "reproducer", "hf_reproducer", "hf_generate_args", "write_reproducers", "REPRODUCER",
           "REPRODUCER_HF"]


def diagnosis_text(row: dict, acc: dict | None, versions: str) -> str:
    """The paragraph a failing configuration gets: what the test shows, at what power, which named
    wrong rule fits best, what its acceptance was against the exact expectation, and the versions."""
    parts = [f"{row['engine']} {versions}, {row['configuration']}, {row['setting']}: {row['verdict']}; binned TV "
             f"{row['tv']:.3f} [{row['tv_lo']:.3f}, {row['tv_hi']:.3f}] over n = {row['n']}"]
    if row.get("best_fit") == "target":
        parts.append("none of the named wrong rules fits the counts better than the target's own law, so the "
                     "departure is of a kind this diagnosis does not name")
    elif row.get("best_fit"):
        parts.append(f"of the named wrong rules, the counts fit \"{row['best_fit']}\" best "
                     f"(log-likelihood lead {row['fit_lead']:.1f} over the next; this test's power against that "
                     f"rule {row['fit_power']:.2f})")
    if acc and "measured" in acc:
        parts.append(f"position-1 acceptance {acc['measured']:.3f} against the exact {acc['rule']} expectation "
                     f"{acc['expected_lo']:.3f}-{acc['expected_hi']:.3f} (z = {acc['z']:.1f})")
    return "; ".join(parts) + "."


REPRODUCER = '''"""Reproducer: {title}.

Plain decoding and the speculative configuration below continue one prompt {n} times each at
{setting} for 2 tokens; under an exact rule both samples of the second token follow the same law,
so their total-variation distance is only sampling noise, which a second plain run (another seed)
shows.  Run from the repository root after `make vllm-env`:

    .venv-vllm/bin/python {path}
"""
import collections
import os
import pathlib
import tempfile

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
ROOT = pathlib.Path(__file__).resolve().parents[3]
PROMPT = {prompt}
SPEC = {spec}
SAMPLING = dict(temperature={temperature}, top_k={top_k}, top_p={top_p})


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
        counts = {{}}
        for name, cfg, seed in (("plain", None, 0), ("plain, another seed", None, 1), ("speculative", spec, 0)):
            llm = LLM(model=target, dtype="float32", enforce_eager=True, max_model_len=512, seed=seed,
                      speculative_config=cfg, disable_log_stats=False)
            counts[name] = second_tokens(llm, {n})
            if cfg:
                print({{m.name: getattr(m, "value", getattr(m, "values", None)) for m in llm.get_metrics()
                       if m.name.startswith("vllm:spec_decode")}})
            llm.llm_engine.engine_core.shutdown()
            del llm
        print("TV(second token), plain vs plain, another seed:", round(tv(counts["plain"], counts["plain, another seed"]), 3))
        print("TV(second token), plain vs speculative:        ", round(tv(counts["plain"], counts["speculative"]), 3))
'''


REPRODUCER_HF = '''"""Reproducer: {title}.

Plain `generate` and the configuration below continue one prompt {n} times each at {setting} for
2 tokens; under an exact rule both samples of the second token follow the same law, so their
total-variation distance is only sampling noise, which a second plain run (another seed) shows.
Run from the repository root in the project's environment (`make env`):

    .venv/bin/python {path}
"""
import collections
import pathlib

import torch
from transformers import AutoModelForCausalLM

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROMPT = {prompt}
GENERATE = {generate}  # the configuration's generate arguments
ASSISTANT = {assistant}  # the draft model's family member, or None
SAMPLING = dict(do_sample=True, temperature={temperature}, top_k={top_k}, top_p={top_p})


def second_tokens(model, n, seed, batched, **extra):
    ids = torch.tensor([PROMPT])
    kw = dict(max_new_tokens=2, pad_token_id=0, eos_token_id=None, **SAMPLING, **extra)
    counts = collections.Counter()
    torch.manual_seed(seed)
    with torch.inference_mode():
        if batched:
            out = model.generate(ids.repeat(n, 1), attention_mask=torch.ones(n, len(PROMPT), dtype=torch.long), **kw)
            counts.update(out[:, len(PROMPT) + 1].tolist())
        else:  # assisted generation takes batch 1: one call per sample
            for _ in range(n):
                out = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
                counts[int(out[0, len(PROMPT) + 1])] += 1
    return counts


def tv(a, b):
    na, nb = sum(a.values()), sum(b.values())
    return 0.5 * sum(abs(a[x] / na - b[x] / nb) for x in set(a) | set(b))


if __name__ == "__main__":
    model = AutoModelForCausalLM.from_pretrained(ROOT / "data" / "models" / "target", dtype=torch.float32).eval()
    plain, again = second_tokens(model, {n}, 0, True), second_tokens(model, {n}, 1, True)
    extra = dict(GENERATE)
    if ASSISTANT:
        extra["assistant_model"] = AutoModelForCausalLM.from_pretrained(ROOT / "data" / "models" / ASSISTANT,
                                                                        dtype=torch.float32).eval()
    spec = second_tokens(model, {n}, 2, False, **extra)
    print("TV(second token), plain vs plain, another seed:", round(tv(plain, again), 3))
    print("TV(second token), plain vs speculative:        ", round(tv(plain, spec), 3))
'''


def hf_generate_args(cfg: Config) -> tuple[dict, str | None]:
    """(generate keyword arguments, assistant member or None) of a Hugging Face configuration, as
    `specdec.peers.hf.hf_assisted` passes them."""
    spec, opts = cfg.spec, dict(cfg.spec.options)
    if spec.method == "prompt_lookup":
        ngram = int(opts.get("max_matching_ngram_size", 2))
        return {"prompt_lookup_num_tokens": spec.k, "max_matching_ngram_size": ngram}, None
    if spec.method == "draft_model":
        return {"num_assistant_tokens": spec.k, "num_assistant_tokens_schedule": "constant",
                "assistant_confidence_threshold": 0.0}, spec.draft
    raise ValueError(f"no Hugging Face reproducer for method {spec.method!r}")


def reproducer(cfg: Config, setting: str, prompt, spec_config: dict, path: str, n: int = 2000) -> str:
    """A standalone script (vLLM and the standard library only) that shows a failing vLLM
    configuration's second-token law against plain decoding's, with a plain-vs-plain control."""
    s = SETTINGS[setting]
    spec = dict(spec_config)
    if "model" in spec:
        spec["model"] = pathlib.Path(spec["model"]).name  # a family member, linked by the script
    return REPRODUCER.format(title=f"vLLM {cfg.label} at {setting}", n=n, setting=setting, path=path,
                             prompt=[int(x) for x in prompt], spec=repr(spec), temperature=s.temperature,
                             top_k=s.top_k or 0, top_p=s.top_p or 1.0)


def hf_reproducer(cfg: Config, setting: str, prompt, path: str, n: int = 2000) -> str:
    """A standalone script (transformers and torch only) that shows a failing Hugging Face
    configuration's second-token law against plain `generate`'s, with a plain-vs-plain control."""
    s = SETTINGS[setting]
    generate, assistant = hf_generate_args(cfg)
    return REPRODUCER_HF.format(title=f"Hugging Face {cfg.label} at {setting}", n=n, setting=setting, path=path,
                                prompt=[int(x) for x in prompt], generate=repr(generate), assistant=repr(assistant),
                                temperature=s.temperature, top_k=s.top_k or 0, top_p=s.top_p or 1.0)


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def write_reproducers(laws, configs: list[Config], prompt, folder, n: int = 2000) -> list[pathlib.Path]:
    """One script per vLLM or Hugging Face speculative configuration rejected at some setting (its
    first such setting), written under ``folder``; stale scripts of configurations that now pass
    are removed."""
    folder = pathlib.Path(folder)
    by_key = {(c.engine, c.label): c for c in configs if c.engine in ("vllm", "hf") and c.role == "speculative"}
    failed = {}
    for r in laws.to_dict("records"):
        if r.get("status") == "reject" and (r["engine"], r["configuration"]) in by_key:
            failed.setdefault((r["engine"], r["configuration"]), r["setting"])
    for old in [*folder.glob("reproduce_vllm_*.py"), *folder.glob("reproduce_hf_*.py")]:
        old.unlink()
    out = []
    for (engine, label), setting in failed.items():
        cfg = by_key[(engine, label)]
        path = folder / f"reproduce_{engine}_{_slug(label)}.py"
        rel = f"data/results/10_engines/{path.name}"  # where the committed copy lives
        if engine == "vllm":
            spec = speculative_config(cfg.spec, folder_of=lambda member: member)
            path.write_text(reproducer(cfg, setting, prompt, spec, str(rel), n=n))
        else:
            path.write_text(hf_reproducer(cfg, setting, prompt, str(rel), n=n))
        out.append(path)
    return out
