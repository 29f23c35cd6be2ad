"""Project macros: every C++ target gets the same language level and warnings-as-errors."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

SF_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wnon-virtual-dtor",
    "-Wshadow",
    "-Wno-unused-parameter",
]

def sf_cc_library(name, copts = [], **kwargs):
    """A project library: one concept per library, named after its header."""
    cc_library(name = name, copts = SF_COPTS + copts, **kwargs)

def sf_cc_binary(name, copts = [], **kwargs):
    cc_binary(name = name, copts = SF_COPTS + copts, **kwargs)

def sf_cc_test(name, copts = [], deps = [], **kwargs):
    """A Catch2 v2 test; the shared main lives in //tests:catch_main."""
    cc_test(
        name = name,
        copts = SF_COPTS + copts,
        deps = deps + ["//tests:catch_main"],
        **kwargs
    )

def sf_cc_benchmark(name, copts = [], deps = [], tags = [], **kwargs):
    """A Google Benchmark binary. Tagged manual: run it with `bazel run -c opt`."""
    cc_binary(
        name = name,
        copts = SF_COPTS + copts,
        deps = deps + ["//bazel/system:benchmark_main"],
        tags = tags + ["manual", "benchmark"],
        **kwargs
    )
