"""The sidebar's controls as data: names, defaults, allowed values, presets; the kind of
control a page's own controls are too (they sit in their page's row of app/page_list.py).

Every control is one URL query parameter of the same name (app/core/url_params.py parses them).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine import BLOCK_SIZES, DTYPES, HEAD_DIMS, INPUT_PRESETS, KERNELS, PROFILES
from engine.model.config import MAX_LOGIT_SCALE, MAX_SEED
from engine.model.registry import FAMILIES

MAX_BATCH = 64
MAX_HEADS = 64
MAX_SEQ_UI = 65536
MAX_DECODE_SEQ_UI = 1 << 17           # the Decoding page's cache length
MAX_LOOP_STEPS = 4096                 # steps of a loop animation (larger grids group tiles)
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
    player: bool = False   # a loop player's step: kept in the URL, left out of a teacher's link

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
