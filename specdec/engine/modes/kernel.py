"""The lean forward's matrix products at a few rows on a CPU: a C kernel the project compiles itself.

Why.  A decoding step at batch 1 multiplies one row by every weight matrix: each weight is read once
for two flops, so the step's speed is how fast the weights stream from memory; a verification step,
or a batch, multiplies a few dozen rows, and then how many multiply-adds each loaded weight feeds
matters too.  PyTorch's CPU build hands such products to its BLAS, which streams a row-major weight
well below what this CPU's memory delivers and re-reads it for every few rows.  `affine.c` reads each
weight from a copy of it laid out in panels of 64 columns (packed once, the layout a BLAS packs into
per call): a panel streams as one contiguous stretch, its sums for six rows at a time stay in vector
registers, and the next rows re-read it from cache.  The fed tokens' attention (one query per row in
a decoding step, k + 1 in a verification) runs there too: at so few queries over a masked cache,
torch's attention spends most of its time outside the arithmetic.  What it gains is measured,
paired, by chapter 10's time breakdown (`specdec.measure.step_split.forward_gain`).  It computes the
same sums in another order: results equal torch's to float32 rounding (tested, with the lean
forward's logits and tokens).

The panels cost a second copy of every weight the kernel multiplies (`packed` keeps one per model,
in memory advised for huge pages, while the model lives).  They follow the weight: a product whose
weight was changed in place (its version counter moved) packs it again before multiplying; a
parameter replaced by another tensor is seen when the model is wrapped again (`packed` compares the
tensors).  A weight created in inference mode has no version counter, so it is packed again at every
call.  Writes through ``param.data`` (a tensor with a counter of its own) are not seen: after them,
`forget` the model.

Built on first use with the machine's C compiler (``$CC``, else ``cc``) for this CPU
(``-march=native``: AVX-512 where the CPU has it, plain C otherwise) into a cache folder
(``$SPECDEC_KERNEL_DIR``, else ``~/.cache/specdec``) under a name hashing the source, the flags, the
compiler and the CPU's flags, so a machine never loads another's build; written to a temporary file
and renamed, so concurrent first uses are safe.  The compile has a timeout.  Where it cannot be built
(no compiler, an error) `available()` is False and `why()` says why: the lean forward then uses
torch's products (`uses_kernel`), the same law.

The kernel is single-threaded, so it is used only when torch runs one thread (`uses_kernel`):
with more, torch's BLAS divides a product between threads.  The reassociation flags let the compiler
vectorise the attention's and the layer norm's sums (another summation order; no NaN or infinity is
assumed away).

Example: Affine(w, b)(x) equals torch.addmm(b, x, w) to float32 rounding for x (M, K) with M <= MAX_ROWS.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import mmap
import os
import platform
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path

import numpy as np
import torch

__all__ = ["MAX_ROWS", "Affine", "attend", "available", "declare", "forget", "named", "packed", "uses_kernel", "why"]

MAX_ROWS = 48  # past a few dozen rows a product is arithmetic-bound, where the BLAS's blocking wins
WIDTH = 64     # a panel's columns (affine.c)
HUGE = 2 << 20  # a transparent huge page on x86-64
SOURCE = Path(__file__).with_name("affine.c")
FLAGS = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fno-math-errno", "-fassociative-math",
         "-fno-signed-zeros", "-fno-trapping-math", "-shared", "-fPIC")
COMPILE_TIMEOUT_S = 120
_LOCK = threading.Lock()
_STATE: dict = {}  # "lib": the loaded library, or "why": the reason there is none
_NAMED = [False]  # whether kernel calls are recorded as profiler operators (`named`)


def _cpu_flags() -> str:
    try:
        return next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    except OSError:
        return platform.processor()


def _build() -> ctypes.CDLL:
    cc = os.environ.get("CC", "cc")
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"no C compiler ({cc}): {exc}") from exc
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *FLAGS, cc, version, platform.machine(), _cpu_flags()])
                         .encode()).hexdigest()[:16]
    folder = Path(os.environ.get("SPECDEC_KERNEL_DIR") or Path.home() / ".cache" / "specdec")
    lib = folder / f"affine-{key}.so"
    if not lib.exists():
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
        os.close(fd)
        try:
            done = subprocess.run([cc, *FLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True,
                                  timeout=COMPILE_TIMEOUT_S)
            if done.returncode:
                raise RuntimeError(f"{cc} failed to compile {SOURCE.name}: {done.stderr.strip()[-500:]}")
            os.replace(tmp, lib)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"{cc} took over {COMPILE_TIMEOUT_S} s to compile {SOURCE.name}") from exc
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return declare(ctypes.CDLL(str(lib)))


def declare(dll: ctypes.CDLL) -> ctypes.CDLL:
    """``dll`` (a build of `affine.c`) with its functions' C signatures set; returned for chaining."""
    p, n = ctypes.c_void_p, ctypes.c_long
    f = ctypes.c_float
    dll.affine.argtypes, dll.affine.restype = [p, p, p, p, p, n, n, n, p, p, f], ctypes.c_int
    dll.pack.argtypes, dll.pack.restype = [p, n, n, p, ctypes.c_int], None
    dll.attend.argtypes, dll.attend.restype = [p, p, p, p, p, p, n, n, n, n, n, n, n, n, n, n, f], None
    return dll


def _lib():
    if not _STATE:
        with _LOCK:
            if not _STATE:
                try:
                    _STATE["lib"] = _build()
                except (RuntimeError, OSError) as exc:
                    _STATE["why"] = str(exc)
    return _STATE.get("lib")


def _dll() -> ctypes.CDLL:
    """The loaded kernel, or a RuntimeError saying why there is none."""
    if (lib := _lib()) is None:
        raise RuntimeError(f"the C kernel is unavailable: {_STATE['why']}")
    return lib


def available() -> bool:
    """Whether the kernel is built and loaded (building it on first call)."""
    return _lib() is not None


def why() -> str | None:
    """Why the kernel is unavailable, or None when it is available."""
    return None if available() else _STATE["why"]


@contextlib.contextmanager
def named():
    """Within it, every kernel call is recorded by `torch.profiler` as an operator of its own:
    "specdec::affine" (a product), "specdec::affine_t" (the head), "specdec::attend" (attention).
    A profiler sees only torch's operators, so this is how a profiled step sees the kernel's time;
    outside it a call pays one flag test."""
    before, _NAMED[0] = _NAMED[0], True
    try:
        yield
    finally:
        _NAMED[0] = before


def _recorded(name: str, fn, *args):
    if not _NAMED[0]:
        return fn(*args)
    with torch.profiler.record_function(name):
        return fn(*args)


def uses_kernel() -> bool:
    """Whether the lean forward may run its products on the kernel now: it is available, torch runs one
    thread and no gradient is being recorded.  Which weights it can take is `Affine`'s to check."""
    return torch.get_num_threads() == 1 and not torch.is_grad_enabled() and available()


def _rows(x: torch.Tensor, k: int) -> torch.Tensor:
    if x.dim() != 2 or x.shape[1] != k or x.dtype != torch.float32 or x.device.type != "cpu":
        raise ValueError(f"the kernel multiplies float32 CPU rows of width {k}, got {x.dtype} {tuple(x.shape)} "
                         f"on {x.device}")
    if x.shape[0] > MAX_ROWS:
        raise ValueError(f"the kernel takes at most {MAX_ROWS} rows, got {x.shape[0]}")
    return x.contiguous()


def _panel_floats(K: int, N: int) -> int:
    return -(-N // WIDTH) * K * WIDTH


def _huge_floats(n: int) -> torch.Tensor:
    """n float32 zeros in one anonymous mapping advised for transparent huge pages (2 MiB pages where
    the OS grants them), starting on a huge page: panels streamed from it pay no TLB miss every 4 KiB."""
    area = mmap.mmap(-1, 4 * n + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        area.madvise(mmap.MADV_HUGEPAGE)
    raw = np.frombuffer(area, dtype=np.uint8)
    start = -raw.ctypes.data % HUGE
    return torch.from_numpy(raw[start:start + 4 * n]).view(torch.float32)


class Affine:
    """One weight's product on the kernel, checked once: ``Affine(w, b, norm)(x, residual)`` is
    b + n(x) @ w (+ residual) for w (K, N) (a Conv1D weight); with ``transposed`` it is n(x) @ w.T (+ b)
    for w (N, K) (a tied head's embedding), without a residual.  n is the identity, or with ``norm`` =
    (gamma (K,), beta (K,), eps) torch's layer_norm of each row.  x (M, K) with M <= MAX_ROWS; a new
    (M, N) tensor.  Every tensor must be a contiguous float32 CPU tensor of the right shape (else a
    ValueError here); they are held, so the memory the kernel reads stays valid even if a model's
    parameters are later replaced (the product then keeps the values it was built on).  The weight is
    packed into ``panels`` (a float32 tensor of at least the panels' size; a new one when None) and
    packed again when it changed in place (module docstring)."""

    __slots__ = ("K", "N", "transposed", "_held", "_args", "_panels", "_version")

    def __init__(self, w: torch.Tensor, b: torch.Tensor | None = None, norm: tuple | None = None, *,
                 transposed: bool = False, panels: torch.Tensor | None = None):
        if w.dim() != 2:
            raise ValueError(f"a weight is a matrix, got shape {tuple(w.shape)}")
        (self.N, self.K), self.transposed = (w.shape if transposed else w.shape[::-1]), transposed
        g, beta, eps = norm if norm is not None else (None, None, 0.0)
        if norm is not None and (g is None or beta is None):
            raise ValueError("the kernel's layer norm needs its weight and its bias")
        parts = {"weight": (w, tuple(w.shape)), "bias": (b, (self.N,)), "norm weight": (g, (self.K,)),
                 "norm bias": (beta, (self.K,))}
        if b is None and not transposed:
            raise ValueError("a Conv1D product needs its bias")
        for name, (t, shape) in parts.items():
            if t is not None and (tuple(t.shape) != shape or t.dtype != torch.float32 or t.device.type != "cpu"
                                  or not t.is_contiguous()):
                raise ValueError(f"the kernel's {name} must be a contiguous float32 CPU tensor of shape {shape}, "
                                 f"got {t.dtype} {tuple(t.shape)} on {t.device}")
        need = _panel_floats(self.K, self.N)
        if panels is None:
            panels = torch.empty(need, dtype=torch.float32)
        elif panels.dtype != torch.float32 or not panels.is_contiguous() or panels.numel() < need:
            raise ValueError(f"the panels must be a contiguous float32 tensor of at least {need} values, "
                             f"got {panels.dtype} {tuple(panels.shape)}")
        self._held = tuple(None if t is None else t.detach() for t, _ in parts.values())
        self._panels = panels
        self._args = (panels.data_ptr(),) + tuple(None if t is None else t.data_ptr() for t in self._held[1:]) + (float(eps),)
        self._version = None
        self._pack()

    def _pack(self):
        w = self._held[0]
        _dll().pack(w.data_ptr(), self.K, self.N, self._args[0], int(self.transposed))
        self._version = None if w.is_inference() else w._version

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        return _recorded("specdec::affine_t" if self.transposed else "specdec::affine", self._run, x, residual)

    def _run(self, x: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
        x = _rows(x, self.K)
        M = x.shape[0]
        if self._version is None or self._held[0]._version != self._version:
            self._pack()
        if self.transposed and residual is not None:
            raise ValueError("the head's product takes no residual")
        if residual is not None and (residual.shape != (M, self.N) or residual.dtype != torch.float32
                                     or residual.device.type != "cpu"):
            raise ValueError(f"the residual must be float32 ({M}, {self.N}) on the CPU, got {residual.dtype} "
                             f"{tuple(residual.shape)} on {residual.device}")
        r = None if residual is None else residual.contiguous()
        y = torch.empty(M, self.N, dtype=torch.float32)
        p, b, g, beta, eps = self._args
        if _dll().affine(x.data_ptr(), p, b, None if r is None else r.data_ptr(), y.data_ptr(), M, self.K, self.N,
                         g, beta, eps):
            raise MemoryError("the kernel could not allocate its layer-normed rows")
        return y


_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # owner -> (tensors' identity, products)


def packed(owner, specs: list[tuple]) -> list[Affine]:
    """`Affine` products for ``specs`` [(w, b, norm, transposed), ...], their panels side by side in one
    huge-page mapping, kept with ``owner`` (a model: weakly referenced) so that wrapping the same model
    again packs nothing; packed anew when any tensor of ``specs`` is another tensor than last time."""
    key = tuple((t.data_ptr(), tuple(t.shape)) if isinstance(t, torch.Tensor) else t
                for w, b, norm, tr in specs for t in (w, b, *(norm or (None,) * 3), tr))
    hit = _PACKED.get(owner)
    if hit is not None and hit[0] == key:
        return hit[1]
    sizes = [_panel_floats(*((w.shape[1], w.shape[0]) if tr else w.shape)) for w, _, _, tr in specs]
    area, at, products = _huge_floats(sum(sizes)), 0, []
    for (w, b, norm, tr), n in zip(specs, sizes):
        products.append(Affine(w, b, norm, transposed=tr, panels=area[at:at + n]))
        at += n
    _PACKED[owner] = (key, products)
    return products


def forget(owner) -> None:
    """Drop ``owner``'s packed products (`packed`) and mark them stale, so that the next wrap packs its
    weights anew and a product still held packs again before multiplying: what to call after writing
    weights through ``param.data``, which their version counters do not see."""
    _, products = _PACKED.pop(owner, (None, ()))
    for p in products:
        p._version = None


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None, scale: float):
    """`_attend` (below), recorded as "specdec::attend" within `named`."""
    return _recorded("specdec::attend", _attend, q, k, v, keep, scale)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None, scale: float):
    """Scaled dot-product attention of the s fed tokens' queries over the n slots of the cache, the fed
    tokens' own the last s, with the lean forward's mask (`specdec.engine.modes.lean`): query i attends
    slot j up to its own when ``keep`` marks j (None: every slot), and, with s > 1, always its own slot.
    q (B, H, s, D), k and v (B, H, n, D): float32 CPU with rows of D contiguous (q as the forward's
    qkv split leaves it, k and v a `GrowCache` view or contiguous); keep (B, n) uint8.  A new
    (B * s, H * D) tensor, the heads side by side as the output projection reads them.  A query with
    nothing to attend is NaN (torch's attention gives zeros; the engine never asks it).  None when the
    tensors' layout does not fit the kernel (the caller then runs torch's attention)."""
    B, H, s, D = q.shape
    n = k.shape[2]
    if (q.stride(3) != 1 or k.shape != (B, H, n, D) or v.shape != k.shape or s > n
            or k.stride() != v.stride() or k.stride(3) != 1 or k.stride(2) != D
            or any(t.dtype != torch.float32 or t.device.type != "cpu" for t in (q, k, v))):
        return None
    if keep is not None and (keep.shape != (B, n) or keep.dtype != torch.uint8 or not keep.is_contiguous()):
        raise ValueError(f"keep must be a contiguous uint8 ({B}, {n}) mask, got {keep.dtype} {tuple(keep.shape)}")
    out, scores = torch.empty(B * s, H * D, dtype=torch.float32), torch.empty(n, dtype=torch.float32)
    _dll().attend(q.data_ptr(), k.data_ptr(), v.data_ptr(), None if keep is None else keep.data_ptr(),
                  out.data_ptr(), scores.data_ptr(), B, H, s, n, D, q.stride(0), q.stride(1), q.stride(2),
                  k.stride(0), k.stride(1), scale)
    return out
