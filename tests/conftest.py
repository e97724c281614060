import pytest


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
    from seeds import SEED
    return f"random inputs: FA_LAB_TEST_SEED={SEED} (set it to replay this run)"
