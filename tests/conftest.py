import pytest

from seeds import FUZZING, SEED

# Hypothesis draws its examples at random unless told otherwise; the unit suite must give the
# same verdict on every run, so its examples are fixed (derandomized) and no example database
# replays earlier failures from this machine's history. The fuzzing run (FA_LAB_TEST_SEED=random)
# draws fresh examples; a failure prints the example and the @seed that reproduces it.
# (A GPU machine's own Python may lack Hypothesis: the gpu-marked tests do not use it.)
try:
    from hypothesis import settings
except ImportError:
    settings = None
if settings is not None:
    settings.register_profile("fixed", derandomize=True, database=None, print_blob=True)
    settings.register_profile("fuzz", derandomize=False, database=None, print_blob=True)
    settings.load_profile("fuzz" if FUZZING else "fixed")


def pytest_collection_modifyitems(config, items):
    """`gpu`-marked tests run only where CuPy finds a usable GPU."""
    if not any("gpu" in item.keywords for item in items):
        return
    from engine.devices import probe_gpu
    usable, reason = probe_gpu()
    if usable:
        return
    skip = pytest.mark.skip(reason=f"no usable GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    how = ("FA_LAB_TEST_SEED=random: a fresh seed and fresh Hypothesis examples (replay with "
           f"FA_LAB_TEST_SEED={SEED})" if FUZZING else
           "fixed; FA_LAB_TEST_SEED=<n> for another, =random for the fuzzing run")
    return f"random inputs: seed {SEED} ({how})"


def pytest_terminal_summary(terminalreporter):
    """The seed again at the end, where -q (which hides the header) still shows it."""
    terminalreporter.write_line(pytest_report_header(None))
