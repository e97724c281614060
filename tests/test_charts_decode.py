"""The Decoding page's data builders and charts: every chart builds a valid Vega-Lite spec,
and the data say what the page claims (shares of the merge, the pool against the block
table, the model's shape)."""
import numpy as np
import pandas as pd
import pytest

import engine
from app.features.decoding import charts as charts_decode, data as decode_data
from engine.model.decode_config import DecodeConfig

H200 = engine.PROFILES["H200"]


@pytest.fixture(scope="module")
def run():
    cfg = DecodeConfig(batch=3, heads=8, kv_heads=2, seq_q=2, seq_k=1001, head_dim=32,
                       dtype="float32", num_splits=8, page_size=16, seed=7)
    return cfg, engine.run_decode(cfg, trace=True)


def test_split_states_carry_the_merge(run):
    cfg, res = run
    states = decode_data.split_states(res, 1, 5, 1)
    assert len(states) == 8 and states["keys"].sum() == cfg.seq_k
    assert states.share.sum() == pytest.approx(1, abs=1e-5)
    assert (states.rescale <= 1).all() and states.rescale.max() == 1
    assert states.m_s.max() == pytest.approx(states.m_final.iloc[0])


def test_pool_cells_invert_the_block_table(run):
    cfg, res = run
    cells = decode_data.pool_cells(cfg, res.block_table, res.bounds)
    assert len(cells) == cfg.num_pages == 3 * 63
    for row in cells.itertuples():
        assert res.block_table[row.sequence, row.logical] == row.page
        assert res.bounds[row.split] <= row.k0 < res.bounds[row.split + 1]
    assert cells.k1.max() == cfg.seq_k


def test_bytes_and_models(run):
    cfg, _ = run
    table = decode_data.bytes_table(cfg, H200)
    assert list(table.kv_heads) == [8, 2, 1]
    assert table.bytes_per_token.iloc[0] == 4 * table.bytes_per_token.iloc[1]
    model = decode_data.splits_model(cfg.with_(seq_k=65536, batch=1), H200)
    m = model[model.series == "model"].set_index("num_splits").ms
    assert m.loc[1] > m.loc[16] and set(model.series) == {"model", "HBM floor"}
    sweep = decode_data.floor_sweep(cfg, H200)
    floor = sweep[sweep.series.str.startswith("HBM floor")].ms.to_numpy()
    assert np.allclose(floor[1:] / floor[:-1], 2)                # linear in seq_k


def test_spread_unsplit_draws_sdpa_across_the_split_counts():
    rows = pd.DataFrame({"series": ["a", "a", "sdpa"], "num_splits": [1, 64, None],
                         "ms": [2.0, 1.0, 1.5]})
    out = decode_data.spread_unsplit(rows)
    assert sorted(out[out.series == "sdpa"].num_splits) == [1, 64]


def test_every_decode_chart_is_valid(run):
    cfg, res = run
    charts = [
        charts_decode.cache_chart(decode_data.split_strip(res), cfg.seq_k, cfg.page_size),
        charts_decode.merge_chart(decode_data.split_states(res, 0, 0, 1)),
        charts_decode.pool_chart(decode_data.pool_cells(cfg, res.block_table, res.bounds),
                                 decode_data.POOL_COLUMNS),
        charts_decode.bytes_chart(decode_data.bytes_table(cfg, H200)),
        charts_decode.floor_chart(decode_data.floor_sweep(cfg, H200)),
        charts_decode.splits_chart(decode_data.splits_model(cfg, H200), ["Model", "x"], 8)]
    specs = [c.to_dict(validate=True) for c in charts]
    merge = specs[1]
    assert merge["params"][0]["name"] == "step" and merge["params"][0]["value"] == 1
    assert len(next(iter(merge["datasets"].values()))) == 8
