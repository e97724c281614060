"""The sidebar's controls as data: names, defaults, allowed values, URL parsing, presets.

Every control is one URL query parameter of the same name. `parse_value` turns the URL's text
into a value or raises ValueError saying what is allowed, so a tampered link shows a message.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine import BLOCK_SIZES, DTYPES, HEAD_DIMS, INPUT_PRESETS, KERNELS, PROFILES
from engine.model.config import MAX_LOGIT_SCALE, MAX_SEED
from engine.model.decode_config import MAX_DECODE_QUERIES
from engine.model.registry import FAMILIES

from app.page_list import BACKWARD, DECODING, ONLINE_SOFTMAX, SRAM_TILING, TIMINGS

MAX_BATCH = 64
MAX_HEADS = 64
MAX_SEQ_UI = 65536
MAX_DECODE_SEQ_UI = 1 << 17           # the Decoding page's cache length
SPLIT_CHOICES = ("auto", 1, 2, 4, 8, 16, 32, 64, 128)
PAGE_CHOICES = ("none", 8, 16, 32, 64, 128, 256)
BACKEND_LABELS = {"auto": "auto (GPU when usable)", "cupy": "GPU (CuPy)",
                  "numpy": "CPU emulation (NumPy)"}
def kernel_label(kernel: str) -> str:
    """How a flash kernel of engine.KERNELS is called on screen."""
    return FAMILIES[kernel].name if kernel in FAMILIES else f"{kernel} kernel"


@dataclass(frozen=True)
class Control:
    name: str
    kind: str              # "int", "float", "bool" or "choice"
    default: object
    low: float | None = None
    high: float | None = None
    choices: tuple = ()

    def allowed(self) -> str:
        if self.kind == "int":
            return f"a whole number from {self.low:g} to {self.high:g}"
        if self.kind == "float":
            return f"a number from {self.low:g} to {self.high:g}"
        if self.kind == "bool":
            return "true or false"
        return "one of " + ", ".join(str(c) for c in self.choices)


CONTROLS = {c.name: c for c in (
    Control("batch", "int", 1, 1, MAX_BATCH),
    Control("heads", "int", 2, 1, MAX_HEADS),
    Control("seq_q", "int", 256, 1, MAX_SEQ_UI),
    Control("link_seq", "bool", True),
    Control("seq_k", "int", 256, 1, MAX_SEQ_UI),
    Control("head_dim", "choice", 64, choices=HEAD_DIMS),
    Control("block_q", "choice", 64, choices=BLOCK_SIZES),
    Control("block_k", "choice", 64, choices=BLOCK_SIZES),
    Control("dtype", "choice", "float32", choices=DTYPES),
    Control("causal", "bool", False),
    Control("inputs", "choice", "normal", choices=INPUT_PRESETS),
    Control("logit_scale", "float", 1.0, 0.01, MAX_LOGIT_SCALE),
    Control("seed", "int", 0, 0, MAX_SEED),
    Control("backend", "choice", "auto", choices=tuple(BACKEND_LABELS)),
    Control("kernel", "choice", "teaching", choices=tuple(KERNELS)),
    Control("profile", "choice", "H200", choices=tuple(PROFILES)),
    Control("talk", "bool", False),
)}


# Controls of one page, kept in the URL under their widget keys while that page is shown:
# URL parameter -> (page url_path, as app/page_list.py names it; control). Their ranges also
# depend on the config, so the page narrows them (app.ui.linked_number); here are the widest.
PAGE_CONTROLS = {
    "sm_batch": (ONLINE_SOFTMAX, Control("sm_batch", "int", None, 0, MAX_BATCH - 1)),
    "sm_head": (ONLINE_SOFTMAX, Control("sm_head", "int", None, 0, MAX_HEADS - 1)),
    "sm_row": (ONLINE_SOFTMAX, Control("sm_row", "int", None, 0, MAX_SEQ_UI - 1)),
    "sweep_largest": (TIMINGS, Control("sweep_largest", "choice", None,
                                       choices=tuple(2 ** k for k in range(8, 17)))),
    "sram_order": (SRAM_TILING, Control("sram_order", "choice", None,
                                        choices=("fa2", "fa1"))),
    "bw_row": (BACKWARD, Control("bw_row", "int", None, 0, MAX_SEQ_UI - 1)),
    "bw_key": (BACKWARD, Control("bw_key", "int", None, 0, MAX_SEQ_UI - 1)),
    "dec_seq_k": (DECODING, Control("dec_seq_k", "int", None, 1, MAX_DECODE_SEQ_UI)),
    "dec_seq_q": (DECODING, Control("dec_seq_q", "int", None, 1, MAX_DECODE_QUERIES)),
    "dec_kv_heads": (DECODING, Control("dec_kv_heads", "int", None, 1, MAX_HEADS)),
    "dec_splits": (DECODING, Control("dec_splits", "choice", None, choices=SPLIT_CHOICES)),
    "dec_page": (DECODING, Control("dec_page", "choice", None, choices=PAGE_CHOICES)),
    "dec_head": (DECODING, Control("dec_head", "int", None, 0, MAX_HEADS - 1)),
}


def control(name: str) -> Control:
    """The sidebar or page control behind URL parameter `name`."""
    return CONTROLS[name] if name in CONTROLS else PAGE_CONTROLS[name][1]


def parse_value(name: str, raw: str):
    """The typed value of URL parameter `name`, or ValueError saying what is allowed."""
    ctl = control(name)
    text = str(raw).strip()
    fallback = "the page's default" if ctl.default is None else repr(ctl.default)
    bad = ValueError(f"The link's {name}={raw!r} is not allowed: {name} must be "
                     f"{ctl.allowed()}. Using {fallback} instead.")
    if ctl.kind == "bool":
        if text.lower() in ("true", "1"):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise bad
    if ctl.kind == "int":
        if not (text.isascii() and text.isdigit()) or not ctl.low <= int(text) <= ctl.high:
            raise bad
        return int(text)
    if ctl.kind == "float":
        try:
            val = float(text)
        except ValueError:
            raise bad from None
        if not ctl.low <= val <= ctl.high:   # also rejects nan
            raise bad
        return val
    for choice in ctl.choices:
        if text == str(choice):
            return choice
    raise bad


def to_text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


PRESETS = {
    "small and clear": dict(batch=1, heads=2, seq_q=256, seq_k=256, link_seq=True, head_dim=64,
                            block_q=64, block_k=64, dtype="float32", causal=False,
                            inputs="rising", logit_scale=1.0),
    "long context": dict(batch=1, heads=2, seq_q=8192, seq_k=8192, link_seq=True, head_dim=64,
                         block_q=64, block_k=64, dtype="float16", causal=False,
                         inputs="normal", logit_scale=1.0),
    "causal": dict(batch=1, heads=2, seq_q=512, seq_k=512, link_seq=True, head_dim=64,
                   block_q=64, block_k=64, dtype="float32", causal=True, inputs="normal",
                   logit_scale=1.0),
    "tiles too big for SRAM": dict(batch=1, heads=2, seq_q=512, seq_k=512, link_seq=True,
                                   head_dim=128, block_q=128, block_k=128, dtype="float32",
                                   causal=False, inputs="normal", logit_scale=1.0),
}
