"""kernels/loader.py: the sources by their paths under kernels/, and the recursive paste of
their quoted includes (nested, each file once, a cycle ended, a missing header named with the
file that includes it)."""
from __future__ import annotations

import pytest

from engine.model import registry
from kernels.loader import (INCLUDE_DIR, KERNEL_DIR, KernelCompileError, QUOTED_INCLUDE,
                            expand_includes, read_source, source_names, source_path)


def tree(root, files: dict):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_nested_includes_are_pasted_beside_the_file_then_from_include(tmp_path):
    tree(tmp_path, {
        "role/k.cu": '#include "local.cuh"\n#include "outer.cuh"\nK\n',
        "role/local.cuh": "LOCAL\n",
        "include/outer.cuh": '// outer\n#include "inner.cuh"\nOUTER\n',
        "include/inner.cuh": "INNER\n",
    })
    text = expand_includes(tmp_path / "role/k.cu", (tmp_path / "include",))
    assert text.split() == ["LOCAL", "//", "outer", "INNER", "OUTER", "K"]


def test_a_header_beside_the_file_wins_over_include(tmp_path):
    tree(tmp_path, {"role/k.cu": '#include "h.cuh"\n', "role/h.cuh": "MINE\n",
                    "include/h.cuh": "SHARED\n"})
    assert expand_includes(tmp_path / "role/k.cu", (tmp_path / "include",)).strip() == "MINE"


def test_each_header_is_pasted_once_and_pragma_once_is_dropped(tmp_path):
    tree(tmp_path, {
        "k.cu": '#include "a.cuh"\n#include "b.cuh"\n#include "a.cuh"\n',
        "a.cuh": "#pragma once\nA\n",
        "b.cuh": '#include "a.cuh"\nB\n',
    })
    text = expand_includes(tmp_path / "k.cu", ())
    assert text.count("A\n") == 1 and "B" in text and "#pragma once" not in text
    assert text.index("A\n") < text.index("B")          # where it is first included
    assert text.count("pasted above") == 2


def test_an_include_cycle_ends(tmp_path):
    tree(tmp_path, {"k.cu": '#include "a.cuh"\nK\n', "a.cuh": '#include "b.cuh"\nA\n',
                    "b.cuh": '#include "a.cuh"\nB\n'})
    text = expand_includes(tmp_path / "k.cu", ())
    assert [w for w in text.split() if w in "ABK"] == ["B", "A", "K"]


def test_a_missing_header_names_itself_and_the_including_file(tmp_path):
    tree(tmp_path, {"role/k.cu": '#include "there.cuh"\n',
                    "role/there.cuh": '#include "nowhere.cuh"\n'})
    with pytest.raises(KernelCompileError) as err:
        expand_includes(tmp_path / "role/k.cu", (tmp_path / "include",))
    msg = str(err.value)
    assert '"nowhere.cuh"' in msg and "there.cuh includes" in msg
    assert str(tmp_path / "include") in msg


def test_system_includes_and_commented_ones_stay():
    text = '#include <cstdio>\n// #include "gone.cuh"\n  #  include "x.cuh"\n'
    assert [m.group(1) for m in QUOTED_INCLUDE.finditer(text)] == ["x.cuh"]


def test_sources_are_named_by_their_path_under_kernels():
    names = source_names()
    assert all("/" in n and (KERNEL_DIR / n).is_file() for n in names)
    assert {k.source for k in registry.KERNELS} <= set(names)
    assert "baselines/bench_hold.cu" in names
    with pytest.raises(KernelCompileError, match="teaching/flash_teaching.cu"):
        source_path("flash_teaching.cu")              # the name alone is not a source


@pytest.mark.parametrize("name", source_names())
def test_every_source_expands_to_one_text(name):
    text = read_source(name)
    assert not QUOTED_INCLUDE.search(text), name
    for header in INCLUDE_DIR.glob("*.cuh"):
        guard = f"#define FA_LAB_{header.stem.upper()}_CUH"
        assert text.count(guard) <= 1, (name, header.name)
