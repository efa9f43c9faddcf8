"""A GPT-2 model of the family written as a float32 GGUF file, the format llama.cpp loads.

Contract: ``write_gguf(model, tokenizer, path)`` takes a Hugging Face ``GPT2LMHeadModel`` (GELU
"gelu_new" MLP of width ``n_inner or 4 * n_embd``, attention scaled by 1/sqrt(head size)) and its
byte-level BPE tokenizer, and writes one file llama.cpp reads as architecture ``gpt2`` with every
tensor in float32 (a model held in float16 or bfloat16 is widened, exactly), so llama.cpp computes
the same function as the model: no quantisation, no renumbered tokens.  The mapping is that of
llama.cpp's own converter (``convert_hf_to_gguf.py``, class GPT2Model):

    wte -> token_embd, wpe -> position_embd, h.{i}.ln_1 -> blk.{i}.attn_norm,
    h.{i}.attn.c_attn -> blk.{i}.attn_qkv, h.{i}.attn.c_proj -> blk.{i}.attn_output,
    h.{i}.ln_2 -> blk.{i}.ffn_norm, h.{i}.mlp.c_fc -> blk.{i}.ffn_up,
    h.{i}.mlp.c_proj -> blk.{i}.ffn_down, ln_f -> output_norm, lm_head -> output (when untied)

The four Conv1D weights are stored (in, out) by Hugging Face and (out, in) by GGUF, so they are
transposed; a tied ``lm_head`` is left out (llama.cpp reuses ``token_embd``).  Metadata: context
length = ``n_positions``, the vocabulary in id order with the tokenizer's special tokens marked as
control tokens, the merges as ``"a b"`` strings, ``tokenizer.ggml.model = "gpt2"`` and
``tokenizer.ggml.pre = "gpt-2"`` (GPT-2's pre-tokenizer regex, the one the family's tokenizer
uses), BOS/EOS from the config and no BOS added (as GPT-2).  The input model is not modified.

Example: write_embedded("target", Path("target.gguf")) -> Path("target.gguf"), whose tensors are
token_embd.weight (2048 x 384, numpy order: vocabulary x width), position_embd.weight (512 x 384),
blk.0.attn_norm.weight ... blk.7.ffn_down.bias, output_norm.weight, output_norm.bias.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

__all__ = ["GGUF_NAMES", "gguf_tensors", "write_gguf", "write_embedded"]

_T = gguf.MODEL_TENSOR
# Hugging Face GPT-2 name (after "transformer.") -> (GGUF tensor, transposed)
GGUF_NAMES = {
    "wte": (_T.TOKEN_EMBD, False), "wpe": (_T.POS_EMBD, False), "ln_f": (_T.OUTPUT_NORM, False),
    "ln_1": (_T.ATTN_NORM, False), "attn.c_attn": (_T.ATTN_QKV, True), "attn.c_proj": (_T.ATTN_OUT, True),
    "ln_2": (_T.FFN_NORM, False), "mlp.c_fc": (_T.FFN_UP, True), "mlp.c_proj": (_T.FFN_DOWN, True),
}


def _check_config(config) -> None:
    why = []
    if config.model_type != "gpt2":
        why.append(f"model_type {config.model_type!r}")
    if config.activation_function != "gelu_new":
        why.append(f"activation {config.activation_function!r} (llama.cpp's gpt2 uses tanh-GELU)")
    if not config.scale_attn_weights or config.scale_attn_by_inverse_layer_idx:
        why.append("attention not scaled by 1/sqrt(head size)")
    if why:
        raise ValueError("not a GPT-2 llama.cpp computes the same way: " + "; ".join(why))


def gguf_tensors(model) -> dict[str, np.ndarray]:
    """{GGUF tensor name: float32 array in GGUF's (out, in) layout} for a GPT2LMHeadModel."""
    _check_config(model.config)
    state = {k: v.detach().to("cpu").float().numpy() for k, v in model.state_dict().items()}
    out = {}
    for key, value in state.items():
        if not key.startswith("transformer.") or key.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        parts = key[len("transformer."):].split(".")
        block = None
        if parts[0] == "h":
            block, parts = int(parts[1]), parts[2:]
        stem, suffix = ".".join(parts[:-1]), parts[-1]       # e.g. "attn.c_attn", "weight"
        tensor, transposed = GGUF_NAMES[stem]
        name = gguf.TENSOR_NAMES[tensor].format(bid=block) + "." + suffix
        out[name] = np.ascontiguousarray(value.T if transposed and suffix == "weight" else value)
    head = state.get("lm_head.weight")
    if head is not None and not np.array_equal(head, state["transformer.wte.weight"]):
        out[gguf.TENSOR_NAMES[_T.OUTPUT] + ".weight"] = np.ascontiguousarray(head)
    return out


def _vocabulary(tokenizer, n_vocab: int) -> tuple[list[str], list[int], list[str]]:
    """(tokens by id, GGUF token types, merges "a b") of a byte-level BPE tokenizer."""
    import json

    ids = tokenizer.get_vocab()
    if sorted(ids.values()) != list(range(len(ids))) or len(ids) > n_vocab:
        raise ValueError(f"tokenizer ids are not 0..{len(ids) - 1} within the model's {n_vocab} logits")
    by_id = {i: t for t, i in ids.items()}
    special = set(tokenizer.all_special_ids)
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(n_vocab)]
    types = [gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL if i in by_id
             else gguf.TokenType.UNUSED for i in range(n_vocab)]
    spec = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    if spec["type"] != "BPE":
        raise ValueError(f"tokenizer model {spec['type']!r}, not BPE")
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["merges"]]
    return tokens, [int(t) for t in types], merges


def write_gguf(model, tokenizer, path: Path, name: str = "specdec") -> Path:
    """Write `model` and `tokenizer` to `path` as a float32 GGUF (see the module's contract)."""
    config = model.config
    tensors = gguf_tensors(model)
    n_vocab = tensors["token_embd.weight"].shape[0]
    tokens, types, merges = _vocabulary(tokenizer, n_vocab)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.GPT2])
    writer.add_name(name)
    writer.add_block_count(config.n_layer)
    writer.add_context_length(config.n_positions)
    writer.add_embedding_length(config.n_embd)
    writer.add_feed_forward_length(config.n_inner or 4 * config.n_embd)
    writer.add_head_count(config.n_head)
    writer.add_layer_norm_eps(config.layer_norm_epsilon)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    writer.add_add_bos_token(False)
    for tensor_name, array in tensors.items():
        writer.add_tensor(tensor_name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path


def write_embedded(member: str, path: Path) -> Path:
    """The family member `member` ('target', 'draft-distilled', ...) as a float32 GGUF at `path`."""
    from specdec.family.loader import load_model, load_tokenizer

    return write_gguf(load_model(member, dtype="float32"), load_tokenizer("embedded"), path, name=member)
