"""Writes the `stagefrontier` wheel (PEP 427) from Bazel's outputs, with the standard library only.

    make_wheel.py --out stagefrontier-0.1.0-cp311-cp311-linux_x86_64.whl --version 0.1.0 \
        --readme client/python/wheel/README.md \
        --file stagefrontier/_stagefrontier.so=bazel-out/.../_stagefrontier.so \
        --file stagefrontier/__init__.py=client/python/src/stagefrontier/__init__.py ...

Why not `pip wheel` or setuptools: the native extension is built by Bazel with the project's
flags and sanitizer configs; this only packs files. The archive is reproducible: entries are
sorted and dated 1980-01-01, so one tree gives one wheel byte for byte.
"""
import argparse
import base64
import hashlib
import re
import sys
import zipfile

NAME = "stagefrontier"
TAG = "cp311-cp311-linux_x86_64"
EPOCH = (1980, 1, 1, 0, 0, 0)


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def metadata(version, readme):
    head = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        "Summary: Which stage on which rank slows a distributed training job: the trainer-side "
        "stub and the PyTorch launcher of StageFrontier",
        "Requires-Python: >=3.11,<3.12",
        "Classifier: Programming Language :: Python :: 3.11",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Topic :: System :: Monitoring",
        "Provides-Extra: torch",
        'Requires-Dist: torch>=1.13; extra == "torch"',
        "Description-Content-Type: text/markdown",
    ]
    return ("\n".join(head) + "\n\n" + readme).encode()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--readme", required=True)
    p.add_argument("--file", action="append", default=[], metavar="WHEEL_PATH=SOURCE")
    a = p.parse_args()
    if not re.fullmatch(r"\d+(\.\d+)*([ab]|rc)?\d*", a.version):
        sys.exit(f"make_wheel: version {a.version!r} is not a PEP 440 release")
    expected = f"{NAME}-{a.version}-{TAG}.whl"
    if not a.out.endswith("/" + expected) and a.out != expected:
        sys.exit(f"make_wheel: the output must be named {expected}, not {a.out}")
    files = {}
    for spec in a.file:
        dest, sep, src = spec.partition("=")
        if not sep or not dest.startswith(NAME + "/"):
            sys.exit(f"make_wheel: --file {spec!r}: want {NAME}/PATH=SOURCE")
        with open(src, "rb") as f:
            files[dest] = f.read()
    with open(a.readme, encoding="utf-8") as f:
        readme = f.read()
    info = f"{NAME}-{a.version}.dist-info"
    files[f"{info}/METADATA"] = metadata(a.version, readme)
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: stagefrontier make_wheel.py\n"
        f"Root-Is-Purelib: false\nTag: {TAG}\n").encode()
    files[f"{info}/entry_points.txt"] = (
        "[console_scripts]\nstagefrontier-torch-run = stagefrontier.torch.run:main\n"
        "stagefrontier-torchrun = stagefrontier.torchrun:main\n").encode()
    files[f"{info}/top_level.txt"] = f"{NAME}\n".encode()
    record = f"{info}/RECORD"
    lines = [record_line(path, data) for path, data in sorted(files.items())]
    lines.append(f"{record},,")
    files[record] = ("\n".join(lines) + "\n").encode()
    with zipfile.ZipFile(a.out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(files, key=lambda p: (p.startswith(info), p)):  # dist-info last
            entry = zipfile.ZipInfo(path, EPOCH)
            entry.compress_type = zipfile.ZIP_DEFLATED
            executable = path.endswith(".so")
            entry.external_attr = (0o100755 if executable else 0o100644) << 16
            z.writestr(entry, files[path])


if __name__ == "__main__":
    main()
