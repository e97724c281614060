"""The floating-point formats the Precision lesson compares (float32, float16, bfloat16, FP8
e4m3 and e5m2): their facts read from NumPy's and ml_dtypes' finfo, never typed in, and the
NumPy type that holds each. Pure.

"float8_e4m3" is the project's name of OCP FP8 E4M3 as tensor cores implement it: finite
(no infinities, one NaN pattern), max 448, which ml_dtypes calls float8_e4m3fn. Its
`float8_e4m3` is another format (IEEE-like, max 240): never take the NumPy type from the
project's name, take it from here (numpy_type).
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

# name -> the NumPy scalar type holding it
NUMPY_TYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
FORMATS = tuple(NUMPY_TYPES)


@dataclass(frozen=True)
class NumberFormat:
    name: str                   # "float8_e4m3"
    bits: int                   # storage bits
    exponent_bits: int
    mantissa_bits: int          # stored fraction bits (the leading 1 not counted)
    max: float                  # the largest finite value
    smallest_normal: float
    smallest_subnormal: float
    epsilon: float              # the gap from 1 to the next value, 2^-mantissa_bits
    has_inf: bool               # whether the format holds ±inf (e4m3 saturates instead)

    @property
    def significant_bits(self) -> int:
        """Bits of precision: the stored fraction plus the implicit leading 1."""
        return self.mantissa_bits + 1

    @property
    def unit_roundoff(self) -> float:
        """The largest relative error of one round-to-nearest: epsilon / 2."""
        return self.epsilon / 2


def numpy_type(name: str):
    """The NumPy scalar type of a format (ValueError naming every format otherwise)."""
    try:
        return NUMPY_TYPES[name]
    except KeyError:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {name!r}.") from None


def number_format(name: str) -> NumberFormat:
    """The facts of one format, from its finfo."""
    t = numpy_type(name)
    f = ml_dtypes.finfo(t)
    has_inf = bool(np.isinf(np.array(np.inf, dtype=np.float32).astype(t)))
    return NumberFormat(name=name, bits=int(f.bits), exponent_bits=int(f.nexp),
                        mantissa_bits=int(f.nmant), max=float(f.max),
                        smallest_normal=float(f.smallest_normal),
                        smallest_subnormal=float(f.smallest_subnormal), epsilon=float(f.eps),
                        has_inf=has_inf)


def number_formats() -> list[NumberFormat]:
    """Every format of FORMATS, widest first."""
    return [number_format(n) for n in FORMATS]


def finite_values(name: str) -> np.ndarray:
    """Every finite value of an 8-bit format, ascending, float64 (all 256 bit patterns read
    through the format's type)."""
    t = numpy_type(name)
    if ml_dtypes.finfo(t).bits != 8:
        raise ValueError(f"finite_values lists 8-bit formats only; got {name!r}.")
    values = np.arange(256, dtype=np.uint8).view(t).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def saturation_bound(name: str) -> float:
    """The magnitude above which rounding to nearest (ties to even) would leave the format's
    finite range: max plus half the step below max. A saturating cast clamps what lies above
    it; what lies between max and it rounds to max in any case."""
    finite = finite_values(name)
    return float(finite[-1] + (finite[-1] - finite[-2]) / 2)


E4M3_MAX = number_format("float8_e4m3").max        # 448: the FP8 scales map amax to it
E4M3_SATURATES_ABOVE = saturation_bound("float8_e4m3")   # 464
