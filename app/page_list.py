"""The app's pages, one row each, in menu order: the one list that navigation, the Overview's
guide, the URL's page controls and the tests read. Plain data, importable without a running
script (app/core/navigation.py builds the st.Page objects from it on the first run). Each page
is a folder of app/features/ holding its script (page.py, layout only) and its data and chart
modules."""
from __future__ import annotations

from dataclasses import dataclass

from engine.model.decode_config import MAX_DECODE_QUERIES, MAX_SPLITS

from app.core.controls import (MAX_BATCH, MAX_DECODE_SEQ_UI, MAX_HEADS, MAX_LOOP_STEPS,
                               MAX_SEQ_UI, PAGE_CHOICES, SPLIT_CHOICES, Control)

# The pages' url_paths
OVERVIEW = "overview"
SRAM_TILING = "sram-tiling"
ONLINE_SOFTMAX = "online-softmax"
TIMINGS = "timings"
TILE_SIZES = "tile-sizes"
KERNEL = "kernel"
DOWNLOADS = "downloads"
BACKWARD = "backward"
DECODING = "decoding"
PRECISION = "precision"


@dataclass(frozen=True)
class PageRow:
    feature: str           # its folder in app/features/ (how the tests name the page)
    title: str             # in the menu and in the Overview's guide
    url_path: str          # its URL: /<url_path>
    guide: str             # the Overview's line about it
    charts: int            # charts it draws at the default config on CPU with the test
                           # fixtures (the Kernel page draws the recorded schedule on CPU and
                           # the live one on a GPU), at least
    browser_chart: bool    # whether it draws a chart in the browser at the default config
                           # (from the config, or, on the Kernel page, from the recorded
                           # schedule in benchmarks/results/)
    # its own controls, kept in the URL under their widget keys while the page is shown (their
    # ranges also depend on the config, so the page narrows them: app.core.ui.linked_number;
    # here are the widest)
    controls: tuple[Control, ...] = ()
    # the engine path its runs take ("forward", "backward" or "decode"): whose builds the
    # sidebar checks against the GPU's compute capability (app/core/arch_notice.py)
    direction: str = "forward"

    @property
    def script(self) -> str:
        """Its script, relative to app/ (the main script's folder, as st.Page and AppTest's
        switch_page take it)."""
        return f"features/{self.feature}/page.py"


PAGES = (
    PageRow("overview", "Overview", OVERVIEW,
            "this page: the headline measurement, the device and the config's figures.",
            charts=0, browser_chart=False),
    PageRow("sram_tiling", "SRAM tiling", SRAM_TILING,
            "the loop over tiles of Q, K and V, step by step, and what each thread "
            "block keeps in shared memory.",
            charts=2, browser_chart=True,
            controls=(Control("sram_order", "choice", None, choices=("fa2", "fa1")),
                      Control("sram_step", "int", 1, 1, MAX_LOOP_STEPS, player=True))),
    PageRow("online_softmax", "Online softmax", ONLINE_SOFTMAX,
            "one query row: the running max and sum rescaled tile by tile, to the "
            "same answer as the full softmax.",
            charts=3, browser_chart=True,
            controls=(Control("sm_batch", "int", None, 0, MAX_BATCH - 1),
                      Control("sm_head", "int", None, 0, MAX_HEADS - 1),
                      Control("sm_row", "int", None, 0, MAX_SEQ_UI - 1),
                      Control("sm_tile", "int", 0, 0, MAX_SEQ_UI - 1))),
    PageRow("timings", "Timings", TIMINGS,
            "naive against flash for this config and over a sweep of N, the memory and "
            "HBM model, and the results recorded on real GPUs.",
            charts=3, browser_chart=True,
            controls=(Control("sweep_largest", "choice", None,
                              choices=tuple(2 ** k for k in range(8, 17))),)),
    PageRow("tile_sizes", "Tile sizes", TILE_SIZES,
            "how block_q × block_k sets shared memory, occupancy and time, modelled "
            "and measured.",
            charts=8, browser_chart=True),
    PageRow("kernel", "Kernel", KERNEL,
            "the CUDA source and compile facts of the kernels, and how thread blocks were "
            "scheduled over the SMs.",
            charts=1, browser_chart=True,
            controls=(Control("hopper_step", "int", None, 1, MAX_LOOP_STEPS, player=True),)),
    PageRow("downloads", "Downloads", DOWNLOADS,
            "this session's output, trace and timings as files.",
            charts=0, browser_chart=False),
    PageRow("backward", "Backward pass", BACKWARD,
            "the gradients: P rebuilt from the saved log-sum-exp, key tiles outer, "
            "and its cost against naive's.",
            charts=6, browser_chart=True,
            controls=(Control("bw_row", "int", None, 0, MAX_SEQ_UI - 1),
                      Control("bw_key", "int", None, 0, MAX_SEQ_UI - 1),
                      Control("bw_step", "int", 1, 1, MAX_LOOP_STEPS, player=True)),
            direction="backward"),
    PageRow("decoding", "Decoding", DECODING,
            "one new token against a long KV cache: Flash-Decoding's splits merged by "
            "their log-sum-exps, a paged cache and grouped-query heads.",
            charts=5, browser_chart=True,
            controls=(Control("dec_seq_k", "int", None, 1, MAX_DECODE_SEQ_UI),
                      Control("dec_seq_q", "int", None, 1, MAX_DECODE_QUERIES),
                      Control("dec_kv_heads", "int", None, 1, MAX_HEADS),
                      Control("dec_splits", "choice", None, choices=SPLIT_CHOICES),
                      Control("dec_page", "choice", None, choices=PAGE_CHOICES),
                      Control("dec_head", "int", None, 0, MAX_HEADS - 1),
                      Control("dec_step", "int", 1, 1, MAX_SPLITS, player=True)),
            direction="decode"),
    PageRow("precision", "Precision", PRECISION,
            "fp32, fp16, bf16 and FP8 side by side: FP8's per-tile scales, each format's "
            "error against float64, and why P is formed from the running max.",
            charts=6, browser_chart=True,
            controls=(Control("pr_batch", "int", None, 0, MAX_BATCH - 1),
                      Control("pr_head", "int", None, 0, MAX_HEADS - 1),
                      Control("pr_scales", "choice", None,
                              choices=("tile", "rotation", "tensor")),
                      Control("pr_threshold", "choice", None,
                              choices=("off", *range(13))))),
)


def by_url(url_path: str) -> PageRow:
    """The row of the page at /<url_path>."""
    return next(row for row in PAGES if row.url_path == url_path)
