"""The Downloads page (app/features/downloads/) through AppTest: its files follow the session
(the trace upload: tests/test_upload.py)."""
from __future__ import annotations

from apptest_helpers import assert_clean, open_page


def test_downloads_follow_the_session():
    at = open_page("downloads")
    assert_clean(at)
    labels = [b.label for b in at.get("download_button")]
    assert "Trace (NPZ)" in labels and "Trace (CSV)" in labels
    assert not any("Timings" in x for x in labels)
    assert any("bench_fixture.json" in x for x in labels)
    at.switch_page("features/timings/page.py").run()
    at.switch_page("features/downloads/page.py").run()
    assert_clean(at)
    labels = [b.label for b in at.get("download_button")]
    assert "Timings (JSON)" in labels and "Timings (CSV)" in labels


# ---- an uploaded trace, replayed on SRAM tiling and Online softmax ------------------------
import numpy as np  # noqa: E402

import engine  # noqa: E402
from app.features.downloads import replay  # noqa: E402
from apptest_helpers import texts  # noqa: E402
from engine import trace_io  # noqa: E402
import seeds  # noqa: E402

UPLOAD_CFG = dict(batch=1, heads=2, seq_q=96, seq_k=130, head_dim=32, block_q=32, block_k=32,
                  inputs="rising", causal=True)


def loop_labels(at) -> list[str]:
    """The step labels the SRAM-tiling page sent its loop player (one per frame)."""
    from apptest_helpers import player
    return [f["label"] for f in player(at)["spec"]["frames"]]


def uploaded_page(cfg, q=None, k=None, v=None):
    """The Downloads page with the trace of cfg (on inputs q, k, v when given) uploaded."""
    res = engine.run(cfg, q, k, v, backend="numpy", trace=True)
    at = open_page("downloads", backend="numpy")
    at.file_uploader(key="trace_upload").set_value(
        ("mine.npz", trace_io.to_npz_bytes(cfg, res), "application/octet-stream"))
    at.run()
    assert_clean(at)
    return at, res


def test_uploaded_trace_replays_on_sram_tiling_and_online_softmax():
    cfg = engine.AttentionConfig(**UPLOAD_CFG, seed=int(seeds.rng(4411).integers(1e9)))
    at, res = uploaded_page(cfg)
    assert "Kept for this session: the uploaded trace: B=1, H=2, N_q=96, N_k=130" in texts(at)
    at.toggle(key="replay_downloads").set_value(True).run()
    at.switch_page("features/sram_tiling/page.py").run()
    assert_clean(at)
    assert at.toggle(key="replay_sram_tiling").value
    assert "Replaying the uploaded trace: B=1, H=2, N_q=96, N_k=130, d=32, tiles 32×32" \
        in texts(at)
    labels = set(loop_labels(at))
    assert "S_2,2: queries 64–95, keys 64–95" in " ".join(labels)   # the upload's 32×32 tiles
    assert any("uploaded trace: the running max rose in" in x for x in labels)
    at.switch_page("features/online_softmax/page.py").run()
    assert_clean(at)
    assert "Replaying the uploaded trace" in texts(at)
    assert not any("does not match" in w.value for w in at.warning)
    r = at.number_input(key="sm_row").value
    rose = int((res.trace.rescale[0, 0, r, 1:] < 1).sum())
    assert next(m for m in at.metric if m.label == "rescales below 1").value == str(rose)
    at.toggle(key="replay_online_softmax").set_value(False).run()      # back to the sidebar's
    assert_clean(at)
    assert "Replaying" not in texts(at) and "Only the row drawn is computed" in texts(at)
    assert at.number_input(key="sm_row").max == 255                   # the sidebar's N again


def test_a_trace_of_other_inputs_says_which_panels_it_fits():
    cfg = engine.AttentionConfig(**UPLOAD_CFG, seed=int(seeds.rng(4412).integers(1e9)))
    q, k, v = engine.make_inputs(cfg.with_(seed=cfg.seed + 1))
    at, _ = uploaded_page(cfg, q, k, v)
    at.toggle(key="replay_downloads").set_value(True).run()
    at.switch_page("features/online_softmax/page.py").run()
    assert_clean(at)
    warned = " ".join(w.value for w in at.warning)
    assert "does not match the inputs its config generates" in warned
    assert "running max, rescale and running sum come from the trace" in warned


def test_without_an_upload_no_replay_is_offered():
    at = open_page("sram_tiling")
    assert_clean(at)
    assert not [t for t in at.toggle if t.label == replay.REPLAY_LABEL]


def test_trace_labels_count_the_rows_whose_max_rose():
    cfg = engine.AttentionConfig(**UPLOAD_CFG, seed=int(seeds.rng(4413).integers(1e9)))
    res = engine.run(cfg, backend="numpy", trace=True)
    share = replay.rose_by_tile(cfg, res.trace)
    assert share.shape == (cfg.Tr, cfg.Tc) and (share[:, 0] == 0).all()
    i, j = 2, 1
    rows = res.trace.rescale[:, :, 64:96, j]
    assert share[i, j] == np.mean(rows < 1)
    from app.features.sram_tiling.data import loop_view
    view = loop_view(cfg)
    tiles, steps = replay.with_trace_labels(view.tiles, view.steps, view.group, cfg, res.trace)
    cell = tiles[(tiles.row == i) & (tiles.col == j)].label.iloc[0]
    assert cell.endswith(f"rose in {100 * share[i, j]:.0f}% of the rows")
    skipped = tiles[tiles.order < 0]
    assert not skipped.empty and not skipped.label.str.contains("uploaded").any()
    assert list(steps.label.str.contains("uploaded trace")) == [True] * len(steps)
