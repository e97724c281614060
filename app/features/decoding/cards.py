"""The Decoding page's question cards (app/core/cards.py): why the step splits the KV cache
here (from the model, engine.model.iomodel.decode_model_ms, and the auto rule of
engine.model.decode_config) and how many thread blocks it launches (from the run)."""
from __future__ import annotations

import engine
from app.core import card_view
from app.core.cards import CHOICE, NUMBER, Card, Truth, number_text
from engine.model import iomodel
from engine.model.decode_config import AUTO, AUTO_BLOCKS_PER_SM, MAX_SPLITS, MIN_SPLIT_KEYS

WHY_OPTIONS = (
    ("smem", "The whole KV cache does not fit in one thread block's shared memory"),
    ("fill", "Without splits too few thread blocks run (batch × KV heads): most SMs would sit "
             "idle, and splitting gives every SM a share of the cache to read"),
    ("bytes", "Splitting cuts the bytes of K and V read from HBM"),
    ("none", "It does not split here: one thread block per (sequence, KV head) walks the "
             "whole cache"),
    ("by_hand", "Only because num_splits was set by hand: the model gives these splits no "
                "gain over one"),
)


def split_reason(cfg: engine.DecodeConfig, splits: int, gpu: engine.GpuProfile) -> str:
    """The key of WHY_OPTIONS that is true for a step run with `splits` splits on `gpu`:
    "none" for one split; "fill" when the model's step is faster with them than with one
    (more SMs draw on HBM); else "by_hand"."""
    if splits == 1:
        return "none"
    faster = iomodel.decode_model_ms(cfg, splits, gpu) < iomodel.decode_model_ms(cfg, 1, gpu)
    return "fill" if faster else "by_hand"


def _us(ms: float) -> str:
    return f"{ms * 1e3:.1f} µs"


def why_split_card(cfg: engine.DecodeConfig, splits: int, gpu: engine.GpuProfile) -> Card:
    base = cfg.batch * cfg.kv_heads
    reason = split_reason(cfg, splits, gpu)
    one, now = iomodel.decode_model_ms(cfg, 1, gpu), iomodel.decode_model_ms(cfg, splits, gpu)
    floor = iomodel.decode_floor_ms(cfg, gpu.hbm_gbps * 1e9)
    auto = cfg.num_splits == AUTO
    question = (f"This step runs **{splits}** split{'s' if splits > 1 else ''} "
                f"({'auto' if auto else 'chosen here'}) over a cache of {cfg.seq_k:,} keys, "
                f"for batch {cfg.batch} × {cfg.kv_heads} KV heads, on {gpu.name} "
                f"({gpu.sms} SMs). Why does decoding split the KV cache here "
                f"(or why not)?")
    facts = (f"Without splits the step runs batch × KV heads = {base} thread block"
             f"{'s' if base > 1 else ''} on {gpu.sms} SMs; in the model each SM draws at most "
             f"its share of HBM bandwidth, so one split takes {_us(one)}")
    if reason == "fill":
        why = (f"{facts}, and {splits} splits ({base * splits} blocks) {_us(now)}, against "
               f"the HBM floor of {_us(floor)}.")
    elif reason == "by_hand":
        why = (f"{facts}, already the most the SMs can draw; {splits} splits take {_us(now)}: "
               f"their partial results only add bytes.")
    elif auto:
        fill = AUTO_BLOCKS_PER_SM * gpu.sms // base
        stops = ([f"{base} blocks already give every SM work ({AUTO_BLOCKS_PER_SM} · "
                  f"{gpu.sms} SMs / {base} = {fill} split{'s' if fill != 1 else ''} at most)"]
                 if fill < 2 else [])
        if cfg.seq_k < 2 * MIN_SPLIT_KEYS:
            stops.append(f"a split must hold at least {MIN_SPLIT_KEYS} keys and the cache "
                         f"has {cfg.seq_k:,}")
        why = (f"{facts}. The auto rule takes the largest power of two of splits with at "
               f"most {AUTO_BLOCKS_PER_SM} blocks per SM, splits of at least "
               f"{MIN_SPLIT_KEYS} keys and at most {MAX_SPLITS} splits; here "
               + ("; ".join(stops) or "it leaves one") + ".")
    else:
        why = f"{facts}: num_splits = 1 was chosen on this page."
    why += (" Splitting never changes the K and V bytes (every key is read once either way) "
            "and a block never holds the whole cache: it streams tiles of "
            "K and V through shared memory.")
    source = ("the model engine.model.iomodel.decode_model_ms and the auto rule of "
              "engine.model.decode_config (the 'Time against the number of splits' chart), "
              "for the split count the run used.")
    return Card("decoding.why_split", question, CHOICE, Truth(reason, why, source),
                options=WHY_OPTIONS)


def blocks_card(cfg: engine.DecodeConfig, splits: int) -> Card:
    blocks = cfg.batch * cfg.kv_heads * splits
    question = (f"How many thread blocks does this decode step launch? (batch {cfg.batch}, "
                f"{cfg.heads} query heads sharing {cfg.kv_heads} KV heads, {splits} "
                f"split{'s' if splits > 1 else ''}; the merge runs in the same launch.)")
    why = (f"One block per (sequence, KV head, split): {cfg.batch} × {cfg.kv_heads} × "
           f"{splits} = **{number_text(blocks)}**. The {cfg.group} query head"
           f"{'s' if cfg.group > 1 else ''} of a KV head share its block (grouped-query "
           f"attention), so K_j and V_j are read once for all of them; the last block of each "
           f"KV head to finish merges the splits.")
    source = "the run's split count (DecodeResult.num_splits) and the page's DecodeConfig."
    return Card("decoding.blocks", question, NUMBER, Truth(blocks, why, source))


def build(cfg: engine.DecodeConfig, gpu: engine.GpuProfile, splits: int) -> list[Card]:
    return [why_split_card(cfg, splits, gpu), blocks_card(cfg, splits)]


def show(cfg: engine.DecodeConfig, gpu: engine.GpuProfile, splits: int) -> None:
    """The page's cards, at the bottom of the page."""
    card_view.show(build(cfg, gpu, splits))
