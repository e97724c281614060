// The tile rules of every kernel: how many tiles a sequence makes, how long the ragged last
// one is, and which tiles the causal mask leaves to run. The same rules as
// engine/model/tiles.py (tests/test_causal_tiles.py compiles this header on the host and
// compares the two over a table of shapes); a kernel calls these and keeps no tile
// arithmetic of its own.
//
// Query tile i holds rows [i·Br, min((i+1)·Br, seq_q)), key tile j keys [j·Bc, min((j+1)·Bc,
// seq_k)). Causal (top-left aligned): key c is visible to query r iff c <= r, so query tile
// i sees key tile j iff j·Bc <= its last row. Forward (one block per query tile): the key
// tiles 0 .. seen_key_tiles(i) - 1 run. Backward (one block per key tile): the query tiles
// first_query_tile(j) .. Tr - 1 run, none (Tr) when key tile j starts at or past seq_q.
// Without the mask every tile sees every tile.
//
// __host__ __device__ and inline, so that a kernel's compile-time Br and Bc fold into the
// divisions; on a host compiler (no __CUDACC__) plain inline C++.
#ifndef FA_LAB_CAUSAL_TILES_CUH
#define FA_LAB_CAUSAL_TILES_CUH

#ifdef __CUDACC__
#define TILE_RULE __host__ __device__ __forceinline__
#else
#define TILE_RULE inline
#endif

// Tiles of `size` rows that cover n rows (Tr = tile_count(seq_q, Br), Tc = tile_count(seq_k, Bc)).
TILE_RULE int tile_count(int n, int size) { return (n + size - 1) / size; }

// Rows of tile t of `size` rows over n rows: `size`, or fewer in a ragged last tile.
TILE_RULE int tile_rows(int t, int size, int n) {
    const int left = n - t * size;
    return left < size ? left : size;
}

// Key tiles query tile i runs, the tiles 0 .. seen_key_tiles - 1 (forward view).
TILE_RULE int seen_key_tiles(int i, int Br, int Bc, int seq_q, int Tc, int causal) {
    if (!causal) return Tc;
    const int end = (i + 1) * Br < seq_q ? (i + 1) * Br : seq_q;   // one past its last row
    const int seen = (end - 1) / Bc + 1;                           // tiles that start <= it
    return seen < Tc ? seen : Tc;
}

// The first query tile that sees key tile j; the tiles from there to Tr - 1 run it
// (backward view). Tr where none does: the tile starts at or past the last query row.
TILE_RULE int first_query_tile(int j, int Br, int Bc, int seq_q, int Tr, int causal) {
    if (!causal) return 0;
    const int k0 = j * Bc;                                         // its first key
    return k0 < seq_q ? k0 / Br : Tr;
}

#undef TILE_RULE
#endif  // FA_LAB_CAUSAL_TILES_CUH
