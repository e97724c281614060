"""Who writes O: FlashAttention-2's split-Q (each warp owns rows of the query tile, so it owns
the same rows of S_ij, P_ij and O_i and writes them alone) against FlashAttention-1's split-K
(each warp owns keys of K_j, V_j, so each holds a partial O_i for every row, and the warps
must add theirs up through shared memory after every key tile). Pure functions, and the
kernel lines that show this project's kernels are split-Q, found by what they say (not by
line numbers)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

KERNEL_DIR = Path(__file__).resolve().parents[3] / "kernels"
GROUP = 16          # rows (or keys, or columns of d) per cell of the ownership grid
FLOAT_BYTES = 4


def ownership(br: int, bc: int, d: int, warps: int) -> pd.DataFrame:
    """One row per 16×16 cell of S_ij (Br × Bc) and of O_i (Br × d) in each scheme: which
    warp computes it (split-Q: the warp of the cell's query rows; split-K: of its keys) and
    which warps write that cell of O_i (split-Q one; split-K all of them, summed)."""
    rows = []
    for scheme in ("FA2: split-Q", "FA1: split-K"):
        by_q = scheme.endswith("split-Q")
        for matrix, cols in (("S_ij = Q_i K_jᵀ", bc), ("O_i", d)):
            for r in range(max(br // GROUP, 1)):
                for c in range(max(cols // GROUP, 1)):
                    if by_q:
                        owner = f"warp {r * warps // max(br // GROUP, 1)}"
                    elif matrix == "O_i":
                        owner = f"warps 0–{warps - 1}, summed"
                    else:
                        owner = f"warp {c * warps // max(cols // GROUP, 1)}"
                    rows.append((scheme, matrix, r * GROUP, c * GROUP, owner))
    return pd.DataFrame(rows, columns=["scheme", "matrix", "row", "col", "owner"])


def exchange(br: int, d: int, warps: int) -> dict:
    """Per key tile, what the warps of one block exchange through shared memory to keep O_i:
    split-Q nothing (a row's max and sum live in one warp's lanes, shuffles suffice);
    split-K every warp's partial O_i (Br × d floats) and its row max and row sum (Br each),
    written, then read back and summed after a __syncthreads."""
    partial = warps * (br * d + 2 * br) * FLOAT_BYTES
    return {"split-Q": 0, "split-K": 2 * partial}


@dataclass(frozen=True)
class Citation:
    path: str        # under kernels/
    says: str        # the words searched for
    line: int        # 1-based, found now
    text: str        # the line as it stands
    shows: str = ""  # what it shows


# (file under kernels/, words on the line, what the line shows): each kernel is split-Q, and
# the backward's dQ is what a split over keys costs
MARKERS = (
    ("teaching/flash_teaching.cu", "one thread block owns one query",
     "the teaching kernel: one block per query tile, so no other block writes its O_i"),
    ("teaching/flash_teaching.cu", "for (int r = warp; r < q_rows; r += NUM_WARPS)",
     "inside it, a row's softmax is one warp's: no other warp touches the row's m_i, l_i"),
    ("ampere/flash_tensorcore.cu", "Each warp owns Br / 4 query rows of Q_i",
     "the mma.sync kernel: split-Q over 4 warps"),
    ("ampere/flash_tensorcore.cu", "const int warp_row0 = warp * WARP_ROWS;",
     "a warp's first query row, from which it writes its own rows of O_i"),
    ("hopper/flash_wgmma.cu", "each owns 64 query rows of Q_i",
     "the wgmma kernel: split-Q over 2 consumer warpgroups"),
    ("ampere/flash_backward_mma.cu", "dQ_i needs every warp's keys",
     "the backward splits keys over warps (dK_j, dV_j stay in registers), so its dQ_i, "
     "summed over keys, needs the exchange split-K pays for O_i"),
)


def cite(path: str, says: str, directory: Path = KERNEL_DIR, shows: str = ""
         ) -> Citation | None:
    """The first line of kernels/<path> that contains `says`; None when none does (or the
    file is absent)."""
    try:
        lines = (directory / path).read_text().splitlines()
    except OSError:
        return None
    for n, line in enumerate(lines, 1):
        if says in line:
            return Citation(path, says, n, line.strip(), shows)
    return None


def citations(directory: Path = KERNEL_DIR) -> list[Citation]:
    """Every MARKERS line found, in order (a marker the source no longer says is left out)."""
    return [c for p, s, w in MARKERS if (c := cite(p, s, directory, w)) is not None]
