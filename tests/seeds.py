"""The one random seed of a test session: fresh on every run, printed in pytest's header, and
set with FA_LAB_TEST_SEED=<n> to replay a failing run exactly."""
import os
import secrets

import numpy as np

SEED = int(os.environ.get("FA_LAB_TEST_SEED") or secrets.randbelow(2**31))


def rng(salt: int = 0) -> np.random.Generator:
    """A generator for one test module (salt keeps modules' streams apart)."""
    return np.random.default_rng([SEED, salt])
