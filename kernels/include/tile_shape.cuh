// The compile-time tile shape every tensor-core kernel of this folder takes (-D): HEAD_DIM (d),
// BLOCK_Q (Br), BLOCK_K (Bc), BF16 (0: float16 operands, the default; 1: bfloat16) and FP8
// (1: float8 e4m3 operands, the Hopper forward's FP8 build; 0, the default: 16-bit).
// Included first, before the kernel's own switches.
#ifndef FA_LAB_TILE_SHAPE_CUH
#define FA_LAB_TILE_SHAPE_CUH

#ifndef HEAD_DIM
#error "define HEAD_DIM"
#endif
#ifndef BLOCK_Q
#error "define BLOCK_Q"
#endif
#ifndef BLOCK_K
#error "define BLOCK_K"
#endif
#ifndef BF16
#define BF16 0
#endif
#ifndef FP8
#define FP8 0
#endif

#endif  // FA_LAB_TILE_SHAPE_CUH
