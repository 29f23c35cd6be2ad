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

def sf_proto_library(name, srcs, deps = []):
    """C++ protobuf + gRPC code for `srcs` (paths under proto/), generated with Debian's protoc
    and grpc_cpp_plugin into `name`_codegen, compiled by cc_library `name`. Generated code is
    not ours to warn about: no SF_COPTS."""
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ext for ext in [".pb.h", ".pb.cc", ".grpc.pb.h", ".grpc.pb.cc"]]
    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = outs,
        cmd = "protoc --proto_path=proto --cpp_out=$(RULEDIR) --grpc_out=$(RULEDIR) " +
              "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) $(SRCS)",
    )
    cc_library(
        name = name,
        srcs = [":" + name + "_codegen"],
        hdrs = [":" + name + "_codegen"],
        includes = ["."],
        deps = deps + ["//bazel/system:grpc"],
    )

def sf_nccl_program(name, src, out, hdrs = []):
    """A CUDA + NCCL program for a GPU machine, built by nvcc where CUDA is installed.

    Tagged manual: `bazel build //...` skips it (CUDA is not a Debian package);
    tests/probe/cuda_check.sh builds it by name. Sources may include project headers by their
    path from the workspace root (-I.).
    """
    cuda = "$${CUDA_HOME:-/usr/local/cuda}"
    native.genrule(
        name = name,
        testonly = True,
        srcs = [src] + hdrs,
        outs = [out],
        cmd = (cuda + "/bin/nvcc -std=c++17 -O2 -I. $(location " + src + ") -o $@ " +
               "-L" + cuda + "/lib -L" + cuda + "/lib64 -lnccl -lcudart " +
               "-Xlinker -rpath=" + cuda + "/lib"),
        tags = ["manual"],
    )
