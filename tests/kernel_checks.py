"""Checks shared by the tensor-core kernels' GPU tests: a kernel's raw outputs (NumPy copies of
the launcher's dict) against float64 and the NumPy backend, with docs/DESIGN.md's exact rules."""
import numpy as np

import engine
from reference import attention64, rel_err, trace64

from engine.results import TRACE_FIELDS as TRACE_NAMES
# Output tolerance by dtype: float16 keeps 11 significant bits, bfloat16 8, and the kernels
# round P to that dtype before P·V.
OUT_TOL = {"float16": 2e-3, "bfloat16": 8e-3}


def to_gpu(cfg, x):
    """(B, H, N, d) NumPy -> (B·H, N, d) CuPy, the launchers' operand layout."""
    import cupy
    return cupy.asarray(x.reshape(cfg.bh, -1, cfg.head_dim))


def as_bhnt(cfg, arr):
    return arr.reshape(cfg.batch, cfg.heads, cfg.seq_q, -1)


def check_output(cfg, q, k, v, got):
    """Untraced build: O (cfg.dtype) and lse (float32) fully written and close to float64."""
    assert set(got) == {"O", "lse"}
    assert got["O"].dtype == np.dtype(cfg.dtype) and got["lse"].dtype == np.float32
    assert not np.isnan(got["O"]).any() and not np.isnan(got["lse"]).any(), "unwritten output"
    check_float64(cfg, q, k, v, got)


def check_float64(cfg, q, k, v, got):
    """O within OUT_TOL and lse within 1e-4 (relative) of float64 attention."""
    O64, lse64 = attention64(q, k, v, cfg.softmax_scale, cfg.causal)
    assert rel_err(got["O"].reshape(O64.shape), O64) <= OUT_TOL[cfg.dtype], cfg
    assert rel_err(got["lse"].reshape(lse64.shape), lse64) <= 1e-4, cfg


def check_trace(cfg, q, k, v, got, plain):
    """Traced build `got` against the untraced `plain`, the NumPy backend and float64."""
    # Tracing only adds writes: the traced build computes the same output.
    assert np.abs(got["O"].astype(np.float32) - plain["O"].astype(np.float32)).max() <= \
        OUT_TOL[cfg.dtype] / 2
    assert np.abs(got["lse"] - plain["lse"]).max() <= 1e-5

    check_trace_values(cfg, q, k, v, got)


TRACE_RTOL = 1e-4    # float32 values the kernels compute in float32: only the order of sums differs


def assert_trace_close(got, want, name, cfg):
    """Element by element: |got - want| <= rtol·|want| + 1e-5·max(1, max|want|), with the
    infinities (hidden tiles) in the same places."""
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got)) and np.array_equal(got[~fin], want[~fin]), \
        (name, "infinities differ", cfg)
    atol = 1e-5 * max(1.0, float(np.abs(want[fin]).max(initial=0)))
    bad = np.abs(got[fin] - want[fin]) > TRACE_RTOL * np.abs(want[fin]) + atol
    assert not bad.any(), (f"{name}: {int(bad.sum())} of {bad.size} elements off; worst "
                           f"{np.abs(got[fin] - want[fin]).max():.3g}", cfg)


def check_trace_values(cfg, q, k, v, got):
    """A kernel's four trace arrays (B·H, seq_q, Tc) against the NumPy emulation and the
    closed-form float64 trace, element by element, and the exact parts of the semantics."""
    ref = engine.run(cfg, q, k, v, backend="numpy", algorithm="flash", trace=True)
    want64 = trace64(q, k, cfg.softmax_scale, cfg.causal, cfg.block_k)
    for name in TRACE_NAMES:
        arr = got[name]
        assert arr.dtype == np.float32 and arr.shape == (cfg.bh, cfg.seq_q, cfg.Tc)
        assert not np.isnan(arr).any(), f"unwritten {name}"
        arr = as_bhnt(cfg, arr)
        assert_trace_close(arr, getattr(ref.trace, name), name, cfg)
        assert_trace_close(arr, want64[name], name, cfg)

    # Exact parts of the semantics.
    rm, rs, rc, tm = (as_bhnt(cfg, got[n]) for n in TRACE_NAMES)
    assert (rc[..., 0] == 0).all(), "rescale is 0 at j = 0 (key 0 is visible to every row)"
    same = rm[..., 1:] == rm[..., :-1]
    assert (rc[..., 1:][same] == 1).all(), "rescale is exactly 1 when the max did not move"
    skipped = ~ref.trace.processed                                  # (Tr, Tc)
    rows_skipped = np.repeat(skipped, cfg.block_q, axis=0)[:cfg.seq_q]   # (Nq, Tc)
    assert (tm[..., rows_skipped] == -np.inf).all() and (rc[..., rows_skipped] == 1).all()
    for j in range(1, cfg.Tc):
        carry = rows_skipped[:, j]
        assert np.array_equal(rm[..., carry, j], rm[..., carry, j - 1])
        assert np.array_equal(rs[..., carry, j], rs[..., carry, j - 1])


def check_schedule(sm_id, start_ns, end_ns, n_blocks: int):
    """Per-block records of a traced launch: one per block, every one written (the poison is
    all bits set), on a real SM, starting before it ends, the launch well under a second."""
    import cupy
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    assert sm_id.shape == start_ns.shape == end_ns.shape == (n_blocks,)
    assert ((sm_id >= 0) & (sm_id < sms)).all()
    unwritten = np.iinfo(np.uint64).max
    assert (start_ns != unwritten).all() and (end_ns != unwritten).all(), "unwritten times"
    assert (start_ns > 0).all() and (end_ns >= start_ns).all()
    assert 0 < int(end_ns.max()) - int(start_ns.min()) < 10**9, "one small launch spans < 1 s"


def check_stream_k(cfg, q, k, v, run, emulated, launcher, monkeypatch) -> None:
    """A stream-K launch (run(): the NumPy outputs of one launch of cfg with its launcher's
    stream-K on): against float64; against `emulated`, the NumPy emulation of the same schedule
    (engine.cpu.stream_k.flash); relaunched twice bit for bit (the ticket counters are back at
    0 and the merge order is fixed); and, with launcher.STREAM_K off, against whole items
    within rounding."""
    got = run()
    check_output(cfg, q, k, v, got)
    assert rel_err(got["O"].reshape(emulated.output.shape), emulated.output) <= OUT_TOL[cfg.dtype]
    assert np.abs(got["lse"].reshape(emulated.lse.shape) - emulated.lse).max() <= 1e-3
    for _ in range(2):
        again = run()
        assert np.array_equal(got["O"], again["O"]) and np.array_equal(got["lse"], again["lse"])
    monkeypatch.setattr(launcher, "STREAM_K", 0)
    assert not launcher.kernel_facts(cfg, trace=False)["stream_k"]
    whole = run()
    assert rel_err(got["O"], whole["O"]) <= OUT_TOL[cfg.dtype]
    assert np.abs(got["lse"] - whole["lse"]).max() <= 1e-4
