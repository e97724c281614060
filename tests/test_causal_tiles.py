"""The kernels' tile rules (kernels/include/causal_tiles.cuh) are engine.model.tiles' rules:
the header compiled on the host with g++ over a table of shapes (ragged tiles, seq_q below
and above seq_k, key tiles that start past the last query row), and no kernel source keeps
tile arithmetic of its own."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from engine.model import tiles
from engine.model.config import AttentionConfig
from kernels.loader import INCLUDE_DIR, KERNEL_DIR, source_names

HEADER = INCLUDE_DIR / "causal_tiles.cuh"
GXX = shutil.which("g++")
if GXX is None and os.environ.get("FA_LAB_REQUIRE_NVCC") == "1":
    raise RuntimeError("FA_LAB_REQUIRE_NVCC=1 but g++ is not on PATH: the tile-rule test "
                       "cannot run.")

# (seq_q, seq_k, Br, Bc); each runs causal and not.
SHAPES = [
    (256, 256, 64, 64),      # even tiles, square
    (100, 100, 64, 32),      # ragged last tiles on both sides
    (1, 1, 8, 8),            # one row, one key
    (60, 200, 128, 64),      # seq_q < seq_k: key tiles 1 .. 3 start at or past seq_q
    (100, 300, 64, 16),      # seq_q < seq_k, ragged: key tile 7 starts at 112 >= 100, within
                             # query tile 1's rows had it not been ragged
    (300, 100, 32, 64),      # seq_q > seq_k: late query tiles see every key tile
    (129, 129, 128, 128),    # a last query tile of one row
    (127, 513, 16, 128),     # Bc > Br
    (513, 127, 128, 8),      # Br > Bc
    (64, 1000, 64, 64),      # one query tile, most key tiles unseen
    (4096, 4096, 128, 32),
]
CASES = [(*s, causal) for s in SHAPES for causal in (False, True)]

PROGRAM = r"""
#include <cstdio>
#include "causal_tiles.cuh"
int main() {
    int seq_q, seq_k, Br, Bc, causal;
    while (std::scanf("%d %d %d %d %d", &seq_q, &seq_k, &Br, &Bc, &causal) == 5) {
        const int Tr = tile_count(seq_q, Br), Tc = tile_count(seq_k, Bc);
        std::printf("%d %d |", Tr, Tc);
        for (int i = 0; i < Tr; ++i) std::printf(" %d", seen_key_tiles(i, Br, Bc, seq_q, Tc, causal));
        std::printf(" |");
        for (int j = 0; j < Tc; ++j) std::printf(" %d", first_query_tile(j, Br, Bc, seq_q, Tr, causal));
        std::printf(" |");
        for (int i = 0; i < Tr; ++i) std::printf(" %d", tile_rows(i, Br, seq_q));
        std::printf(" |");
        for (int j = 0; j < Tc; ++j) std::printf(" %d", tile_rows(j, Bc, seq_k));
        std::printf("\n");
    }
}
"""


@pytest.fixture(scope="module")
def header_rules(tmp_path_factory):
    """{case: (Tr, Tc, seen, first, query rows, key rows)} from the header, run on the host."""
    if GXX is None:
        pytest.skip("g++ is not installed here")
    folder = tmp_path_factory.mktemp("causal_tiles")
    (folder / "rules.cpp").write_text(PROGRAM)
    built = subprocess.run([GXX, "-x", "c++", "-std=c++17", "-Wall", "-Werror",
                            f"-I{INCLUDE_DIR}", str(folder / "rules.cpp"), "-o",
                            str(folder / "rules")], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    table = "".join(f"{q} {k} {br} {bc} {int(c)}\n" for q, k, br, bc, c in CASES)
    ran = subprocess.run([str(folder / "rules")], input=table, capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert len(lines) == len(CASES)
    out = {}
    for case, line in zip(CASES, lines):
        head, *lists = line.split("|")
        out[case] = (*map(int, head.split()), *([int(x) for x in part.split()] for part in lists))
    return out


@pytest.mark.parametrize("case", CASES, ids=[f"q{q}-k{k}-{br}x{bc}-{'causal' if c else 'full'}"
                                             for q, k, br, bc, c in CASES])
def test_header_rules_are_the_tile_model(header_rules, case):
    seq_q, seq_k, br, bc, causal = case
    cfg = AttentionConfig(seq_q=seq_q, seq_k=seq_k, block_q=br, block_k=bc, causal=causal)
    Tr, Tc, seen, first, q_rows, k_rows = header_rules[case]
    assert (Tr, Tc) == (cfg.Tr, cfg.Tc)
    assert seen == tiles.seen_key_tiles(cfg).tolist()
    assert first == tiles.first_query_tile(cfg).tolist()
    assert q_rows == tiles.query_tile_sizes(cfg).tolist()
    starts = np.arange(cfg.Tc) * bc
    assert k_rows == (tiles.key_tile_ends(cfg) - starts).tolist()


def test_the_table_holds_key_tiles_no_query_row_sees():
    """The cases the backward kernels once ran as fully masked tiles: a key tile starting at
    or past seq_q, inside the rows of a ragged last query tile."""
    cases = [c for c in CASES if c[4] and any(
        j * c[3] >= c[0] and j * c[3] < -(-c[0] // c[2]) * c[2] for j in range(-(-c[1] // c[3])))]
    assert cases


# Tile arithmetic a kernel would need only if it computed the causal rule itself: the first
# query tile as k0 / Br (or j·Bc / Br), the key tiles seen as last_row / Bc + 1.
OWN_RULE = re.compile(r"\bk0\s*/\s*(Br|BLOCK_Q)\b|\*\s*(Bc|BLOCK_K)\s*\)?\s*/\s*(Br|BLOCK_Q)\b"
                      r"|/\s*(Bc|BLOCK_K)\s*\+\s*1\b")


def kernel_files():
    return [*source_names(), *(p.relative_to(KERNEL_DIR).as_posix()
                               for p in KERNEL_DIR.rglob("*.cuh"))]


@pytest.mark.parametrize("name", kernel_files())
def test_no_kernel_keeps_its_own_causal_tile_rule(name):
    if name == "include/causal_tiles.cuh":
        return
    text = (KERNEL_DIR / name).read_text()
    code = re.sub(r"//[^\n]*", "", text)            # comments may describe the rule
    assert not OWN_RULE.search(code), (name, OWN_RULE.search(code).group(0))


def test_the_rule_check_sees_a_rule():
    assert OWN_RULE.search("const int i_first = causal ? k0 / Br : 0;")
    assert OWN_RULE.search("min(Tc, last_row / Bc + 1)")
    assert not OWN_RULE.search("first_query_tile(j, Br, Bc, seq_q, Tr, causal)")
