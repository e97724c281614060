"""The kernel registry (engine.model.registry) against the files it names, the code that reads
kernel keys, and the PTX its sources use."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import engine
from engine.model import catalog, iomodel, registry
from engine.model.config import AttentionConfig

ROOT = Path(__file__).resolve().parent.parent
KERNEL_DIR = ROOT / "kernels"
ROWS = registry.KERNELS


def source(row) -> str:
    return (KERNEL_DIR / row.source).read_text()


def compiled_text(row) -> str:
    """The text the build compiles: its source with the headers it includes pasted in (the
    FP8 build's quantize kernel lives in hopper/fp8.cuh)."""
    from kernels.loader import read_source
    return read_source(row.source)


def test_keys_are_unique_and_directions_known():
    assert len({k.key for k in ROWS}) == len(ROWS)
    assert {k.direction for k in ROWS} <= set(registry.DIRECTIONS)


@pytest.mark.parametrize("row", ROWS, ids=lambda k: k.key)
def test_source_exists_and_defines_its_functions(row):
    text = compiled_text(row)
    for fn in row.functions:
        assert re.search(r"__global__[^;{]*?\b" + re.escape(fn) + r"\s*\(", text, re.S), fn


@pytest.mark.parametrize("row", ROWS, ids=lambda k: k.key)
def test_launcher_module_exists(row):
    path = ROOT / Path(*row.launcher.split("."))
    assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), row.launcher


@pytest.mark.parametrize("row", ROWS, ids=lambda k: k.key)
def test_compute_capability_floor_matches_the_source(row):
    """wgmma means Hopper; bfloat16 means Ampere or later in every build (the conversions of
    include/common.cuh); the rest runs from Turing, whose cp.async and m16n8k16 stand-ins
    (include/common.cuh) the compile tests build for sm_75."""
    from engine.model import arch
    text = source(row)
    if "wgmma" in text:
        assert row.min_cc >= 9.0 and row.hopper_only
    if "bfloat16" in row.dtypes:
        assert arch.min_cc(row, "bfloat16") >= 8.0
    if row.hopper_only:
        assert row.min_cc >= 9.0
    else:
        assert row.min_cc == arch.OLDEST_CC


def test_display_names_are_unique():
    labels = [k.label for k in ROWS]
    assert len(set(labels)) == len(labels)
    charts = [f.chart_name for f in registry.FAMILIES.values()] + [
        k.chart_name for k in ROWS if k.chart_name]
    assert len(set(charts)) == len(charts)
    names = list(registry.family_names().values())
    assert len(set(names)) == len(names)


def test_families_are_the_public_kernels_and_name_registered_builds():
    assert tuple(registry.FAMILIES) == engine.KERNELS
    for key, fam in registry.FAMILIES.items():
        for direction in ("forward", "backward"):
            rows = registry.builds(key, direction)
            assert rows and all(r.direction == direction and r.family == key for r in rows)
            assert sum(not r.hopper_only for r in rows) == 1    # one build runs everywhere
    assert {k.key for k in ROWS if k.family} == {
        b for f in registry.FAMILIES.values() for b in f.forward + f.backward}


def test_catalog_rows_are_registry_rows():
    assert catalog.MMA_SYNC is registry.BY_KEY["mma.sync"]
    assert catalog.TENSORCORE_BUILDS == (catalog.WGMMA, catalog.MMA_SYNC)
    assert catalog.BACKWARD_BUILDS == (catalog.BACKWARD_WGMMA, catalog.BACKWARD_MMA)
    assert catalog.DECODE.source == registry.BY_KEY["decode"].source


def test_every_smem_layout_is_an_iomodel_layout():
    cfg = AttentionConfig(seq_q=128, seq_k=128, head_dim=64, block_q=64, block_k=64,
                          dtype="float16")
    for key in registry.SMEM_LAYOUTS:
        assert iomodel.smem_bytes(cfg, key) > 0
    with pytest.raises(ValueError, match="backward wgmma"):
        iomodel.smem_bytes(cfg, "backward_wgmma")


# The keys the deleted tables used (display names of app/core/style.py,
# app/features/tile_sizes/data.py, app/core/controls.py, app/features/kernel/data.py, the compile
# facts and iomodel's layouts).
OLD_KEYS = ("teaching", "mma.sync", "wgmma", "naive_softmax", "backward teaching",
            "backward mma.sync", "backward wgmma", "naive_backward")


def test_former_table_keys_are_registry_keys():
    assert set(OLD_KEYS) <= set(registry.BY_KEY)
    assert set(registry.family_names()) == {"teaching", "tensorcore"}


def string_constants(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def test_no_other_spelling_of_a_key_in_app_or_engine():
    """A key spelt with an underscore ("backward_wgmma") or a hyphen appears nowhere as a
    string in app/ (its pages too) or engine/: one spelling each."""
    others = {v for k in registry.BY_KEY for v in (k.replace(" ", "_"), k.replace(" ", "-"),
                                                     k.replace(".", "_"))}
    others = (others | {"backward_mma"}) - set(registry.BY_KEY)   # the facts' former key
    files = [*ROOT.glob("app/**/*.py"), *ROOT.glob("engine/**/*.py")]
    assert ROOT / "app" / "features" / "kernel" / "page.py" in files
    found = {(str(p.relative_to(ROOT)), s) for p in files for s in string_constants(p)
             if s in others}
    assert not found, found
