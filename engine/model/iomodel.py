"""Memory and IO model: shared memory per thread block, occupancy by shared memory, HBM
bytes moved by naive and flash attention for an exact config, and peak device memory.

Every byte count of the project lives here: shared memory per kernel layout, HBM traffic,
peak device memory, the trace's size and the bytes a run must move at least (for the
timing ceilings); they are written for people by engine.model.units.format_bytes (binary
units, re-exported here as iomodel.format_bytes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import AttentionConfig
from .decode_config import DecodeConfig
from .devices import GpuProfile
from .registry import BY_KEY, FAMILIES, SMEM_LAYOUTS
from .tiles import query_tile_sizes, seen_key_tiles
from .units import format_bytes  # noqa: F401  (the one byte formatter, engine.model.units)

RESERVED_SMEM_PER_BLOCK = 1024  # the CUDA runtime reserves 1 KB per block (cc 8.0 and later)
SCHEDULE_RECORD_BYTES = 4 + 8 + 8   # per thread block: SM id (int32), start and end (uint64)


@dataclass(frozen=True)
class SmemBudget:
    parts: dict          # tile name -> bytes
    total: int
    limit: int           # per-block opt-in limit of the GPU
    fits: bool
    blocks_per_sm: int   # resident blocks per SM allowed by shared memory alone


def smem_parts(cfg: AttentionConfig, kernel: str = "teaching") -> dict:
    """Dynamic shared memory of one thread block, tile by tile, as each kernel lays it out.

    "teaching": Q_i, K_j, V_j in the input dtype, then S_ij/P_ij, O_i, m_i, l_i in float32.
    "mma.sync": Q_i and two buffers (cp.async double buffering) each of K_j and V_j, 16-bit;
    S_ij, O_i, m_i and l_i live in registers.
    "wgmma": the same tiles in the 128-byte swizzle, Q_i and the K_j / V_j ring in the
    buffers wgmma_ring gives (two of Q_i: a persistent block loads its next item's Q_i during
    the current one), plus the mbarriers (wgmma_barrier_bytes) and up to 1024 bytes to align
    the swizzle pattern.
    "wgmma fp8": the wgmma layout with 1-byte elements (e4m3), V transposed, and where
    p_through_smem(cfg) P_ij's buffers; the scales are read from global memory.
    "backward teaching" (kernels/teaching/flash_backward_teaching.cu): K_j, V_j, Q_i, dO_i in the input
    dtype, each row padded by one 32-bit word (bank conflicts); then dK_j, dV_j, P_ij, dS_ij,
    L_i and D_i in float32.
    "backward mma.sync" (kernels/ampere/flash_backward_mma.cu): K_j, V_j, two buffers each of Q_i,
    dO_i and dS_ijᵀ (16-bit), two buffers each of lse_i and D_i (float32); dK_j, dV_j, S_ij
    and dP_ij live in registers. "backward mma.sync, one query buffer": the same build with
    one buffer each of Q_i, dO_i, lse_i and D_i (-DQUERY_STAGES=1), for smaller blocks.
    "backward wgmma" (kernels/hopper/flash_backward_wgmma.cu): the same tiles, Q_i, dO_i, lse_i and
    D_i in a two-stage ring that bulk tensor copies fill, the 16-bit ones in the 128-byte
    swizzle; a float32 staging tile of dQ_i (in the accumulator's tile order, for the bulk
    dQ reductions of -DDQ_WRITER=1, reserved in every build), the mbarriers (128 bytes) and
    up to 1024 bytes to align the swizzle pattern.
    """
    Br, Bc, d, e = cfg.block_q, cfg.block_k, cfg.head_dim, cfg.itemsize
    if kernel == "teaching":
        return {"Q_i": Br * d * e, "K_j": Bc * d * e, "V_j": Bc * d * e,
                "S_ij": Br * Bc * 4, "O_i": Br * d * 4, "m_i": Br * 4, "l_i": Br * 4}
    if kernel == "backward teaching":
        row = d * e + 4
        return {"K_j": Bc * row, "V_j": Bc * row, "Q_i": Br * row, "dO_i": Br * row,
                "dK_j": Bc * d * 4, "dV_j": Bc * d * 4, "P_ij": Br * Bc * 4,
                "dS_ij": Br * Bc * 4, "L_i": Br * 4, "D_i": Br * 4}
    if kernel == "backward mma.sync, one query buffer":
        return {"K_j": Bc * d * 2, "V_j": Bc * d * 2, "Q_i": Br * d * 2, "dO_i": Br * d * 2,
                "dS_ij (2 buffers)": 2 * Bc * Br * 2, "lse_i": Br * 4, "D_i": Br * 4}
    if kernel in ("backward mma.sync", "backward wgmma"):
        tiles = {"K_j": Bc * d * 2, "V_j": Bc * d * 2, "Q_i (2 buffers)": 2 * Br * d * 2,
                 "dO_i (2 buffers)": 2 * Br * d * 2, "dS_ij (2 buffers)": 2 * Bc * Br * 2,
                 "lse_i (2 buffers)": 2 * Br * 4, "D_i (2 buffers)": 2 * Br * 4}
        if kernel == "backward wgmma":
            return {**tiles, "dQ_i (float32 staging)": Br * d * 4, "mbarriers": 128,
                    "swizzle alignment": 1024}
        return tiles
    tiles = {"Q_i": Br * d * 2, "K_j (2 buffers)": 2 * Bc * d * 2,
             "V_j (2 buffers)": 2 * Bc * d * 2}
    if kernel == "mma.sync":
        return tiles
    if kernel in ("wgmma", "wgmma fp8"):
        return wgmma_parts(cfg)
    raise ValueError(f"kernel must be one of {', '.join(SMEM_LAYOUTS)} (the shared-memory "
                     f"layouts of engine.model.registry); got {kernel!r}.")


def _buffers(tile: str, n: int) -> str:
    return tile if n == 1 else f"{tile} ({n} buffers)"


# The Hopper forward's buffers (kernels/hopper/flash_wgmma.cu: Q_BUFFERS, KV_STAGES), by
# (dtype kind, head_dim, block_q, block_k); two of each elsewhere. A third stage of K_j / V_j
# gives each load a tile longer to arrive; at 16-bit d = 128 it fits the 227 KiB block only
# beside one Q_i buffer (the next item's Q_i then loads after the current one's last S_ij).
# Measured on an H100 (2026-11-27, lab/NOTES.md, "Deeper rings"): 16-bit d = 128, 1.3-3.4%
# faster at N = 1k-16k; FP8 128×192, level at N = 2k-8k and 3.9% faster at 16k.
WGMMA_RINGS = {("16-bit", 128, 128, 128): (1, 3), ("fp8", 128, 128, 192): (2, 3)}


# FP8 builds whose P_ij goes through shared memory (the kernel's P_SMEM), by (head_dim,
# block_k): at 128×256 and d = 128, S, O and P in registers pass the consumers' 240 (nvcc 13.0
# spilled 144 bytes and serialised every wgmma), so P_ij is stored to one buffer a consumer
# warpgroup and P V reads it from there. Measured on an H200 (2026-11-29, lab/NOTES.md, "FP8:
# P through shared memory"): 2-4% faster than 128×192 at N = 8k-16k, 6% at 2k.
FP8_P_SMEM = {(128, 256)}
# Such a build's P_ij: a buffer of 64 rows a consumer warpgroup, in slabs of 128 one-byte keys
# (the kernel's P_SLAB; a partial slab takes a whole one).
P_SLAB_BYTES = 64 * 128


def p_through_smem(cfg: AttentionConfig) -> bool:
    """Whether the Hopper forward's build for cfg keeps P_ij in shared memory (FP8_P_SMEM)."""
    return cfg.is_fp8 and (cfg.head_dim, cfg.block_k) in FP8_P_SMEM


def wgmma_ring(cfg: AttentionConfig) -> tuple[int, int]:
    """(Q_i buffers, K_j / V_j stages) of the Hopper forward's build for cfg."""
    kind = "fp8" if cfg.is_fp8 else "16-bit"
    return WGMMA_RINGS.get((kind, cfg.head_dim, cfg.block_q, cfg.block_k), (2, 2))


def wgmma_parts(cfg: AttentionConfig, ring: tuple[int, int] | None = None) -> dict:
    """The Hopper forward's shared memory, part by part, for cfg's build with `ring` (Q_i
    buffers, K_j / V_j stages; default wgmma_ring(cfg)): 1-byte elements for FP8."""
    Br, Bc, d = cfg.block_q, cfg.block_k, cfg.head_dim
    e = 1 if cfg.is_fp8 else 2
    q, s = ring or wgmma_ring(cfg)
    consumers, slabs = Br // 64, -(-Bc // 128)
    p = ({"P_ij (a buffer a consumer)": consumers * slabs * P_SLAB_BYTES}
         if p_through_smem(cfg) else {})
    return {_buffers("Q_i", q): q * Br * d * e, _buffers("K_j", s): s * Bc * d * e,
            _buffers("V_j", s): s * Bc * d * e, **p, "mbarriers": wgmma_barrier_bytes(q, s),
            "swizzle alignment": 1024}


def wgmma_barrier_bytes(q_buffers: int, stages: int) -> int:
    """The Hopper forward's mbarrier area (its BAR_AREA): a full and an empty barrier of 8
    bytes for each Q_i buffer, two of each for each stage (K_j, V_j), and a 4-byte flag, in
    128 bytes where they fit, else 256."""
    return 128 if 8 * (2 * q_buffers + 4 * stages) + 4 <= 128 else 256


def smem_bytes(cfg: AttentionConfig, kernel: str = "teaching") -> int:
    """Dynamic shared memory of one thread block of `kernel` (see smem_parts)."""
    return sum(smem_parts(cfg, kernel).values())


def fitting_layout(cfg: AttentionConfig, kernel: str, smem_optin: int) -> str:
    """The layout a build of `kernel`'s layout compiles to for cfg on a block of smem_optin
    bytes: its own, or its leaner fallback (registry smem_fallback) where only that fits."""
    fallback = next((k.smem_fallback for k in BY_KEY.values()
                     if k.smem_layout == kernel and k.smem_fallback), None)
    if (fallback and smem_bytes(cfg, kernel) > smem_optin
            and smem_bytes(cfg, fallback) <= smem_optin):
        return fallback
    return kernel


def smem_budget(cfg: AttentionConfig, gpu: GpuProfile, kernel: str = "teaching") -> SmemBudget:
    """Shared memory of one block of `kernel` on `gpu`: its parts (in the layout the build
    compiles to there, see fitting_layout), total, limit and blocks per SM."""
    parts = smem_parts(cfg, fitting_layout(cfg, kernel, gpu.smem_per_block_optin))
    total = sum(parts.values())
    fits = total <= gpu.smem_per_block_optin
    per_block = total + RESERVED_SMEM_PER_BLOCK
    blocks = min(gpu.smem_per_sm // per_block, gpu.max_blocks_per_sm) if fits else 0
    return SmemBudget(parts=parts, total=total, limit=gpu.smem_per_block_optin, fits=fits,
                      blocks_per_sm=int(blocks))


def naive_row_smem_bytes(cfg: AttentionConfig) -> int:
    """The naive softmax kernel's shared memory: one row of S in float32."""
    return 4 * cfg.seq_k


def naive_backward_row_smem_bytes(cfg: AttentionConfig) -> int:
    """The naive softmax-backward kernel's shared memory: one row of P and one of dP, in the
    input dtype."""
    return 2 * cfg.itemsize * cfg.seq_k


def largest_fitting_tiles(cfg: AttentionConfig, gpu: GpuProfile,
                          kernel: str = "teaching") -> list[tuple[int, int]]:
    """(block_q, block_k) pairs from the allowed sizes whose `kernel` layout fits, largest
    area first."""
    from .config import BLOCK_SIZES
    fit = [(bq, bk) for bq in BLOCK_SIZES for bk in BLOCK_SIZES
           if smem_budget(cfg.with_(block_q=bq, block_k=bk), gpu, kernel).fits]
    fit.sort(key=lambda t: (-t[0] * t[1], -t[0]))
    best = fit[0][0] * fit[0][1] if fit else 0
    return [t for t in fit if t[0] * t[1] == best]


def key_rows_per_query_tile(cfg: AttentionConfig) -> np.ndarray:
    """(Tr,) key rows that query tile i loads: those of the key tiles it processes
    (engine.model.tiles.seen_key_tiles), computed per row of tiles so that long sequences
    with small tiles stay cheap."""
    return np.minimum(seen_key_tiles(cfg) * cfg.block_k, cfg.seq_k).astype(np.int64)


@dataclass(frozen=True)
class HbmTraffic:
    read: int
    written: int
    parts: dict          # what -> bytes

    @property
    def total(self) -> int:
        return self.read + self.written


def naive_hbm(cfg: AttentionConfig) -> HbmTraffic:
    """Naive attention's compulsory traffic: S and P (input dtype) go through HBM.

    QKᵀ reads Q, K and writes S; the row softmax reads S, writes P and the row lse (float32);
    PV reads P, V and writes O. (Re-reads inside the matmuls are not counted.)
    """
    e, bh, d, nq, nk = cfg.itemsize, cfg.bh, cfg.head_dim, cfg.seq_q, cfg.seq_k
    qo, kv, s = bh * nq * d * e, bh * nk * d * e, bh * nq * nk * e
    lse = bh * nq * 4
    parts = {"read Q": qo, "read K": kv, "write S": s, "read S": s, "write P": s,
             "write lse": lse, "read P": s, "read V": kv, "write O": qo}
    read = qo + 2 * kv + 2 * s
    return HbmTraffic(read=read, written=2 * s + qo + lse, parts=parts)


def flash_hbm(cfg: AttentionConfig, trace: bool = False) -> HbmTraffic:
    """FA2 order: each query tile reads Q_i once and writes O_i and its lse once, and reads
    K_j, V_j for every key tile it processes (so K and V are read Tr times when not causal)."""
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    kv_rows = int(key_rows_per_query_tile(cfg).sum())     # key rows loaded, over all (i, j)
    qo = bh * cfg.seq_q * d * e
    o = bh * cfg.seq_q * d * cfg.io_itemsize              # FP8: e4m3 in, bfloat16 out
    kv = bh * kv_rows * d * e
    lse = bh * cfg.seq_q * 4
    parts = {"read Q": qo, "read K": kv, "read V": kv, "write O": o, "write lse": lse}
    written = o + lse
    if trace:
        tb = trace_array_bytes(cfg)
        parts["write trace"] = tb
        written += tb
    return HbmTraffic(read=qo + 2 * kv, written=written, parts=parts)


def fp8_scale_bytes(cfg: AttentionConfig) -> int:
    """The FP8 scales, float32: one per Q tile and per K and V tile of each (batch, head)."""
    return 4 * cfg.bh * (cfg.Tr + 2 * cfg.Tc)


def fp8_quantize_hbm(cfg: AttentionConfig) -> HbmTraffic:
    """The FP8 kernel's quantize pass before its forward (flash_hbm): it reads q, k, v in
    their 16-bit dtype and writes Q8, K8, V8 (1 byte an element; V8 transposed at no extra
    bytes) and the scales. Per-tile amax is found in the same pass (a tile's rows are read
    once); per-tensor scaling reads each tensor once more for its amax, counted here too."""
    bh, d, e = cfg.bh, cfg.head_dim, cfg.io_itemsize
    elems = {"Q": bh * cfg.seq_q * d, "K": bh * cfg.seq_k * d, "V": bh * cfg.seq_k * d}
    parts = {f"read {n}": x * e for n, x in elems.items()}
    if cfg.fp8_scaling == "tensor":
        parts |= {f"read {n} (amax)": x * e for n, x in elems.items()}
    parts |= {f"write {n}8": x for n, x in elems.items()}
    parts["write scales"] = fp8_scale_bytes(cfg)
    written = sum(elems.values()) + fp8_scale_bytes(cfg)
    return HbmTraffic(read=sum(parts.values()) - written, written=written, parts=parts)


def query_rows_per_key_tile(cfg: AttentionConfig) -> tuple[np.ndarray, np.ndarray]:
    """((Tr,) query rows of each query tile, (Tr,) key tiles each query tile processes), from
    engine.model.tiles."""
    return query_tile_sizes(cfg), seen_key_tiles(cfg)


def flash1_hbm(cfg: AttentionConfig) -> HbmTraffic:
    """FlashAttention-1's order (key tiles outer): O (input dtype), m and l (float32) are
    initialised in HBM; each key tile j loads K_j and V_j once; every processed tile (i, j)
    reads Q_i, O_i, m_i, l_i and writes O_i, m_i, l_i back. The final m and l stay in HBM for
    the backward (FA2 writes lse instead)."""
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    q_rows, tiles = query_rows_per_key_tile(cfg)
    rows = int((q_rows * tiles).sum())                 # query rows loaded, over all (i, j)
    kv_rows = min(int(tiles.max(initial=0)) * cfg.block_k, cfg.seq_k)   # key tiles anyone sees
    kv = bh * kv_rows * d * e
    tile_q = bh * rows * d * e
    stats = bh * rows * 8
    init = bh * cfg.seq_q * (d * e + 8)
    parts = {"write O, m, l (initialise)": init, "read K": kv, "read V": kv,
             "read Q_i": tile_q, "read O_i": tile_q, "read m_i, l_i": stats,
             "write O_i": tile_q, "write m_i, l_i": stats}
    return HbmTraffic(read=2 * kv + 2 * tile_q + stats, written=init + tile_q + stats,
                      parts=parts)


def placement(cfg: AttentionConfig) -> list[tuple[str, str, str, int]]:
    """(algorithm, array, where it lives, bytes) for this config: naive attention keeps the
    whole S and P (input dtype, all batch·heads) in HBM; FlashAttention keeps only Q, K, V, O
    and lse there and one tile of each of the rest on chip, per thread block — the teaching
    kernel every tile in shared memory (smem_parts), the tensor-core kernel Q_i and the
    double-buffered K_j, V_j in shared memory (the mma.sync layout) and S_ij, O_i, m_i, l_i in
    float32 registers."""
    e, bh, nq, nk, d = cfg.itemsize, cfg.bh, cfg.seq_q, cfg.seq_k, cfg.head_dim
    Br, Bc = cfg.block_q, cfg.block_k
    qkvo = bh * (2 * nq + 2 * nk) * d * e
    naive, teach = "naive", FAMILIES["teaching"].chart_name
    tc = BY_KEY["mma.sync"].chart_name
    rows = [(naive, "S = QKᵀ (all of it)", "HBM", bh * nq * nk * e),
            (naive, "P = softmax(S) (all of it)", "HBM", bh * nq * nk * e),
            (naive, "Q, K, V, O", "HBM", qkvo),
            (teach, "Q, K, V, O, lse", "HBM", qkvo + 4 * bh * nq)]
    rows += [(teach, f"{name} (one thread block)", "shared memory", n)
             for name, n in smem_parts(cfg, "teaching").items()]
    rows += [(tc, f"{name} (one thread block)", "shared memory", n)
             for name, n in smem_parts(cfg, "mma.sync").items()]
    rows += [(tc, "S_ij (one thread block)", "registers", Br * Bc * 4),
             (tc, "O_i (one thread block)", "registers", Br * d * 4),
             (tc, "m_i, l_i (one thread block)", "registers", 2 * Br * 4)]
    return rows


def paper_theta_bytes(cfg: AttentionConfig, gpu: GpuProfile) -> dict:
    """The paper's asymptotic HBM accesses, in bytes: Θ(N·d + N²) naive and Θ(N²·d²/M) flash
    (M = shared memory per SM in elements). Orders of magnitude, constants dropped."""
    e, bh, d, nq, nk = cfg.itemsize, cfg.bh, cfg.head_dim, cfg.seq_q, cfg.seq_k
    M = gpu.smem_per_sm / e
    return {"naive": bh * (nq * d + nq * nk) * e,
            "flash": bh * nq * nk * d * d / M * e,
            "M_elements": M}


def compulsory_bytes(cfg: AttentionConfig, algorithm: str, trace: bool = False,
                     direction: str = "forward", quantize: bool = True) -> int:
    """Bytes any implementation must move through device memory (the timing ceilings' check):
    naive reads and writes S and P (naive_hbm); flash reads Q, K, V once and writes O and
    lse, and with the trace also the four trace arrays and the per-block schedule records;
    FP8 with its quantize pass (fp8_quantize_hbm), or without it (quantize=False: the
    attention kernel alone, as the GPU timings time it). direction="backward": see
    backward_compulsory_bytes."""
    if direction == "backward":
        return backward_compulsory_bytes(cfg, algorithm, trace)
    if algorithm == "naive":
        return naive_hbm(cfg).total
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    # Q, K, V read once, O (FP8: in bfloat16, io_itemsize) and lse written once
    total = (bh * (cfg.seq_q + 2 * cfg.seq_k) * d * e + bh * cfg.seq_q * d * cfg.io_itemsize
             + 4 * bh * cfg.seq_q)
    if cfg.is_fp8 and quantize:
        total += fp8_quantize_hbm(cfg).total
    if trace:
        total += trace_array_bytes(cfg) + SCHEDULE_RECORD_BYTES * bh * cfg.Tr
    return total


def qkv_elements(cfg: AttentionConfig) -> int:
    return cfg.bh * (cfg.seq_q + 2 * cfg.seq_k) * cfg.head_dim


def trace_array_bytes(cfg: AttentionConfig) -> int:
    """The four float32 trace arrays, each (B, H, seq_q, Tc), as a kernel writes them."""
    return 4 * 4 * cfg.bh * cfg.seq_q * cfg.Tc


def trace_bytes(cfg: AttentionConfig) -> int:
    """A traced result: the four arrays plus the (Tr, Tc) processed map."""
    return trace_array_bytes(cfg) + cfg.Tr * cfg.Tc


def naive_bytes(cfg: AttentionConfig) -> int:
    """S and P, each B·H·seq_q·seq_k float32 (the CPU emulation's precision)."""
    return 2 * 4 * cfg.bh * cfg.seq_q * cfg.seq_k


def peak_memory(cfg: AttentionConfig, algorithm: str, trace: bool = False,
                direction: str = "forward") -> int:
    """Device bytes held at the peak: inputs, output, lse, and S and P (naive) or the trace.
    direction="backward": see backward_peak_memory."""
    if direction == "backward":
        return backward_peak_memory(cfg, algorithm, trace)
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    base = bh * (2 * cfg.seq_q + 2 * cfg.seq_k) * d * e + bh * cfg.seq_q * 4
    if cfg.is_fp8:          # q, k, v and O in bfloat16 beside Q8, K8, V8 and the scales
        base = (bh * (2 * cfg.seq_q + 2 * cfg.seq_k) * d * cfg.io_itemsize
                + bh * (cfg.seq_q + 2 * cfg.seq_k) * d * e + fp8_scale_bytes(cfg)
                + bh * cfg.seq_q * 4)
    if algorithm == "naive":
        return base + 2 * bh * cfg.seq_q * cfg.seq_k * e
    if trace:
        base += trace_bytes(cfg)
    return base


# N×N matrices (input dtype) the naive backward moves through HBM: dV = Pᵀ dO reads P; dP = dO Vᵀ
# writes dP; the fused kernel reads P and dP and writes dS; dQ = dS K and dK = dSᵀ Q read dS.
NAIVE_BACKWARD_NN_PASSES = 7


def backward_trace_array_bytes(cfg: AttentionConfig) -> int:
    """The four float32 backward trace arrays: p_rowsum and dq_norm (B, H, seq_q, Tc), dk_norm
    and dv_norm (B, H, seq_k, Tr)."""
    return 4 * cfg.bh * (2 * cfg.seq_q * cfg.Tc + 2 * cfg.seq_k * cfg.Tr)


def dq_part_bytes(cfg: AttentionConfig) -> int:
    """The GPU teaching backward's traced dQ parts, (B·H, seq_q, Tc, d) float32: what key tile j
    added to each dQ row, from which dq_norm is summed in key-tile order."""
    return 4 * cfg.bh * cfg.seq_q * cfg.Tc * cfg.head_dim


def backward_compulsory_bytes(cfg: AttentionConfig, algorithm: str, trace: bool = False) -> int:
    """Bytes any backward must move: read Q, K, V, O, dO and lse, write dQ, dK and dV; naive
    also moves P, dP and dS (NAIVE_BACKWARD_NN_PASSES); the traced flash kernel also writes the
    trace, its dQ parts and the per-block schedule records."""
    e, bh, d, nq, nk = cfg.itemsize, cfg.bh, cfg.head_dim, cfg.seq_q, cfg.seq_k
    total = bh * (4 * nq + 4 * nk) * d * e + 4 * bh * nq
    if algorithm == "naive":
        return total + NAIVE_BACKWARD_NN_PASSES * bh * nq * nk * e
    if trace:
        total += (backward_trace_array_bytes(cfg) + dq_part_bytes(cfg)
                  + SCHEDULE_RECORD_BYTES * bh * cfg.Tc)
    return total


def backward_peak_memory(cfg: AttentionConfig, algorithm: str, trace: bool = False) -> int:
    """Device bytes the GPU backward holds at its peak: Q, K, V, O, dO, dQ, dK, dV (input dtype),
    lse and D (float32); naive adds P, dP and dS (input dtype; the forward's S is freed first);
    flash adds the float32 dQ accumulator and, traced, the trace, the (Tr, Tc) map, the dQ
    parts and one temporary of their size while dq_norm is summed, and the schedule records."""
    e, bh, d, nq, nk = cfg.itemsize, cfg.bh, cfg.head_dim, cfg.seq_q, cfg.seq_k
    base = bh * (4 * nq + 4 * nk) * d * e + 2 * 4 * bh * nq
    if algorithm == "naive":
        return base + 3 * bh * nq * nk * e
    base += 4 * bh * nq * d
    if trace:
        base += (backward_trace_array_bytes(cfg) + cfg.Tr * cfg.Tc + 2 * dq_part_bytes(cfg)
                 + SCHEDULE_RECORD_BYTES * bh * cfg.Tc)
    return base


def naive_backward_bytes(cfg: AttentionConfig) -> int:
    """The N×N float32 matrices the naive backward holds at once: P, dP and dS
    (checked against the naive_bytes limit; flash backward never holds them)."""
    return 3 * 4 * cfg.bh * cfg.seq_q * cfg.seq_k


def backward_trace_bytes(cfg: AttentionConfig) -> int:
    """What the traced flash backward adds to an untraced one: the four trace arrays and the
    per-key-tile dQ parts the GPU kernel writes so that dq_norm follows key-tile order
    (checked against the trace_bytes limit)."""
    return backward_trace_array_bytes(cfg) + dq_part_bytes(cfg)


def naive_backward_hbm(cfg: AttentionConfig) -> HbmTraffic:
    """Naive backward's compulsory traffic (input dtype): the forward's P is read back for
    dV = Pᵀ dO; dP = dO Vᵀ is written; the fused kernel reads P and dP and writes dS;
    dQ = dS K and dK = dSᵀ Q each read dS. Q, K, V, O, dO are read and dQ, dK, dV written
    once (re-reads inside the matrix products are not counted)."""
    e, bh, d, nq, nk = cfg.itemsize, cfg.bh, cfg.head_dim, cfg.seq_q, cfg.seq_k
    qo, kv, s = bh * nq * d * e, bh * nk * d * e, bh * nq * nk * e
    parts = {"read Q": qo, "read K": kv, "read V": kv, "read O": qo, "read dO": qo,
             "read P (dV)": s, "write dP": s, "read P, dP": 2 * s, "write dS": s,
             "read dS (dQ)": s, "read dS (dK)": s,
             "write dQ": qo, "write dK": kv, "write dV": kv}
    read = 3 * qo + 2 * kv + 5 * s
    return HbmTraffic(read=read, written=qo + 2 * kv + 2 * s, parts=parts)


def flash_backward_hbm(cfg: AttentionConfig) -> HbmTraffic:
    """FA2 backward order: one block per key tile j reads K_j, V_j once and writes dK_j, dV_j
    once; for every query tile i it processes it reads Q_i, dO_i, lse_i and D_i and adds its
    part of dQ_i into a float32 accumulator in HBM (read and written once per tile, as
    atomics do). D = rowsum(dO ∘ O) is a first pass over dO and O."""
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    q_rows, tiles_of_row = query_rows_per_key_tile(cfg)   # key tiles query tile i meets
    rows = int((q_rows * tiles_of_row).sum())          # query rows loaded, over all (i, j)
    kv = bh * cfg.seq_k * d * e
    qo = bh * cfg.seq_q * d * e
    stream = bh * rows * d * e                         # Q_i or dO_i, once per processed tile
    acc = bh * rows * d * 4                            # float32 dQ accumulator, per tile
    vec = bh * rows * 4                                # lse_i or D_i, per tile
    parts = {"read O, dO (D)": 2 * qo, "write D": bh * cfg.seq_q * 4,
             "read K": kv, "read V": kv, "read Q_i": stream, "read dO_i": stream,
             "read lse_i": vec, "read D_i": vec, "read dQ acc": acc, "write dQ acc": acc,
             "write dK": kv, "write dV": kv, "read dQ acc (cast)": bh * cfg.seq_q * d * 4,
             "write dQ": qo}
    read = (2 * qo + 2 * kv + 2 * stream + 2 * vec + acc + bh * cfg.seq_q * d * 4)
    written = bh * cfg.seq_q * 4 + acc + 2 * kv + qo
    return HbmTraffic(read=read, written=written, parts=parts)


# ---- decoding (engine.run_decode): one step of seq_q tokens against a KV cache -----------
def decode_kv_bytes(cfg: DecodeConfig) -> int:
    """K and V bytes one decode step reads: every cached key and value of every KV head of
    every sequence, once (a thread block serves all query heads of its KV head group, and the
    seq_q tokens share the read), 2 · B · kv_heads · seq_k · d · itemsize. Padding rows of a
    ragged last page are never read."""
    return 2 * cfg.batch * cfg.kv_heads * cfg.seq_k * cfg.head_dim * cfg.itemsize


def decode_bytes_per_token(cfg: DecodeConfig) -> float:
    """K and V bytes read per generated token: decode_kv_bytes / (batch · seq_q)."""
    return decode_kv_bytes(cfg) / (cfg.batch * cfg.seq_q)


def decode_floor_ms(cfg: DecodeConfig, bytes_per_s: float) -> float:
    """The HBM bandwidth floor of a decode step: its K and V bytes at bytes_per_s."""
    return decode_kv_bytes(cfg) / bytes_per_s * 1e3


def decode_partial_bytes(cfg: DecodeConfig, num_splits: int) -> int:
    """The split kernel's float32 partials, O_s (d values), m_s and l_s per query row and
    split: 4 · B · H · seq_q · S · (d + 2)."""
    return 4 * cfg.batch * cfg.heads * cfg.seq_q * num_splits * (cfg.head_dim + 2)


def decode_hbm(cfg: DecodeConfig, num_splits: int) -> HbmTraffic:
    """A decode step's HBM traffic: the split kernel reads Q, K, V (and the block table when
    paged) and writes the partials; its merging blocks read them and write O and lse."""
    q = cfg.batch * cfg.heads * cfg.seq_q * cfg.head_dim * cfg.itemsize
    kv = decode_kv_bytes(cfg) // 2
    part = decode_partial_bytes(cfg, num_splits)
    lse = 4 * cfg.batch * cfg.heads * cfg.seq_q
    table = 4 * cfg.num_pages
    parts = {"read Q": q, "read K": kv, "read V": kv, "write partials": part,
             "read partials": part, "write O": q, "write lse": lse}
    if cfg.paged:
        parts["read block table"] = table
    return HbmTraffic(read=q + 2 * kv + part + (table if cfg.paged else 0),
                      written=part + q + lse, parts=parts)


def decode_model_ms(cfg: DecodeConfig, num_splits: int, gpu: GpuProfile) -> float:
    """A model of a decode step's time (not a measurement): its HBM bytes (decode_hbm) at the
    datasheet bandwidth, when every SM draws at most its own share of it, so that B · kv_heads
    · num_splits thread blocks on fewer SMs than the GPU has leave the rest of it unused."""
    busy = min(1.0, cfg.batch * cfg.kv_heads * num_splits / gpu.sms)
    return decode_hbm(cfg, num_splits).total / (gpu.hbm_gbps * 1e9 * busy) * 1e3


def decode_smem_parts(cfg: DecodeConfig, threads: int = 128, tma: bool = False) -> dict:
    """Dynamic shared memory of one block of the split kernel (kernels/decode/flash_decode.cu), in
    its order: K_j and V_j, DECODE_STAGES buffers each of Bc rows (input dtype), padded by 16
    bytes, or unpadded and from a 1024-byte boundary when the copy engine brings them (tma,
    decode_config.decode_tma); Q_i, P_ij (Bc keys × rows), O_acc (float32); each warp's m and l
    per row, and the block's; with tma, an mbarrier per stage and warp."""
    from .decode_config import DECODE_STAGES, decode_block_k
    Bc, d, e, rows = decode_block_k(cfg.head_dim), cfg.head_dim, cfg.itemsize, cfg.rows
    stages, warps = DECODE_STAGES, threads // 32
    ring = stages * Bc * (d if tma else d + 16 // e) * e
    parts = {"alignment to 1024 bytes": 1024} if tma else {}
    parts.update({f"K_j ({stages} stages)": ring, f"V_j ({stages} stages)": ring,
                  "Q_i": rows * d * 4, "P_ij": Bc * rows * 4, "O_acc": rows * d * 4,
                  "m, l per warp and block": 2 * (warps + 1) * rows * 4})
    if tma:
        parts["mbarriers"] = 8 * stages * warps
    return parts


def decode_elements(cfg: DecodeConfig) -> int:
    """Elements of q and of the two caches (with a paged cache's padding rows)."""
    cache = 1
    for n in cfg.cache_shape:
        cache *= n
    return cfg.batch * cfg.heads * cfg.seq_q * cfg.head_dim + 2 * cache


def decode_trace_bytes(cfg: DecodeConfig, num_splits: int) -> int:
    """The decode trace: split_max, split_sum, rescale (S values per row), split_out (S · d)
    and m_final, l_final, float32: 4 · B · H · seq_q · (S · (d + 3) + 2)."""
    return 4 * cfg.batch * cfg.heads * cfg.seq_q * (num_splits * (cfg.head_dim + 3) + 2)


def decode_peak_memory(cfg: DecodeConfig, num_splits: int, trace: bool = False) -> int:
    """Device bytes a decode step holds: q, both caches, O, lse, the partials, the block table,
    the kernel's counters (one int32 per sequence and KV head) and, traced, the merge's trace
    arrays."""
    rows = cfg.batch * cfg.heads * cfg.seq_q
    held = (decode_elements(cfg) * cfg.itemsize + rows * cfg.head_dim * cfg.itemsize + 4 * rows
            + decode_partial_bytes(cfg, num_splits) + 4 * cfg.num_pages
            + 4 * cfg.batch * cfg.kv_heads)
    return held + (4 * rows * (num_splits + 2) if trace else 0)

