"""The NumPy emulation of Flash-Decoding against a float64 reference: split counts from 1 to
many, ragged last split and last page, grouped-query ratios 1, 4 and 8, a few query tokens;
the trace against its closed form and the merge identities; the split rule, the block table,
the byte model and the refusals."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
import seeds
from engine.model import iomodel
from engine.decode import gather_pages, make_decode_inputs, run_decode, scatter_pages
from engine.model.decode_config import (AUTO, MAX_SPLITS, MIN_SPLIT_KEYS, DecodeConfig,
                                        auto_splits, block_table, split_bounds,
                                        splits_without_empty)
from reference import decode64, rel_err

RNG = seeds.rng(1501)
H200 = engine.PROFILES["H200"]
# Relative error of the output against float64, per dtype: float32 arithmetic throughout,
# then the output's own rounding (2^-11 float16, 2^-8 bfloat16).
OUT_TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def seeded(**kw) -> DecodeConfig:
    return DecodeConfig(seed=int(RNG.integers(2**31)), **kw)


def contiguous(cfg, res, k, v):
    """The caches as contiguous (B, kv_heads, seq_k, d) arrays, whatever the layout."""
    if not cfg.paged:
        return k, v
    return gather_pages(cfg, k, res.block_table), gather_pages(cfg, v, res.block_table)


def check_against_reference(cfg, trace=True):
    q, k, v = make_decode_inputs(cfg)
    res = run_decode(cfg, q, k, v, backend="numpy", trace=trace, gpu=H200)
    kc, vc = contiguous(cfg, res, k, v)
    want, want_lse, _ = decode64(q, kc, vc)
    err, lse_err = rel_err(res.output, want), rel_err(res.lse, want_lse)
    assert err < OUT_TOL[cfg.dtype] and lse_err < 1e-6, (cfg, err, lse_err)
    assert res.output.dtype == np.dtype(cfg.dtype) and res.lse.dtype == np.float32
    return res, q, kc, vc


CASES = [
    # (batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype, num_splits, page_size)
    (1, 4, 4, 1, 256, 64, "float32", 1, None),        # the plain kernel, multi-head
    (2, 8, 2, 1, 1000, 64, "float32", 7, None),       # ragged last split (1000 = 6·143 + 142)
    (1, 8, 1, 1, 513, 32, "float16", 2, 16),          # multi-query; ragged last page (513)
    (2, 16, 4, 1, 777, 128, "float16", 13, 32),       # GQA 4, ragged split and page
    (1, 16, 2, 2, 300, 64, "bfloat16", 5, 8),         # GQA 8, two query tokens
    (1, 8, 1, 4, 97, 16, "float32", 97, None),        # one key per split: rows seeing none
    (3, 4, 2, 3, 64, 256, "float32", 3, 64),          # head_dim 256 (key tiles of 32)
    (1, 32, 8, 1, 2048, 128, "float16", 64, 16),      # many splits, the decode targets' heads
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_output_and_lse_match_float64(case):
    b, h, kvh, nq, nk, d, dt, s, page = case
    cfg = seeded(batch=b, heads=h, kv_heads=kvh, seq_q=nq, seq_k=nk, head_dim=d, dtype=dt,
                 num_splits=s, page_size=page)
    res, *_ = check_against_reference(cfg)
    assert res.num_splits == s and res.bounds[-1] == nk and np.all(np.diff(res.bounds) > 0)


@pytest.mark.parametrize("splits", [1, 2, 3, 8, 31, MAX_SPLITS])
def test_every_split_count_gives_the_same_attention(splits):
    cfg = seeded(batch=1, heads=8, kv_heads=2, seq_k=1151, head_dim=32, dtype="float32",
                 num_splits=splits)
    check_against_reference(cfg)


def test_trace_matches_its_closed_form():
    """m_s, l_s, O_s from the float64 scores of each split's visible keys."""
    cfg = seeded(batch=2, heads=8, kv_heads=2, seq_q=3, seq_k=50, head_dim=16,
                 dtype="float32", num_splits=17, page_size=8)   # splits of 3 keys: some unseen
    res, q, k, v = check_against_reference(cfg)
    _, _, S = decode64(q, k, v)
    V = np.repeat(v.astype(np.float64), cfg.group, axis=1)
    tr = res.trace
    for s in range(res.num_splits):
        k0, k1 = res.bounds[s], res.bounds[s + 1]
        Ss = S[..., k0:k1]
        m = Ss.max(-1)
        seen = np.isfinite(m)
        P = np.exp(Ss - np.where(seen, m, 0)[..., None])
        l = P.sum(-1)
        O = np.where(seen[..., None], (P @ V[:, :, k0:k1]) / np.where(seen, l, 1)[..., None], 0)
        assert rel_err(tr.split_max[..., s], m) < 1e-6, (cfg.seed, s)
        assert rel_err(tr.split_sum[..., s], l) < 1e-5, (cfg.seed, s)
        assert rel_err(tr.split_out[..., s, :], O) < 1e-5, (cfg.seed, s)
    assert np.isneginf(tr.split_max).any(), "the config was chosen so that some row sees no key"
    assert (tr.rescale[np.isneginf(tr.split_max)] == 0).all()
    assert rel_err(tr.m_final, S.max(-1)) < 1e-6


@pytest.mark.parametrize("page", [None, 16])
def test_merge_identities_hold_on_the_trace(page):
    cfg = seeded(batch=2, heads=16, kv_heads=4, seq_q=2, seq_k=700, head_dim=64,
                 dtype="float16", num_splits=9, page_size=page)
    res, *_ = check_against_reference(cfg)
    tr = res.trace
    m_final = tr.split_max.max(-1)
    assert np.array_equal(tr.m_final, m_final)
    assert np.allclose(tr.rescale, np.exp(tr.split_max - m_final[..., None]), rtol=1e-6)
    assert (tr.rescale <= 1).all() and (tr.rescale.max(-1) == 1).all()
    l_final = (tr.split_sum * tr.rescale).sum(-1)
    assert rel_err(tr.l_final, l_final) < 1e-6
    merged = np.einsum("...s,...sd->...d", tr.rescale * tr.split_sum, tr.split_out) \
        / tr.l_final[..., None]
    assert rel_err(res.output, merged) < OUT_TOL[cfg.dtype]
    assert rel_err(res.lse, tr.m_final + np.log(tr.l_final)) < 1e-6
    assert tr.split_out.shape == (2, 16, 2, 9, 64)


def test_paged_cache_gives_the_contiguous_result():
    cfg = seeded(batch=3, heads=8, kv_heads=2, seq_k=600, head_dim=64, dtype="float16",
                 num_splits=5)
    flat = run_decode(cfg, backend="numpy", trace=True)
    for page in (8, 64, 256):
        paged = run_decode(cfg.with_(page_size=page), backend="numpy", trace=True)
        assert rel_err(paged.output, flat.output) < 1e-6, page
        assert rel_err(paged.trace.split_sum, flat.trace.split_sum) < 1e-6, page


def test_paged_inputs_scatter_pages_and_pad_with_nan():
    cfg = seeded(batch=2, seq_k=100, head_dim=16, kv_heads=2, heads=4, page_size=16)
    table = block_table(cfg)
    assert table.shape == (2, 7) and sorted(table.ravel()) == list(range(14))
    assert not np.array_equal(table.ravel(), np.arange(14)), "pages must be shuffled"
    assert np.array_equal(block_table(cfg), table), "the table is fixed by the seed"
    _, k, _ = make_decode_inputs(cfg)
    last = k[table[:, -1]]                                 # (2, kv_heads, 16, d)
    assert np.isnan(last[:, :, 100 - 6 * 16:]).all() and np.isfinite(last[:, :, :4]).all()
    flat = make_decode_inputs(cfg.with_(page_size=None))[1]
    assert np.array_equal(gather_pages(cfg, k, table), flat)
    assert np.array_equal(scatter_pages(cfg, flat, table), k, equal_nan=True)  # decode_sweep


def test_auto_split_rule():
    # the decode targets' shape on the H200: 8 blocks per token without splitting
    assert auto_splits(1, 8, 32768, H200.sms) == 32       # 2·132 / 8 = 33: two blocks an SM
    assert auto_splits(8, 8, 32768, H200.sms) == 4        # 264 / 64 = 4.1
    assert auto_splits(2, 8, 32768, H200.sms) == 16
    assert auto_splits(4, 8, 32768, H200.sms) == 8
    assert auto_splits(1, 8, 1000, H200.sms) == 2         # no split under 256 keys (3)
    assert auto_splits(1, 1, 1 << 20, H200.sms) == MAX_SPLITS
    assert auto_splits(64, 8, 100, H200.sms) == 1
    for seq_k in RNG.integers(1, 200_000, 50):
        for b, kvh in ((1, 1), (1, 8), (4, 2)):
            s = auto_splits(b, kvh, int(seq_k), H200.sms)
            assert 1 <= s <= MAX_SPLITS and splits_without_empty(int(seq_k), s)
            assert s * b * kvh <= max(2 * H200.sms, b * kvh)
            assert s == 1 or int(seq_k) // s >= MIN_SPLIT_KEYS - 1
    cfg = DecodeConfig(batch=1, kv_heads=8, heads=32, seq_k=32768)
    assert cfg.num_splits == AUTO and cfg.splits_on(H200.sms) == 32
    assert run_decode(cfg.with_(seq_k=4096, head_dim=16), gpu=engine.PROFILES["T4"]).num_splits \
        == 8                                              # 2·40 / 8 = 10, the profile's SMs


def test_split_bounds_are_ragged_only_at_the_end():
    b = split_bounds(1000, 7)
    assert b.tolist() == [0, 143, 286, 429, 572, 715, 858, 1000]


@pytest.mark.parametrize("kw,words", [
    (dict(heads=32, kv_heads=6), "kv_heads may be 1, 2, 4, 8, 16, 32"),
    (dict(heads=64, kv_heads=1, seq_q=1), "must be at most 32"),
    (dict(seq_q=5), "from 1 to 4"),
    (dict(seq_q=3, seq_k=2), "seq_q must be at most seq_k"),
    (dict(seq_k=10, num_splits=6), "num_splits=5 is the largest"),
    (dict(num_splits=0), "'auto' or a whole number from 1 to 128"),
    (dict(num_splits="many"), "'auto' or a whole number"),
    (dict(num_splits=True), "'auto' or a whole number"),
    (dict(page_size=12), "page_size must be one of 8, 16, 32, 64, 128, 256"),
    (dict(head_dim=100), "head_dim must be one of"),
    (dict(dtype="int8"), "dtype must be one of"),
    (dict(batch=0), "batch must be a whole number"),
])
def test_bad_configs_say_what_is_allowed(kw, words):
    with pytest.raises(engine.ConfigError, match=words):
        DecodeConfig(**kw)


def test_bad_arrays_and_arguments_are_config_errors():
    cfg = DecodeConfig(heads=4, kv_heads=2, seq_k=64, head_dim=16, page_size=16)
    q, k, v = make_decode_inputs(cfg)
    with pytest.raises(engine.ConfigError, match=r"num_pages, kv_heads, page_size"):
        run_decode(cfg, q, k[:, :, :8], v)
    with pytest.raises(engine.ConfigError, match="dtype float16"):
        run_decode(cfg, q.astype(np.float32), k, v)
    with pytest.raises(engine.ConfigError, match="all of q, k_cache and v_cache"):
        run_decode(cfg, q)
    with pytest.raises(engine.ConfigError, match="DecodeConfig"):
        run_decode(engine.AttentionConfig())
    with pytest.raises(engine.ConfigError, match="backend must be one of"):
        run_decode(cfg, backend="tpu")
    with pytest.raises(engine.ConfigError, match="trace must be True or False"):
        run_decode(cfg, trace="yes")


def test_limits_are_checked_before_anything_is_drawn(monkeypatch):
    cfg = DecodeConfig(batch=4, heads=32, kv_heads=8, seq_k=1 << 20, head_dim=128)
    with pytest.raises(engine.LimitError, match="FA_LAB_MAX_QKV_ELEMENTS") as err:
        run_decode(cfg)
    assert "q and the K and V caches" in str(err.value)
    monkeypatch.setenv("FA_LAB_MAX_TRACE_BYTES", "1000")
    with pytest.raises(engine.LimitError, match="the decode trace would take"):
        run_decode(DecodeConfig(seq_k=512, head_dim=64), trace=True)


def test_byte_model():
    cfg = DecodeConfig(batch=2, heads=32, kv_heads=8, seq_k=1000, head_dim=128,
                       page_size=16)
    _, k, v = make_decode_inputs(cfg.with_(page_size=None))
    assert iomodel.decode_kv_bytes(cfg) == k.nbytes + v.nbytes
    assert iomodel.decode_bytes_per_token(cfg) == (k.nbytes + v.nbytes) / 2
    mha = cfg.with_(kv_heads=32)
    assert iomodel.decode_kv_bytes(mha) == 4 * iomodel.decode_kv_bytes(cfg)
    hbm = iomodel.decode_hbm(cfg, 4)
    assert sum(hbm.parts.values()) == hbm.total
    assert hbm.parts["write partials"] == 4 * 2 * 32 * 4 * 130
    assert iomodel.decode_floor_ms(cfg, 4.3e12) == pytest.approx((k.nbytes + v.nbytes) / 4.3e9)
    # the model: more splits help until every SM has a block, then cost partial traffic
    model = [iomodel.decode_model_ms(cfg.with_(batch=1), s, H200) for s in (1, 2, 8, 16, 64)]
    assert model[0] > model[1] > model[2] > model[3] and model[4] > model[3]
    assert iomodel.decode_trace_bytes(cfg, 3) == 4 * 2 * 32 * (3 * 131 + 2)


def test_copy_engine_rule_and_its_shared_memory():
    """The split kernel's K and V rows come by the copy engine on sm_90 and later, for 16-bit
    caches of whole 64-column boxes, contiguous or in pages of whole groups of a warp's keys
    (16 of a 64-key tile at head_dim <= 128, 8 of a 32-key tile at 256) with every split
    starting on such a group, on grids of enough blocks an SM; its rings lose the 16-byte row
    padding and gain the swizzle's 1024-byte alignment and an mbarrier per stage and warp."""
    from engine.model.decode_config import DECODE_STAGES, decode_tma
    cfg = DecodeConfig(heads=32, kv_heads=8, seq_k=4089, head_dim=128, dtype="float16")
    assert decode_tma(cfg, "9.0") and not decode_tma(cfg, "8.9") and not decode_tma(cfg, "7.5")
    assert not decode_tma(cfg.with_(dtype="float32"), "9.0")
    assert not decode_tma(cfg.with_(head_dim=32), "9.0")
    assert decode_tma(cfg.with_(head_dim=256, page_size=8), "9.0", num_splits=1)
    paged = cfg.with_(page_size=32)
    assert decode_tma(paged, "9.0", num_splits=8)             # 8 splits of 512 keys
    assert decode_tma(paged, "9.0", num_splits=1)
    assert not decode_tma(paged, "9.0", num_splits=7)         # 7 splits of 585 keys
    assert not decode_tma(cfg.with_(page_size=8), "9.0", num_splits=1)
    assert decode_tma(cfg, "9.0", num_splits=7)               # contiguous: any split
    # and a grid of at least TMA_MIN_BLOCKS_PER_SM blocks an SM: 8 KV heads × 25 splits on
    # 132 SMs are 200 blocks (1.52 an SM); 24 splits 192 (1.45)
    assert decode_tma(cfg, "9.0", num_splits=25, sms=132)
    assert not decode_tma(cfg, "9.0", num_splits=24, sms=132)
    padded = iomodel.decode_smem_parts(cfg, 128)
    tma = iomodel.decode_smem_parts(cfg, 128, tma=True)
    ring = DECODE_STAGES * 64 * 128 * 2
    assert tma[f"K_j ({DECODE_STAGES} stages)"] == ring
    assert padded[f"K_j ({DECODE_STAGES} stages)"] == ring + DECODE_STAGES * 64 * 16
    assert tma["alignment to 1024 bytes"] == 1024 and tma["mbarriers"] == 8 * DECODE_STAGES * 4
    assert sum(tma.values()) - sum(padded.values()) == 1024 + 8 * DECODE_STAGES * 4 - 2 * (
        DECODE_STAGES * 64 * 16)


def test_whole_tile_copies_where_no_tile_spans_two_pages():
    """One rule says which copy the copy-engine build makes, and the launcher's compile
    options follow it: the whole tile on a contiguous cache or on pages of whole tiles with
    every split starting on a tile, each warp's rows where a tile may span pages; never
    without the copy engine."""
    from engine.gpu.launchers import decode
    from engine.model.decode_config import decode_tile_copies
    cfg = DecodeConfig(heads=32, kv_heads=8, seq_k=4096, head_dim=128, dtype="float16")
    paged = cfg.with_(page_size=32)
    assert decode_tile_copies(cfg) and not decode_tile_copies(paged)
    assert "-DTILE_COPIES=1" in decode.compile_options(cfg, True)
    assert "-DTILE_COPIES=0" in decode.compile_options(paged, True)
    tiles = cfg.with_(seq_k=3837, page_size=64)
    assert decode_tile_copies(tiles, 5)                   # 5 splits of 768 keys
    assert decode_tile_copies(tiles, 4)                   # 4 splits of 960 keys
    assert not decode_tile_copies(tiles, 3)               # 3 splits of 1,279 keys
    assert not decode_tile_copies(tiles.with_(page_size=32), 1)
    assert decode_tile_copies(tiles.with_(head_dim=256, page_size=32), 1)
    assert "-DTILE_COPIES=1" in decode.compile_options(tiles, True, 5)
    assert "-DTILE_COPIES=0" in decode.compile_options(cfg, False)


@st.composite
def configs(draw):
    nk = draw(st.integers(1, 400))
    kvh, group = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 4, 8]))
    splits = max(1, min(MAX_SPLITS, int(draw(st.floats(0, 0.5)) * nk)))
    return DecodeConfig(
        batch=draw(st.integers(1, 3)), heads=kvh * group, kv_heads=kvh,
        seq_q=min(draw(st.integers(1, 4)), nk), seq_k=nk,
        head_dim=draw(st.sampled_from([16, 32, 64])),
        dtype=draw(st.sampled_from(["float32", "float16", "bfloat16"])),
        num_splits=splits if splits_without_empty(nk, splits) else 1,
        page_size=draw(st.sampled_from([None, 8, 16, 64])), seed=draw(st.integers(0, 2**31)))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs())
def test_any_config_matches_float64_and_its_merge(cfg):
    res, *_ = check_against_reference(cfg)
    tr = res.trace
    assert rel_err(tr.l_final, (tr.split_sum * tr.rescale).sum(-1)) < 1e-6, cfg
    assert np.isfinite(res.output.astype(np.float32)).all(), cfg


def test_decode_bench_times_the_auto_count_once():
    """benchmarks.decode_sweep: the auto count (a power of two since the rule of 2026-11-23) is timed as
    the auto line, not again among the swept counts; counts that leave a split empty are
    dropped."""
    from types import SimpleNamespace
    from benchmarks.decode_sweep import decode_lines
    args = SimpleNamespace(sweep_splits=[1, 2, 4, 8, 16, 32, 64, 128], page_sizes=[16, 64],
                           torch=False)
    cfg = DecodeConfig(batch=1, kv_heads=8, heads=32, seq_k=32768)
    lines = decode_lines(cfg, args, H200.sms)
    contiguous = [(n, auto) for label, c, n, auto in lines if c.page_size is None]
    assert contiguous[0] == (32, True) and [n for n, _ in contiguous].count(32) == 1
    assert [n for n, a in contiguous if not a] == [1, 2, 4, 8, 16, 64, 128]
    assert [(c.page_size, n) for _, c, n, _ in lines if c.page_size] == [(16, 32), (64, 32)]
    short = decode_lines(cfg.with_(seq_k=300), args, H200.sms)
    assert all(n == 1 or splits_without_empty(300, n) for _, _, n, _ in short)


@pytest.mark.parametrize("kw", [dict(heads=8, kv_heads=2, seq_q=1, seq_k=300),
                                dict(heads=4, kv_heads=1, seq_q=3, seq_k=100, page_size=16)])
def test_decode_sweeps_float64_check_is_the_tests_reference(kw):
    """benchmarks.decode_sweep validates every line against its own float64 decode step before
    timing it; that step agrees with the tests' reference (tests/reference.py) on GQA and
    several query tokens, so the sweep's check refuses what the tests would."""
    from benchmarks.decode_sweep import decode64 as sweep64
    from engine.decode import gather_pages, make_decode_inputs
    cfg = DecodeConfig(batch=2, head_dim=64, dtype="float32", seed=5, **kw)
    q, k, v = make_decode_inputs(cfg)
    if cfg.paged:
        table = block_table(cfg)
        k, v = gather_pages(cfg, k, table), gather_pages(cfg, v, table)
    want, _, _ = decode64(q, k, v)
    assert rel_err(sweep64(cfg, q, k, v), want) < 1e-12
