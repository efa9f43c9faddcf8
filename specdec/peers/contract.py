"""The one argument contract of every engine adapter (ours, Hugging Face, vLLM, any later one),
checked once, before an engine is touched: a bad request is refused here, with a message naming
the argument, the value and the rule, instead of being run as something else or crashing inside
an engine.  TypeError for a value of the wrong type, ValueError for one out of range.

The rules (`Sampling` and `Speculation` check their own fields when built, `specdec.peers.interface`):
  * prompts: a non-empty list (or tuple) of non-empty lists (or tuples) of token ids.  A numpy
    array or a torch tensor is refused, not converted: pass ``ids.tolist()`` (a 2-D array of
    padded prompts would otherwise be decoded with its padding as prompt);
  * token id: a Python or numpy integer (not a bool, not a float even when whole) in [0, V), V the
    model's vocabulary size, which the adapter passes (None where it is unknown, e.g. a remote
    server: then >= 0 only);
  * n, max_new_tokens: ints >= 1 (not bool);
  * seed: an int in [0, 2**32) (not bool, not float: 1.5 is refused, never run as seed 1); the
    upper end is the range numpy's legacy seeding takes, which vLLM seeds with;
  * context: the longest prompt + max_new_tokens (+ k when speculating) fits the model's context
    (its n_positions / max_position_embeddings; for vLLM the smaller of that and max_model_len);
  * speculation: a method the engine runs (``methods``; None where the engine itself refuses an
    unknown one with a row, as vLLM's worker does), a draft for the ``drafted`` methods and none
    for the others, only the options the engine takes for the method, each option in its range
    (`OPTION_RULES`; ``prompt_lookup_min`` <= ``prompt_lookup_max``).

Example: check_request([[5, 6]], 2, 3, Sampling(1.0), None, 0, vocab_size=2048, context=512)
  -> Request(prompts=[[5, 6]], n=2, max_new_tokens=3, seed=0, method='none', options={});
  the same with [[5, 4096]] -> ValueError "prompts[0][1] = 4096 is not a token id of this model:
  ids are ints in [0, 2048)".
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

from specdec.peers.interface import Sampling, Speculation, as_int

__all__ = ["SEED_END", "OPTION_RULES", "Request", "check_request", "check_prompts", "check_seed",
           "check_options", "config_limits"]

SEED_END = 2 ** 32  # seeds are ints in [0, SEED_END): numpy's legacy seed range (vLLM calls np.random.seed)
OPTION_RULES = {  # option name -> its least value (each an int): the n-gram sizes
    "max_matching_ngram_size": 1,  # Hugging Face prompt lookup: the longest n-gram matched
    "prompt_lookup_min": 1,  # vLLM n-gram: the shortest n-gram matched
    "prompt_lookup_max": 1,  # vLLM n-gram: the longest n-gram matched
}


class Request(NamedTuple):
    """A checked request, as Python values: prompts as lists of ints, the method ("none" for plain
    decoding) and its options as a dict."""
    prompts: list[list[int]]
    n: int
    max_new_tokens: int
    seed: int
    method: str
    options: dict


def check_prompts(prompts, vocab_size: int | None = None, name: str = "prompts") -> list[list[int]]:
    """``prompts`` as a list of lists of Python ints, after the prompt and token-id rules (module
    docstring).  Example: check_prompts([[1, numpy.int64(2)]], 2048) -> [[1, 2]];
    check_prompts([[1, True]]) -> TypeError "prompts[0][1] = True is a bool, not a token id"."""
    if not isinstance(prompts, (list, tuple)):
        raise TypeError(f"{name} must be a list of token-id lists, got {type(prompts).__name__} "
                        "(an array or tensor of ids is not converted: pass ids.tolist())")
    if not prompts:
        raise ValueError(f"{name} is empty: it needs at least one prompt of at least one token id")
    ids = "ints >= 0" if vocab_size is None else f"ints in [0, {vocab_size})"
    out = []
    for i, p in enumerate(prompts):
        if not isinstance(p, (list, tuple)):
            raise TypeError(f"{name}[{i}] must be a list of token ids, got {type(p).__name__} "
                            "(an array or tensor of ids is not converted: pass ids.tolist())")
        if not p:
            raise ValueError(f"{name}[{i}] is empty: every prompt needs at least one token id")
        for j, t in enumerate(p):
            if isinstance(t, bool) or not isinstance(t, numbers.Integral):
                raise TypeError(f"{name}[{i}][{j}] = {t!r} is a {type(t).__name__}, not a token id (ids are {ids})")
            if t < 0 or (vocab_size is not None and t >= vocab_size):
                raise ValueError(f"{name}[{i}][{j}] = {int(t)} is not a token id of this model: ids are {ids}")
        out.append([int(t) for t in p])
    return out


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` as a Python int in [0, SEED_END).  Example: check_seed(1.5) -> TypeError."""
    return as_int(name, seed, low=0, high=SEED_END)


def check_options(method: str, options: dict) -> None:
    """Every option of `OPTION_RULES` present in ``options`` is an int >= its least value, and
    prompt_lookup_min <= prompt_lookup_max where both are present.  Other names pass (which
    options an engine takes is ``check_request``'s ``options``)."""
    for key, least in OPTION_RULES.items():
        if key in options:
            as_int(f"option {key} of method {method!r}", options[key], low=least)
    lo, hi = options.get("prompt_lookup_min"), options.get("prompt_lookup_max")
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"method {method!r}: prompt_lookup_min must be <= prompt_lookup_max, got {lo} > {hi}")


def config_limits(config: dict) -> tuple[int, int | None]:
    """(vocabulary size V, context in positions or None) of a Hugging Face model config as a dict
    (``config.to_dict()`` or a model folder's config.json).
    Example: the embedded target's -> (2048, 512)."""
    if "vocab_size" not in config:
        raise ValueError("the model's config has no vocab_size: cannot check token ids")
    context = config.get("max_position_embeddings") or config.get("n_positions")
    return int(config["vocab_size"]), (int(context) if context else None)


def check_request(prompts, n, max_new_tokens, sampling, spec, seed, *, vocab_size: int | None,
                  context: int | None, methods: tuple | None = None, drafted: tuple = (),
                  options: dict | None = None) -> Request:
    """The request after every rule of the module docstring, as Python values.

    ``methods``: the speculative methods the engine runs, "none" included (None: any name, the
    engine refuses an unknown one itself); ``drafted``: those that take a draft model;
    ``options``: method -> the option names it takes (a method absent takes none; None: any
    option, the engine judges the names).  ``vocab_size`` and ``context`` come from the model
    (`config_limits`); None skips that rule.
    """
    if not isinstance(sampling, Sampling):
        raise TypeError(f"sampling must be a specdec.peers.Sampling, got {sampling!r} ({type(sampling).__name__})")
    if spec is not None and not isinstance(spec, Speculation):
        raise TypeError(f"spec must be None or a specdec.peers.Speculation, got {spec!r} ({type(spec).__name__})")
    prompts = check_prompts(prompts, vocab_size)
    for name, value in (("n", n), ("max_new_tokens", max_new_tokens)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"n and max_new_tokens must be ints >= 1, got {name}={value!r} ({type(value).__name__})")
        if value < 1:
            raise ValueError(f"n and max_new_tokens must be ints >= 1, got {name}={value}")
    seed = check_seed(seed)
    method = "none" if spec is None else spec.method
    if methods is not None and method not in methods:
        raise ValueError(f"unknown speculative method {method!r}; this engine runs {', '.join(methods)}")
    opts = {} if method == "none" else dict(spec.options)
    if method != "none":
        if method in drafted and not spec.draft:
            raise ValueError(f"method {method!r} needs a draft: Speculation({method!r}, k, draft='draft-distilled')")
        if method not in drafted and spec.draft:
            raise ValueError(f"method {method!r} takes no draft model (got draft={spec.draft!r})")
        if options is not None:
            allowed = set(options.get(method, ()))
            if set(opts) - allowed:
                raise ValueError(f"method {method!r} takes options {sorted(allowed)}, got {sorted(opts)}")
        check_options(method, opts)
    k = 0 if method == "none" else spec.k
    longest = max(len(p) for p in prompts) + int(max_new_tokens) + k
    if context is not None and longest > context:
        raise ValueError(f"the longest prompt ({longest - int(max_new_tokens) - k} ids) + max_new_tokens "
                         f"({int(max_new_tokens)})" + (f" + k ({k})" if k else "") +
                         f" = {longest} exceeds the model's context of {context} positions")
    return Request(prompts, int(n), int(max_new_tokens), seed, method, opts)
