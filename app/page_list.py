"""The app's pages, one row each, in menu order: the one list that navigation, the Overview's
guide, the page controls and the tests read. Plain data, importable without a running script
(app/navigation.py builds the st.Page objects from it on the first run)."""
from __future__ import annotations

from dataclasses import dataclass

# The pages' url_paths (app/controls.py keys its page controls by them)
OVERVIEW = "overview"
SRAM_TILING = "sram-tiling"
ONLINE_SOFTMAX = "online-softmax"
TIMINGS = "timings"
TILE_SIZES = "tile-sizes"
KERNEL = "kernel"
DOWNLOADS = "downloads"
BACKWARD = "backward"
DECODING = "decoding"


@dataclass(frozen=True)
class PageRow:
    script: str            # its file in pages/
    title: str             # in the menu and in the Overview's guide
    url_path: str          # its URL: /<url_path>
    guide: str             # the Overview's line about it
    charts: int            # charts it draws at the default config on CPU with the test
                           # fixtures (the Kernel page draws the recorded schedule on CPU and
                           # the live one on a GPU), at least
    browser_chart: bool    # whether it draws a chart in the browser at the default config
                           # (from the config, or, on the Kernel page, from the recorded
                           # schedule in benchmarks/results/)

    @property
    def stem(self) -> str:
        """The script's name without .py (how the tests name the page)."""
        return self.script.removesuffix(".py")


PAGES = (
    PageRow("overview.py", "Overview", OVERVIEW,
            "this page: the headline measurement, the device and the config's figures.",
            charts=0, browser_chart=False),
    PageRow("sram_tiling.py", "SRAM tiling", SRAM_TILING,
            "the loop over tiles of Q, K and V, step by step, and what each thread "
            "block keeps in shared memory.",
            charts=3, browser_chart=True),
    PageRow("online_softmax.py", "Online softmax", ONLINE_SOFTMAX,
            "one query row: the running max and sum rescaled tile by tile, to the "
            "same answer as the full softmax.",
            charts=3, browser_chart=True),
    PageRow("timings.py", "Timings", TIMINGS,
            "naive against flash for this config and over a sweep of N, the memory and "
            "HBM model, and the results recorded on real GPUs.",
            charts=3, browser_chart=True),
    PageRow("tile_sizes.py", "Tile sizes", TILE_SIZES,
            "how block_q × block_k sets shared memory, occupancy and time, modelled "
            "and measured.",
            charts=8, browser_chart=True),
    PageRow("kernel.py", "Kernel", KERNEL,
            "the CUDA source and compile facts of the kernels, and how thread blocks were "
            "scheduled over the SMs.",
            charts=1, browser_chart=True),
    PageRow("downloads.py", "Downloads", DOWNLOADS,
            "this session's output, trace and timings as files.",
            charts=0, browser_chart=False),
    PageRow("backward.py", "Backward pass", BACKWARD,
            "the gradients: P rebuilt from the saved log-sum-exp, key tiles outer, "
            "and its cost against naive's.",
            charts=7, browser_chart=True),
    PageRow("decoding.py", "Decoding", DECODING,
            "one new token against a long KV cache: Flash-Decoding's splits merged by "
            "their log-sum-exps, a paged cache and grouped-query heads.",
            charts=6, browser_chart=True),
)


def by_url(url_path: str) -> PageRow:
    """The row of the page at /<url_path>."""
    return next(row for row in PAGES if row.url_path == url_path)
