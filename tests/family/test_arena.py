"""specdec.family.arena: packing a model's weights end to end changes no value, keeps tied parameters
one parameter, gives each parameter a storage of its own (so saving and tied-weight checks see the
model's own sharing), and the loader packs the CPU models it loads."""

import pytest
import torch

from specdec.family.arena import ALIGN, pack_weights
from specdec.family.architectures import build_model, real_size_config


def _tiny(seed=0):
    return build_model(real_size_config("gpt2-small", n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=64),
                       generator=torch.Generator().manual_seed(seed)).eval()


def _end_to_end(params) -> bool:
    """Each parameter starts where the one before it ends, rounded up to a cache line."""
    ptrs = [p.data_ptr() for p in params]
    ends = [p.data_ptr() + p.numel() * p.element_size() for p in params]
    return all(0 <= s - e < ALIGN for e, s in zip(ends, ptrs[1:]))


def test_packing_changes_no_value_and_no_logit():
    a, b = _tiny(), _tiny()
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    before = {k: v.clone() for k, v in b.state_dict().items()}
    with torch.inference_mode():
        want = a(input_ids=ids).logits
        assert pack_weights(b) is b
        got = b(input_ids=ids).logits
    assert all(torch.equal(before[k], v) for k, v in b.state_dict().items())
    assert torch.allclose(want, got, atol=1e-6, rtol=1e-6)


def test_parameters_lie_end_to_end_each_in_a_storage_of_its_own_and_ties_survive(tmp_path):
    m = pack_weights(_tiny())
    assert m.lm_head.weight is m.transformer.wte.weight, "a tied head is still the embedding"
    params = list(m.parameters())
    ptrs = [p.data_ptr() for p in params]
    assert all(p % ALIGN == 0 for p in ptrs) and ptrs == sorted(ptrs), "in registration order, on cache lines"
    assert _end_to_end(params)
    storages = {p.untyped_storage().data_ptr() for p in params}
    assert len(storages) == len(params), "each parameter has a storage of its own"
    m.save_pretrained(tmp_path, safe_serialization=True)  # refuses weights that look shared
    back = type(m).from_pretrained(tmp_path)
    assert all(torch.equal(x, y) for x, y in zip(back.state_dict().values(), m.state_dict().values()))


def test_a_parameter_off_the_cpu_is_refused():
    m = _tiny()
    m.transformer.wpe.weight = torch.nn.Parameter(torch.empty(64, 32, device="meta"))
    with pytest.raises(ValueError, match="meta"):
        pack_weights(m)


def test_the_loader_packs_the_cpu_models_it_loads():
    from specdec.family.loader import load_model
    from specdec.family.manifest import ModelUnavailableError

    try:
        m = load_model("target", dtype=torch.float32)
    except (ModelUnavailableError, FileNotFoundError) as exc:
        pytest.skip(f"embedded weights absent: {exc}")
    assert _end_to_end(list(m.parameters()))  # unpacked, its large matrices each get a mapping of their own
