"""The Flash-Decoding kernel (kernels/decode/flash_decode.cu through engine.run_decode on CuPy):
against float64 for split counts from 1 to many, ragged last split and last page, GQA ratios
1, 4 and 8, a few query tokens; the trace against the NumPy emulation's; every output written
(poisoned first), the in-kernel merge's counters back at zero after every run so that runs
of one prepare() repeat bit for bit, paged equal to contiguous, the auto split count, PyTorch
SDPA on the same shapes, the timing and the decode sweep (benchmarks.decode_sweep)."""
import json

import numpy as np
import pytest

import engine
from engine.decode import gather_pages, make_decode_inputs, run_decode
from engine.model.decode_config import MAX_SPLITS, DecodeConfig, block_table
from engine.results import DECODE_TRACE_FIELDS
from reference import decode64, rel_err
import seeds

RNG = seeds.rng(1502)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not engine.probe_gpu()[0], reason=engine.probe_gpu()[1])]

# The decode targets' bound for float16 (2e-3 relative to float64); bfloat16 rounds its output 8×
# coarser; float32 keeps the exp2 approximation's error (about 2^-22 per term).
OUT_TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1e-2}
TRACE_TOL = 1e-5


def config(**kw):
    base = dict(batch=2, heads=8, kv_heads=2, seq_q=1, seq_k=1000, head_dim=64,
                dtype="float16", num_splits=4, seed=int(RNG.integers(0, 2**31)))
    return DecodeConfig(**{**base, **kw})


def contiguous(cfg, k, v):
    if not cfg.paged:
        return k, v
    table = block_table(cfg)
    return gather_pages(cfg, k, table), gather_pages(cfg, v, table)


CASES = [
    dict(num_splits=1),                                                  # the plain kernel
    dict(num_splits=7, seq_k=1000),                                      # ragged last split
    dict(num_splits=64, seq_k=4099, page_size=16),                       # ragged last page
    dict(heads=8, kv_heads=8, num_splits=3, head_dim=128),               # GQA ratio 1
    # ratio 4 at the decode targets' shape, as long a cache as the classroom limit on q, K and V takes
    dict(batch=1, heads=32, kv_heads=8, num_splits=33, seq_k=32000, head_dim=128),
    dict(heads=16, kv_heads=2, num_splits=5, page_size=32, dtype="bfloat16"),  # ratio 8
    dict(heads=8, kv_heads=1, seq_q=4, num_splits=100, seq_k=100),       # rows that see no key
    dict(heads=4, kv_heads=2, seq_q=3, num_splits=9, dtype="float32", page_size=8),
    dict(heads=4, kv_heads=4, seq_q=2, num_splits=2, head_dim=256, page_size=256),
    dict(heads=16, kv_heads=1, seq_q=2, num_splits=128, head_dim=16, seq_k=20000),
    # head_dim 256 on a contiguous cache: the copy engine's whole tiles of 32 keys, 4 boxes a row
    dict(heads=8, kv_heads=2, seq_q=2, num_splits=3, head_dim=256, dtype="bfloat16"),
    # pages the copy engine reads on sm_90 (8 splits of 512 keys), ragged and NaN-padded last page
    dict(num_splits=8, seq_k=4089, page_size=32, head_dim=128),
    dict(heads=16, kv_heads=2, num_splits=1, seq_k=1000, page_size=64, dtype="bfloat16"),
    # pages of whole tiles, splits of 768 keys: the copy engine's whole-tile copies from pages,
    # a ragged last split and a NaN-padded last page
    dict(num_splits=5, seq_k=3837, page_size=64, head_dim=128),
    # head_dim 256, 16-bit, 32 rows: the largest block the 16-bit caches make
    dict(heads=32, kv_heads=1, num_splits=3, head_dim=256, dtype="bfloat16"),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_output_matches_float64_and_the_emulation_trace(kw):
    cfg = config(**kw)
    q, k, v = make_decode_inputs(cfg)
    got = run_decode(cfg, q, k, v, backend="cupy", trace=True)
    kc, vc = contiguous(cfg, k, v)
    want, want_lse, _ = decode64(q, kc, vc)
    err = rel_err(got.output, want)
    assert err < OUT_TOL[cfg.dtype], (cfg, err)
    assert rel_err(got.lse, want_lse) < 1e-5, cfg
    assert got.backend == "cupy" and got.num_splits == cfg.num_splits
    emulated = run_decode(cfg, q, k, v, backend="numpy", trace=True)
    for name in DECODE_TRACE_FIELDS:
        gpu_value, cpu_value = getattr(got.trace, name), getattr(emulated.trace, name)
        assert gpu_value.dtype == np.float32 and gpu_value.shape == cpu_value.shape, name
        assert rel_err(gpu_value, cpu_value) < TRACE_TOL, (name, cfg)


@pytest.mark.parametrize("kw", [CASES[1], CASES[4], CASES[10], CASES[11], CASES[12], CASES[14]],
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_copy_engine_build_gives_the_cp_async_builds_bits(kw, monkeypatch):
    """On sm_90 the launcher's build takes K and V by the copy engine (TMA_COPIES) on grids of
    enough blocks an SM, forced here on every grid; it computes the same products in the same
    order as the cp.async build, so every output and partial state agrees bit for bit (ragged
    splits, the last page's NaN padding rows included)."""
    from engine.gpu.decode_backend import device_inputs
    from engine.gpu.launchers import decode as launcher
    from engine.gpu.runtime import live_gpu
    from engine.model import decode_config
    monkeypatch.setattr(decode_config, "TMA_MIN_BLOCKS_PER_SM", 0)
    cfg = config(**kw)
    if not launcher.uses_tma(cfg, live_gpu(), cfg.num_splits):
        pytest.skip("the copy-engine build needs sm_90 or later")
    q, k, v = make_decode_inputs(cfg)
    Q, K, V, T = device_inputs(cfg, q, k, v, block_table(cfg))
    tma = launcher.launch(cfg, Q, K, V, T, cfg.num_splits, trace=True, poison=True)
    monkeypatch.setattr(launcher, "TMA_COPIES", False)
    plain = launcher.launch(cfg, Q, K, V, T, cfg.num_splits, trace=True, poison=True)
    assert tma["info"]["copies"].startswith("the copy engine")
    assert plain["info"]["copies"] == "16-byte cp.async copies"
    for name in ("O", "lse", "O_part", "m_part", "l_part", "m_final", "l_final", "rescale"):
        a, b = tma[name].get(), plain[name].get()
        assert not np.isnan(a.astype(np.float32)).any(), name
        assert a.tobytes() == b.tobytes(), name


def test_every_output_is_written_and_padding_is_never_read():
    """Outputs poisoned with NaN first; the paged cache's padding rows are NaN too."""
    from engine.gpu.decode_backend import device_inputs
    from engine.gpu.launchers import decode as launcher
    cfg = config(seq_k=777, page_size=64, num_splits=13, heads=16, kv_heads=4, seq_q=2)
    q, k, v = make_decode_inputs(cfg)
    assert np.isnan(k.astype(np.float32)).any()
    Q, K, V, T = device_inputs(cfg, q, k, v, block_table(cfg))
    out = launcher.launch(cfg, Q, K, V, T, 13, trace=True, poison=True)
    for name, arr in out.items():
        if name != "info":
            assert not np.isnan(arr.get().astype(np.float32)).any(), name


# One split, a ragged last split, many splits (64 and MAX_SPLITS, ragged), GQA ratios 1, 4 and
# 8, paged and not, one and two query tokens, several sequences.
REPEAT_CASES = [
    dict(num_splits=1),                                                  # ratio 4
    dict(num_splits=7, seq_k=1000, page_size=16),                        # ragged last split
    dict(heads=8, kv_heads=8, num_splits=64, seq_k=4099, batch=3),       # ratio 1, ragged
    dict(heads=16, kv_heads=2, num_splits=MAX_SPLITS, seq_k=4090, page_size=32, seq_q=2),
    dict(batch=1, heads=32, kv_heads=8, num_splits=MAX_SPLITS, seq_k=32000, head_dim=128),
    dict(heads=8, kv_heads=1, num_splits=64, seq_k=2100, page_size=64, dtype="bfloat16"),
]


@pytest.mark.parametrize("kw", REPEAT_CASES,
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_repeated_runs_merge_every_time_bit_for_bit_and_leave_the_counters_at_zero(kw):
    """The last block of each (sequence, KV head) merges and resets its counter: every run of
    one prepare() (outputs poisoned with NaN again before each) writes the same O, lse and
    trace, bit for bit, and the counters are 0 before and after each. A counter left over
    would make no block (or the wrong one) merge, leaving NaN or a partial sum."""
    import cupy
    from engine.gpu.decode_backend import device_inputs
    from engine.gpu.launchers import decode as launcher
    cfg = config(**kw)
    q, k, v = make_decode_inputs(cfg)
    Q, K, V, T = device_inputs(cfg, q, k, v, block_table(cfg))
    run, out = launcher.prepare(cfg, Q, K, V, T, cfg.num_splits, trace=True, poison=True)
    merged = ("O", "lse", "m_final", "l_final", "rescale")
    counters = out["split_count"]
    assert counters.shape == (cfg.batch, cfg.kv_heads) and counters.dtype == np.int32
    assert not counters.get().any(), "the counters start at zero, never poisoned"
    first = None
    for rep in range(4):
        for name in merged:
            out[name].view(cupy.uint8).fill(0xFF)
        run()
        got = {name: out[name].get() for name in merged}
        assert not counters.get().any(), (cfg, rep, counters.get())
        if first is None:
            first = got
            for name, arr in got.items():
                assert not np.isnan(arr.astype(np.float32)).any(), (name, cfg)
            kc, vc = contiguous(cfg, k, v)
            want, want_lse, _ = decode64(q, kc, vc)
            assert rel_err(got["O"], want) < OUT_TOL[cfg.dtype], (cfg, rel_err(got["O"], want))
            assert rel_err(got["lse"], want_lse) < 1e-5, cfg
        else:
            for name in merged:
                assert np.array_equal(got[name], first[name]), (name, rep, cfg)


def test_paged_reads_give_the_contiguous_result_exactly():
    cfg = config(seq_k=3001, num_splits=11, heads=32, kv_heads=8, head_dim=128)
    flat = run_decode(cfg, backend="cupy", trace=True)
    for page in (16, 128):
        paged = run_decode(cfg.with_(page_size=page), backend="cupy", trace=True)
        assert np.array_equal(paged.output, flat.output), page
        assert np.array_equal(paged.trace.split_out, flat.trace.split_out), page


def test_auto_split_count_follows_the_live_gpu():
    from engine.gpu.runtime import live_gpu
    cfg = config(num_splits="auto", seq_k=32000, heads=32, kv_heads=8, head_dim=128, batch=1)
    got = run_decode(cfg, backend="cupy")
    assert got.num_splits == cfg.splits_on(live_gpu().sms) > 1
    assert got.info["num_splits"] == got.num_splits and got.info["registers_per_thread"] > 0


def test_pytorch_sdpa_computes_the_same_step():
    from engine.gpu.torch_reference import TorchUnavailableError, _to_torch, torch_module
    try:
        torch = torch_module()
    except TorchUnavailableError as exc:
        pytest.skip(str(exc))
    for kw in (dict(seq_q=1), dict(seq_q=3, heads=16, kv_heads=4)):
        cfg = config(**kw)
        q, k, v = make_decode_inputs(cfg)
        ours = run_decode(cfg, q, k, v, backend="cupy").output
        tq, tk, tv = (_to_torch(torch, x) for x in (q, k, v))
        keys = torch.arange(cfg.seq_k, device=tq.device)
        mask = keys[None, :] <= (cfg.seq_k - cfg.seq_q + torch.arange(cfg.seq_q,
                                                                      device=tq.device))[:, None]
        ref = torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, attn_mask=mask, scale=cfg.softmax_scale, enable_gqa=True)
        ref = ref.float().cpu().numpy()
        assert rel_err(ours, ref) < 4e-3, kw


def test_splitting_a_long_cache_is_faster_than_one_block_per_head_group():
    """Not a benchmark: with 8 KV heads and one sequence, num_splits=1 runs 8 thread blocks
    on the whole GPU, so any sound split kernel beats it clearly."""
    from engine.gpu.decode_bench import decode_record, time_flash_decode
    cfg = config(batch=1, heads=32, kv_heads=8, seq_k=32768, head_dim=128, num_splits="auto")
    inputs = make_decode_inputs(cfg)
    from engine.gpu.runtime import live_gpu
    auto = cfg.splits_on(live_gpu().sms)
    split = decode_record(cfg, "flash_decode", auto, time_flash_decode(cfg, auto, inputs, 30, 2),
                          True)
    plain = decode_record(cfg, "flash_decode", 1, time_flash_decode(cfg, 1, inputs, 30, 2), False)
    assert split["reps"] >= 20 and 0 < split["floor_fraction"] <= 1.05
    assert plain["median_ms"] > 1.5 * split["median_ms"], (plain, split)


def test_decode_bench_writes_a_recorded_file(tmp_path):
    from benchmarks.decode_sweep import main
    out = tmp_path / "decode_test.json"
    rc = main(["--batch", "1", "--seq-k", "4096", "--sweep-splits", "1,4",
               "--page-sizes", "16", "--reps", "20", "--warmup", "1", "--budget", "0.2",
               "--out", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["kind"] == "decode" and data["device"]["kind"] == "gpu"
    lines = {(r["kernel"], r["num_splits"], r["page_size"], r["auto_splits"])
             for r in data["results"]}
    assert ("flash_decode", 1, None, False) in lines and ("flash_decode", 4, None, False) in lines
    assert any(k == "flash_decode" and p == 16 and a for k, _, p, a in lines)
    assert all(0 < r["floor_fraction"] <= 1.05 for r in data["results"]), data["results"]
    # every recorded line passed its float64 check first
    assert all(r["validated"]["rel_err"] <= r["validated"]["limit"] for r in data["results"])
    assert ("torch_sdpa" in {r["kernel"] for r in data["results"]}
            or any(s["kernel"] == "torch_sdpa" for s in data["skipped"]))
    from engine import recorded
    found = recorded.load_decode_benchmarks(tmp_path)
    assert found and found[0]["file"] == "decode_test.json"
