"""specdec.engine.modes.kernel: the lean forward's C products and attention equal torch's to
float32 rounding, on the shapes and layouts the engine hands them (tails of a block, strided cache
views, holes), refuse what they cannot take, and when the kernel cannot be built the lean forward
runs torch's products and decodes the same tokens."""

import math

import pytest
import torch
import torch.nn.functional as F

from specdec.engine.decode import generate
from specdec.engine.modes import kernel
from specdec.engine.modes.grow import GrowCache
from specdec.engine.modes.lean import LeanGPT2, lean

TOL = dict(rtol=1e-5, atol=1e-4)  # sums of hundreds of products of ~1: float32 rounding reaches ~4e-5


@pytest.fixture(autouse=True)
def _one_thread_no_grad():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with torch.inference_mode():
        yield
    torch.set_num_threads(threads)


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _affine(x, w, b, residual=None, norm=None):
    return kernel.Affine(w, b, norm)(x, residual)


def _affine_t(x, wt, b=None, norm=None):
    return kernel.Affine(wt, b, norm, transposed=True)(x)


@pytest.mark.parametrize("M,K,N", [(1, 384, 1152), (3, 37, 21), (kernel.MAX_ROWS, 48, 64), (2, 16, 5), (13, 37, 130)])
def test_affine_equals_addmm_with_and_without_the_residual(M, K, N):
    """N = 5, 21 and 130 end in a partial panel and a partial vector; M = 13 ends in a partial six-row
    tile, MAX_ROWS fills eight."""
    assert kernel.available(), kernel.why()
    g = _g()
    x, w, b, r = (torch.randn(M, K, generator=g), torch.randn(K, N, generator=g), torch.randn(N, generator=g),
                  torch.randn(M, N, generator=g))
    assert torch.allclose(_affine(x, w, b), torch.addmm(b, x, w), **TOL)
    assert torch.allclose(_affine(x, w, b, r), torch.addmm(b, x, w) + r, **TOL)
    assert not torch.allclose(_affine(x, w, b + 1e-3), torch.addmm(b, x, w), **TOL), "the tolerance must see a bias off by 1e-3"
    norm = (torch.randn(K, generator=g), torch.randn(K, generator=g), 1e-5)
    want = torch.addmm(b, F.layer_norm(x, (K,), *norm), w) + r
    assert torch.allclose(_affine(x, w, b, r, norm=norm), want, **TOL)
    assert not torch.allclose(_affine(x, w, b, r, norm=(norm[0], norm[1], 1e-1)), want, **TOL), "eps is read"


@pytest.mark.parametrize("M,K,N", [(1, 384, 2048), (5, 33, 17)])
def test_affine_t_equals_the_tied_heads_linear(M, K, N):
    g = _g(1)
    x, wt, b = torch.randn(M, K, generator=g), torch.randn(N, K, generator=g), torch.randn(N, generator=g)
    assert torch.allclose(_affine_t(x, wt), F.linear(x, wt), **TOL)
    assert torch.allclose(_affine_t(x, wt, b), F.linear(x, wt, b), **TOL)
    norm = (torch.randn(K, generator=g), torch.randn(K, generator=g), 1e-5)
    assert torch.allclose(_affine_t(x, wt, b, norm=norm), F.linear(F.layer_norm(x, (K,), *norm), wt, b), **TOL)


def _lean_mask(keep, s, n):
    """The lean forward's own attention mask for s fed tokens after n - s cached slots."""
    return LeanGPT2._mask(keep, keep.shape[0], s, n - s, keep.device)


@pytest.mark.parametrize("s, D", [(1, 5), (1, 32), (3, 5), (3, 32), (5, 16)])
def test_attention_equals_sdpa_with_the_lean_mask_on_cache_views_with_holes(s, D):
    """Keys and values as a GrowCache hands them (a view of a larger buffer), queries strided as the
    forward's qkv split leaves them; row 0 keeps every slot, row 1 has holes, one of them a fed
    token's own slot (kept anyway when several tokens are fed); D 5 takes the scalar loop, 16 and 32
    the vector one.  A single query with no kept slot is NaN, never a silent number."""
    g = _g(2)
    B, H, n, cap = 2, 3, 19, 24
    kb, vb = torch.randn(B, H, cap, D, generator=g), torch.randn(B, H, cap, D, generator=g)
    k, v = kb[:, :, :n], vb[:, :, :n]
    q = torch.randn(B, s, 3, H, D, generator=g).permute(2, 0, 3, 1, 4).unbind(0)[0]  # (B, H, s, D), strided like the forward's
    keep = torch.ones(B, n, dtype=torch.uint8)
    keep[1, [1, 4, 5, 9, n - 2]] = 0
    scale = 1 / math.sqrt(D)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=_lean_mask(keep, s, n), scale=scale)
    got = kernel.attend(q, k, v, keep, scale)
    assert got.shape == (B * s, H * D)
    assert torch.allclose(got, want.transpose(1, 2).reshape(B * s, H * D), **TOL)
    free = kernel.attend(q, k, v, None, scale).view(B, s, -1)
    assert torch.allclose(free[0], got.view(B, s, -1)[0], **TOL)
    assert not torch.allclose(free[1], got.view(B, s, -1)[1], **TOL), "the holes must change row 1"
    none = kernel.attend(q, k, v, torch.zeros(B, n, dtype=torch.uint8), scale)
    if s == 1:
        assert torch.isnan(none).all()
    else:  # each query still attends its own slot
        assert torch.allclose(none, F.scaled_dot_product_attention(q, k, v, attn_mask=_lean_mask(
            torch.zeros(B, n, dtype=torch.uint8), s, n), scale=scale).transpose(1, 2).reshape(B * s, H * D), **TOL)


@pytest.mark.parametrize("D", [5, 16])
def test_attention_passes_a_nan_on_and_gives_a_hole_no_weight(D):
    """A NaN key reaches the output (nothing assumed away); a hole whose key is huge and value NaN
    changes nothing, on the vector path as on the plain loop."""
    g = _g(4)
    B, H, n = 1, 2, 21
    q, k, v = torch.randn(B, H, 1, D, generator=g), torch.randn(B, H, n, D, generator=g), torch.randn(B, H, n, D, generator=g)
    keep = torch.ones(B, n, dtype=torch.uint8)
    keep[0, 3] = 0
    base = kernel.attend(q, k, v, keep, 0.5)
    k2, v2 = k.clone(), v.clone()
    k2[0, :, 3], v2[0, :, 3] = 1e4, float("nan")  # a hole is never read
    assert torch.equal(kernel.attend(q, k2, v2, keep, 0.5), base)
    k2[0, 0, 7, 0] = float("nan")
    out = kernel.attend(q, k2, v, keep, 0.5).view(H, D)
    assert torch.isnan(out[0]).all() and not torch.isnan(out[1]).any()


def test_what_the_kernel_cannot_take_is_refused_or_left_to_torch():
    g = _g(3)
    w, b = torch.randn(8, 4, generator=g), torch.randn(4, generator=g)
    with pytest.raises(ValueError, match="at most"):
        _affine(torch.randn(kernel.MAX_ROWS + 1, 8), w, b)
    with pytest.raises(ValueError, match="float32 CPU rows of width 8"):
        _affine(torch.randn(1, 8, dtype=torch.float64), w, b)
    with pytest.raises(ValueError, match="width 8"):
        _affine(torch.randn(1, 7), w, b)
    with pytest.raises(ValueError, match="residual"):
        _affine(torch.randn(2, 8), w, b, torch.randn(1, 4))
    with pytest.raises(ValueError, match=r"norm weight must be .* shape \(8,\), got torch.float32 \(7,\)"):
        _affine(torch.randn(2, 8), w, b, norm=(torch.ones(7), torch.zeros(8), 1e-5))
    with pytest.raises(ValueError, match="weight must be a contiguous"):
        kernel.Affine(w.t().contiguous().t(), b)
    with pytest.raises(ValueError, match="bias must be"):
        kernel.Affine(w, b[:3])
    with pytest.raises(ValueError, match="no residual"):
        kernel.Affine(w.t().contiguous(), transposed=True)(torch.randn(1, 8), torch.randn(1, 4))
    q, kv = torch.randn(1, 2, 2, 4), torch.randn(1, 2, 5, 4)
    assert kernel.attend(q, kv.transpose(2, 3).contiguous().transpose(2, 3), kv, None, 0.5) is None  # keys' rows strided: torch's attention
    assert kernel.attend(q, kv, kv.double(), None, 0.5) is None
    assert kernel.attend(torch.randn(1, 2, 6, 4), kv, kv, None, 0.5) is None  # more queries than slots
    with pytest.raises(ValueError, match="uint8"):
        kernel.attend(torch.randn(1, 2, 1, 4), kv, kv, torch.ones(1, 5, dtype=torch.bool), 0.5)
    assert kernel.uses_kernel()
    with pytest.raises(ValueError, match="weight must be a contiguous float32"):
        kernel.Affine(w.double(), b)
    p = kernel.Affine(w, b)
    w.add_(1.0)  # in place, on an inference tensor (no version counter): packed again at every call
    assert torch.allclose(p(torch.ones(1, 8)), torch.addmm(b, torch.ones(1, 8), w), **TOL)
    with pytest.raises(ValueError, match="panels must be .* at least 512 values"):  # K = 8 rows of one 64-wide panel
        kernel.Affine(w, b, panels=torch.empty(63))
    torch.set_num_threads(2)
    assert not kernel.uses_kernel(), "a single-threaded kernel never replaces torch's threads"
    torch.set_num_threads(1)
    with torch.inference_mode(False), torch.enable_grad():
        assert not kernel.uses_kernel(), "no kernel while autograd records"


def _decode(model, draft, ids, *, rows_cap=None):
    keep = kernel.MAX_ROWS
    if rows_cap is not None:
        kernel.MAX_ROWS = rows_cap
    try:
        return [generate(lean(model), ids, drafter=None if draft is None else lean(draft), k=3, max_new_tokens=24,
                         temperature=0).tokens[i].tolist() for i in range(ids.shape[0])]
    finally:
        kernel.MAX_ROWS = keep


@pytest.mark.parametrize("rows", [1, 3])
def test_lean_decodes_the_same_tokens_on_the_kernel_as_on_torchs_products(tiny_pair, rows):
    """Greedy, plain and speculative (k = 3), one row and a batch: kernel (default) against torch's
    products (no row fits a cap of 0), and the forward's logits to float32 rounding."""
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (rows, 6), generator=_g(4))
    for d in (None, draft):
        assert _decode(target, d, ids) == _decode(target, d, ids, rows_cap=0)
    c1, c2 = GrowCache(16), GrowCache(16)
    on = lean(target)(input_ids=ids, cache=c1).logits
    keep = kernel.MAX_ROWS
    kernel.MAX_ROWS = 0
    try:
        off = lean(target)(input_ids=ids, cache=c2).logits
        nxt_off = lean(target)(input_ids=ids[:, :1], cache=c2, attention_mask=torch.ones(rows, 7)).logits
    finally:
        kernel.MAX_ROWS = keep
    nxt_on = lean(target)(input_ids=ids[:, :1], cache=c1, attention_mask=torch.ones(rows, 7)).logits
    assert torch.allclose(on, off, atol=1e-4, rtol=1e-4) and torch.allclose(nxt_on, nxt_off, atol=1e-4, rtol=1e-4)


def test_without_a_compiler_the_kernel_says_why_and_lean_runs_torchs_products(tiny_pair, monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("SPECDEC_KERNEL_DIR", str(tmp_path))
    monkeypatch.setattr(kernel, "_STATE", {})
    assert not kernel.available() and "no C compiler" in kernel.why()
    assert not kernel.uses_kernel()
    with pytest.raises(RuntimeError, match="kernel is unavailable: no C compiler"):
        _affine(torch.ones(1, 4), torch.ones(4, 2), torch.zeros(2))
    ids = torch.randint(0, 64, (1, 6), generator=_g(5))
    got = _decode(tiny_pair[0], tiny_pair[1], ids)
    monkeypatch.setattr(kernel, "_STATE", {})
    monkeypatch.delenv("CC")
    assert kernel.available(), kernel.why()
    assert got == _decode(tiny_pair[0], tiny_pair[1], ids)


def test_a_compile_error_is_reported_not_loaded(monkeypatch, tmp_path):
    bad = tmp_path / "affine.c"
    bad.write_text("this is not C\n")
    monkeypatch.setattr(kernel, "SOURCE", bad)
    monkeypatch.setattr(kernel, "_STATE", {})
    monkeypatch.setenv("SPECDEC_KERNEL_DIR", str(tmp_path))
    assert not kernel.available() and "failed to compile" in kernel.why()
    assert not list(tmp_path.glob("*.so")), "no half-written library is left"


def test_within_named_a_profile_sees_the_kernels_calls_and_outside_it_none(tiny_pair):
    from torch.profiler import ProfilerActivity, profile

    ids = torch.randint(0, 64, (1, 6), generator=_g(6))

    def names(inside: bool) -> set:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            if inside:
                with kernel.named():
                    _decode(tiny_pair[0], None, ids)
            else:
                _decode(tiny_pair[0], None, ids)
        return {e.key for e in prof.key_averages() if e.key.startswith("specdec::")}

    assert names(True) == {"specdec::affine", "specdec::affine_t", "specdec::attend"}
    assert names(False) == set()


def test_a_weight_changed_in_place_is_packed_again_and_one_never_changed_is_not():
    with torch.inference_mode(False):
        w, b = torch.randn(8, 70, generator=_g(7)), torch.randn(70, generator=_g(8))
    p, x = kernel.Affine(w, b), torch.randn(2, 8, generator=_g(9))
    before = p._version
    assert torch.allclose(p(x), torch.addmm(b, x, w), **TOL) and p._version == before
    with torch.no_grad():
        w[3, 65] += 2.0  # the last panel's tail: a stale pack would miss it
    assert torch.allclose(p(x), torch.addmm(b, x, w), **TOL) and p._version != before


def test_packed_keeps_one_pack_per_model_until_a_tensor_is_replaced():
    with torch.inference_mode(False):
        model = torch.nn.Linear(8, 20)
    w, b = model.weight, model.bias  # (20, 8): a head's layout
    specs = [(w, b, None, True), (w.t().contiguous(), b, (torch.ones(8), torch.zeros(8), 1e-5), False)]
    first = kernel.packed(model, specs)
    assert kernel.packed(model, specs) is first, "the same tensors: nothing packed again"
    x = torch.randn(3, 8, generator=_g(10))
    assert torch.allclose(first[0](x), F.linear(x, w, b), **TOL)
    assert first[0]._panels.data_ptr() + 4 * first[0]._panels.numel() <= first[1]._panels.data_ptr() + 1, "side by side"
    with torch.inference_mode(False):
        model.weight = torch.nn.Parameter(torch.randn(20, 8, generator=_g(11)))
    again = kernel.packed(model, [(model.weight, b, None, True)])
    assert again is not first and torch.allclose(again[0](x), F.linear(x, model.weight, b), **TOL)


def test_the_plain_c_tiles_equal_the_avx512_ones(tmp_path):
    """The kernel built without AVX-512 (the plain-C tiles and attention another CPU gets) gives addmm's
    and torch's attention's values."""
    import ctypes
    import subprocess

    import os
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("-mno-avx512f is an x86-64 flag")
    lib = tmp_path / "plain.so"
    flags = [f for f in kernel.FLAGS if not f.startswith(("-march", "-mprefer"))]
    done = subprocess.run([os.environ.get("CC", "cc"), *flags, "-mno-avx512f", "-o", str(lib), str(kernel.SOURCE)], capture_output=True,
                          text=True, timeout=kernel.COMPILE_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    dll = kernel.declare(ctypes.CDLL(str(lib)))
    M, K, N = 9, 37, 130
    g = _g(12)
    x, w, b, r = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g), torch.randn(N, generator=g), torch.randn(M, N, generator=g)
    panels, y = torch.empty(kernel._panel_floats(K, N)), torch.empty(M, N)
    dll.pack(w.data_ptr(), K, N, panels.data_ptr(), 0)
    assert dll.affine(x.data_ptr(), panels.data_ptr(), b.data_ptr(), r.data_ptr(), y.data_ptr(), M, K, N, None, None, 0.0) == 0
    assert torch.allclose(y, torch.addmm(b, x, w) + r, **TOL)
    assert torch.allclose(y, _affine(x, w, b, r), **TOL)
    B, H, s, L, D = 2, 3, 3, 11, 16  # D a multiple of 16: the vector path where AVX-512 is
    q, k, vv = torch.randn(B, H, s, D, generator=g), torch.randn(B, H, L, D, generator=g), torch.randn(B, H, L, D, generator=g)
    keep, out, scores = torch.ones(B, L, dtype=torch.uint8), torch.empty(B * s, H * D), torch.empty(L)
    keep[1, [2, 9]] = 0
    dll.attend(q.data_ptr(), k.data_ptr(), vv.data_ptr(), keep.data_ptr(), out.data_ptr(), scores.data_ptr(),
               B, H, s, L, D, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), 0.25)
    want = F.scaled_dot_product_attention(q, k, vv, attn_mask=_lean_mask(keep, s, L), scale=0.25)
    assert torch.allclose(out, want.transpose(1, 2).reshape(B * s, H * D), **TOL)


def test_a_write_through_data_is_seen_once_the_model_is_forgotten():
    """``.data`` has a version counter of its own: the pack stays stale (the negative control) until
    `forget`; then both a held product and a new wrap read the new values."""
    with torch.inference_mode(False):
        model = torch.nn.Linear(8, 20)
    x = torch.randn(3, 8, generator=_g(13))
    held = kernel.packed(model, [(model.weight, model.bias, None, True)])[0]
    held(x)
    model.weight.data.mul_(2.0)
    assert not torch.allclose(held(x), F.linear(x, model.weight, model.bias), **TOL), "unseen without forget"
    kernel.forget(model)
    assert torch.allclose(held(x), F.linear(x, model.weight, model.bias), **TOL)
    again = kernel.packed(model, [(model.weight, model.bias, None, True)])[0]
    assert again is not held and torch.allclose(again(x), F.linear(x, model.weight, model.bias), **TOL)
    with pytest.raises(ValueError, match="layer norm needs its weight and its bias"):
        kernel.Affine(model.weight, model.bias, (torch.ones(8), None, 1e-5), transposed=True)


def test_the_kernel_writes_float32_whatever_torchs_default_dtype():
    """Its outputs are float32 buffers even when torch's default dtype is another (else the C code
    would write floats into doubles)."""
    g = _g(6)
    q, k, v = torch.randn(1, 2, 2, 16, generator=g), torch.randn(1, 2, 5, 16, generator=g), torch.randn(1, 2, 5, 16, generator=g)
    x, w, b = torch.randn(3, 8, generator=g), torch.randn(8, 4, generator=g), torch.randn(4, generator=g)
    want_att, want_aff = kernel.attend(q, k, v, None, 0.25), _affine(x, w, b)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got_att, got_aff = kernel.attend(q, k, v, None, 0.25), kernel.Affine(w, b)(x)
    finally:
        torch.set_default_dtype(before)
    assert got_att.dtype == got_aff.dtype == torch.float32
    assert torch.equal(got_att, want_att) and torch.equal(got_aff, want_aff)
