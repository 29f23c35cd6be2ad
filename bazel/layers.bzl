"""The project's package layers, lowest first (docs/architecture.md, "Package graph").

A package may depend only on packages in layers below its own; packages in one layer never
depend on each other. Each package's BUILD file says so to Bazel:

    load("//bazel:layers.bzl", "visible_above")
    package(default_visibility = visible_above("//daemon/accounting"))

so a wrong-way dependency fails the build's analysis ("target ... is not visible from ...").
tests/layers/check.sh builds one on purpose and expects that failure. A new package gets a
place here first.
"""

LAYERS = [
    ["//base"],
    ["//proto", "//shm"],
    ["//client", "//daemon/common"],
    ["//client/probe", "//daemon/wire"],
    ["//client/c", "//client/python", "//daemon/accounting", "//daemon/archive"],
    ["//client/examples", "//daemon/journal"],
    ["//daemon/events"],
    ["//daemon/captures", "//daemon/nodes", "//daemon/web"],
    ["//daemon/sweep"],
    ["//daemon/coordinator"],
    ["//daemon/analyze", "//daemon/sfctl", "//daemon/sidecar"],
    ["//daemon/sim"],
]

# Above every layer: tests, packaging, docs checks and the root package.
_TOP = [
    "//tests:__subpackages__",
    "//deploy:__subpackages__",
    "//docs:__pkg__",
    "//:__pkg__",
]

def visible_above(package):
    """The visibility list of `package`: every package in a higher layer, and _TOP."""
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return [p + ":__pkg__" for upper in LAYERS[i + 1:] for p in upper] + _TOP
    fail("package %s has no layer in //bazel:layers.bzl" % package)
