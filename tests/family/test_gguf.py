"""The GGUF writer (`specdec.family.gguf`) without llama.cpp: a round trip through the `gguf`
package's own reader (every tensor and the metadata llama.cpp reads come back as written, in
GGUF's layout), the layout on a random-weight GPT-2, an untied head written as ``output``, and a
model llama.cpp would compute differently refused.  tests/peers/test_llama_gguf.py runs the file
in the real llama-server."""

import copy

import gguf
import numpy as np
import pytest
import torch

from specdec.family.gguf import gguf_tensors, write_gguf
from specdec.family.loader import load_model, load_tokenizer


def test_the_tensors_are_the_models_in_ggufs_out_by_in_layout(tiny_pair):
    target, _ = tiny_pair
    cfg, tensors = target.config, gguf_tensors(target)
    assert tensors["token_embd.weight"].shape == (cfg.vocab_size, cfg.n_embd)
    assert tensors["position_embd.weight"].shape == (cfg.n_positions, cfg.n_embd)
    assert tensors["blk.0.attn_qkv.weight"].shape == (3 * cfg.n_embd, cfg.n_embd)
    assert tensors["blk.0.attn_output.weight"].shape == (cfg.n_embd, cfg.n_embd)
    assert tensors["blk.0.ffn_up.weight"].shape == (4 * cfg.n_embd, cfg.n_embd)
    assert tensors["blk.0.ffn_down.weight"].shape == (cfg.n_embd, 4 * cfg.n_embd)
    assert len(tensors) == 4 + 12 * cfg.n_layer and "output.weight" not in tensors    # tied head
    assert np.array_equal(tensors["blk.1.ffn_up.weight"], target.transformer.h[1].mlp.c_fc.weight.detach().numpy().T)
    assert all(t.dtype == np.float32 and t.flags.c_contiguous for t in tensors.values())


def test_an_untied_head_is_written_and_other_activations_are_refused(tiny_pair):
    model = copy.deepcopy(tiny_pair[0])
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone() + 1.0)
    assert np.array_equal(gguf_tensors(model)["output.weight"], model.lm_head.weight.detach().numpy())
    model.config.activation_function = "relu"
    with pytest.raises(ValueError, match="activation 'relu'"):
        gguf_tensors(model)


def test_a_written_member_reads_back_with_the_metadata_llama_cpp_needs(tmp_path):
    model, tokenizer = load_model("draft-distilled", dtype="float32"), load_tokenizer("embedded")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    path = write_gguf(model, tokenizer, tmp_path / "draft.gguf")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())        # input unchanged
    reader = gguf.GGUFReader(path)
    field = lambda key: reader.fields[key].contents()                                   # noqa: E731
    cfg = model.config
    assert field("general.architecture") == "gpt2" and field("general.file_type") == 0   # all float32
    assert (field("gpt2.context_length"), field("gpt2.block_count"), field("gpt2.embedding_length"),
            field("gpt2.attention.head_count")) == (cfg.n_positions, cfg.n_layer, cfg.n_embd, cfg.n_head)
    assert field("tokenizer.ggml.model") == "gpt2" and field("tokenizer.ggml.pre") == "gpt-2"
    vocab = tokenizer.get_vocab()
    tokens = field("tokenizer.ggml.tokens")
    assert len(tokens) == cfg.vocab_size and all(tokens[i] == t for t, i in vocab.items())
    assert field("tokenizer.ggml.token_type")[cfg.eos_token_id] == gguf.TokenType.CONTROL
    assert field("tokenizer.ggml.merges")[0] == "Ġ t"
    written = gguf_tensors(model)
    assert {t.name for t in reader.tensors} == set(written)
    for t in reader.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32
        assert np.array_equal(np.asarray(t.data).reshape(written[t.name].shape), written[t.name]), t.name

