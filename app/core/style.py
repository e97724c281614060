"""One palette and one set of font sizes for every chart (projector-friendly, colour-blind safe).

Colours are the Okabe–Ito palette. Each tile of the algorithm keeps its colour on every page:
Q_i blue, K_j orange, V_j green, S_ij purple, O_i sky blue.
"""
from __future__ import annotations

import textwrap

import altair as alt

from engine.model.registry import chart_names

TILE_COLORS = {
    "Q_i": "#0072B2",
    "K_j": "#E69F00",
    "V_j": "#009E73",
    "S_ij": "#CC79A7",
    "O_i": "#56B4E9",
    "m_i": "#7F7F7F",
    "l_i": "#444444",
}
ALARM = "#D55E00"        # vermillion: does not fit, overflow, rescale < 1, naive's wall
DONE = "#9E9E9E"         # tiles the loop has finished
PENDING = "#E8E8E8"      # tiles still to come
SKIPPED = "#FFFFFF"      # causally skipped tiles (drawn with a dashed outline)
INK = "#222222"

KERNEL_COLORS = {
    "naive": ALARM,
    "teaching": TILE_COLORS["Q_i"],
    "tensorcore": TILE_COLORS["V_j"],
    "CPU emulation": TILE_COLORS["K_j"],
    "torch_flash": TILE_COLORS["S_ij"],
    "torch_cudnn": TILE_COLORS["O_i"],
    "torch_math": "#000000",
}

# The app caps every chart at about 20k marks itself (tiles grouped, rows binned, blocks
# sampled), so Altair's default 5000-row guard would only refuse charts within that cap.
alt.data_transformers.disable_max_rows()

# Talk mode: the title at the top, smaller and only as wide as its words, so that each page's
# main chart and its controls fit a 1280×720 projector below it; the deck's counter and
# buttons (app/core/deck_view.py) in the header's corner beside the title, over no content; a
# slide's takeaway in bold over its chart.
TALK_CSS = """<style>
[data-testid="stMainBlockContainer"] { padding-top: 0.5rem; padding-bottom: 2rem; }
[data-testid="stHeader"] { background: transparent; }
[data-testid="stMainBlockContainer"] h1 { font-size: 1.8rem; padding: 0 0 0.1rem 0; }
[data-testid="stElementContainer"]:has(h1) { width: fit-content; }
.st-key-deck_bar { position: fixed; top: 0.2rem; right: 4.5rem; left: auto; z-index: 999991;
  width: max-content !important; background: rgba(255, 255, 255, 0.94);
  border-radius: 0.5rem; padding: 0 0.5rem; }
.st-key-deck_bar p { margin: 0; white-space: nowrap; }
.st-key-deck_bar button { min-height: 2rem; padding: 0 0.7rem; }
.takeaway { font-size: 1.15rem; font-weight: 700; color: #222222; border-left: 0.3rem solid
  #CC79A7; padding: 0 0 0 0.6rem; line-height: 1.3; }
</style>"""

FONT = {"label": 16, "title": 18, "chart_title": 20, "text": 16}


SPARE_COLORS = ["#882255", "#999933", "#44AA99", "#AA4499"]   # kernels not named above


def kernel_scale(names) -> alt.Scale:
    """The colour scale for kernels, in a fixed order so a kernel keeps its colour."""
    names = list(dict.fromkeys(names))
    unnamed = [n for n in names if n not in KERNEL_COLORS]
    spare = dict(zip(unnamed, SPARE_COLORS * (len(unnamed) // len(SPARE_COLORS) + 1)))
    return alt.Scale(domain=names, range=[KERNEL_COLORS.get(n) or spare[n] for n in names])


CONFIG = alt.Config(
    axis=alt.AxisConfig(labelFontSize=FONT["label"], titleFontSize=FONT["title"]),
    legend=alt.LegendConfig(labelFontSize=FONT["label"], titleFontSize=FONT["title"],
                            symbolSize=200),
    title=alt.TitleConfig(fontSize=FONT["chart_title"], anchor="start"),
    header=alt.HeaderConfig(labelFontSize=FONT["label"], titleFontSize=FONT["title"]),
    view=alt.ViewConfig(strokeWidth=0))


def slider(name: str, value: float, low: float, high: float, step: float,
           label: str) -> alt.VariableParameter:
    """A top-level param bound to a browser slider (Vega drives it; Python never re-runs)."""
    return alt.VariableParameter(name=name, value=value, bind=alt.BindRange(
        input="range", min=low, max=high, step=step, name=label))


# Width of a character of chart title text, as a fraction of its font size: DejaVu Sans, the
# widest of the common sans-serif fonts a browser falls back to (Arial and Liberation Sans: 0.5)
TITLE_CHAR_EM = 0.6
# A title starts at its chart's left edge (axes included) and may run to the end of the chart's
# column: about this many px for one of two columns at 1280 px with the sidebar open
HALF_COLUMN = 440


def wrap_title(text: str, width: int, size: int = FONT["chart_title"]) -> str | list[str]:
    """A chart title in lines no wider than `width` px in any common sans-serif font (a
    title wider than its chart's column would push the page sideways at 1280 px)."""
    lines = textwrap.wrap(text, max(int(width / (TITLE_CHAR_EM * size)), 12))
    return lines[0] if len(lines) == 1 else lines


def finish(chart, width: int | None = None, params: list | None = None):
    """Give a freshly built top-level chart the shared fonts, its own sizes (autosize pad, so
    small charts are not squeezed), an optional width and top-level params. Set in place:
    Altair's methods (add_params too) deep-copy the whole chart on every call, which costs
    tenths of a second on big ones."""
    if width is not None:
        chart.width = width
    if params:
        chart.params = params
    chart.autosize = alt.AutoSizeParams(type="pad", contains="padding")
    chart.config = CONFIG
    return chart


# ---- names in words: every chart labels kernels, backends and trace fields through these ----
# The flash kernels' names come from the kernel registry; the rest are series of no kernel.
SERIES_NAMES = {
    "naive": "naive",
    **chart_names(),
    "CPU emulation": "flash (CPU emulation)",
    "FlashAttention": "flash",
    "torch_flash": "PyTorch flash",
    "torch_cudnn": "PyTorch cuDNN",
    "torch_math": "PyTorch math",
}
BACKEND_NAMES = {"numpy": "NumPy", "cupy": "CuPy", "torch": "PyTorch"}
LABEL_NAMES = {"tile_max": "this tile's max", "m_i": "running max", "l_i": "running sum",
               "running_max": "running max", "running_sum": "running sum",
               "rescale": "rescale factor"}
KERNEL_COLORS.update({"mma.sync": TILE_COLORS["V_j"], "wgmma": "#117733"})
KERNEL_COLORS.update({SERIES_NAMES[k]: c for k, c in list(KERNEL_COLORS.items())
                      if k in SERIES_NAMES})


def kernel_name(kernel: str, backend: str | None = None) -> str:
    """A kernel (code name or the app's label) in words; with a backend, the run in words:
    "naive (CuPy)", "flash, teaching kernel (CuPy)", "flash (CPU emulation)"."""
    name = SERIES_NAMES.get(kernel, LABEL_NAMES.get(kernel, kernel))
    if backend is None or kernel == "CPU emulation" or kernel.startswith("torch_"):
        return name
    where = BACKEND_NAMES.get(backend, backend)
    return f"{name}, {where}" if name.endswith(")") else f"{name} ({where})"


def named_scale(kernels, names) -> alt.Scale:
    """kernel_scale's colours for `kernels`, with `names` (their words) as the domain."""
    pairs = list(dict.fromkeys(zip(kernels, names)))
    colors = kernel_scale([k for k, _ in pairs]).to_dict()["range"]
    return alt.Scale(domain=[n for _, n in pairs], range=colors)
