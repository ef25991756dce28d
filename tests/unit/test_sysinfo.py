"""The system description's CPU vector extensions: read from /proc/cpuinfo's flags (x86) or
Features (Arm), in a fixed order, so that two studies on two CPUs are told apart."""

from __future__ import annotations

from dpscale.runner import sysinfo

X86 = """processor\t: 0
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse4_2 avx avx2 fma bmi2 sha_ni
"""
AVX512 = "flags : fma avx512f avx2 avx amx_tile avx512_bf16 avx512_vnni sse4_2\n"
ARM = "processor : 0\nFeatures : fp asimd evtstrm aes sve\n"


def test_the_vector_extensions_are_read_in_a_fixed_order_from_the_flags_line():
    assert sysinfo.cpu_vector_extensions(X86) == ["sse4_2", "avx", "avx2", "fma"]
    assert sysinfo.cpu_vector_extensions(AVX512) == [
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "avx512f",
        "avx512_vnni",
        "avx512_bf16",
        "amx_tile",
    ]
    assert sysinfo.cpu_vector_extensions(ARM) == ["asimd", "sve"]


def test_a_cpuinfo_without_flags_gives_none_and_this_machine_gives_a_list():
    assert sysinfo.cpu_vector_extensions("model name : x\n") == []
    assert isinstance(sysinfo.cpu_vector_extensions(), list)
