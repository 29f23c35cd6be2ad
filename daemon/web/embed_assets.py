"""Writes web_assets.cc: the web view's static files as byte arrays built into the binary.

    embed_assets.py OUT.cc NAME=FILE [NAME=FILE...]

Built in rather than read at run time so that one coordinator binary serves its own page, with
the page and the coordinator of one version. Content types follow the file's extension.
"""
import sys

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


def main():
    out, specs = sys.argv[1], sys.argv[2:]
    lines = ['#include "daemon/web/web_assets.h"', "", "#include <cstring>", "",
             "namespace stagefrontier {", "namespace {", ""]
    table = []
    for i, spec in enumerate(specs):
        name, _, path = spec.partition("=")
        ext = name[name.rfind("."):]
        if ext not in TYPES:
            sys.exit(f"embed_assets: no content type for {name}")
        with open(path, "rb") as f:
            data = f.read()
        body = ",".join(str(b) for b in data)
        lines.append(f"const unsigned char kData{i}[] = {{{body}}};")
        table.append(f'    {{"{name}", "{TYPES[ext]}", kData{i}, {len(data)}}},')
    lines += ["", "const WebAsset kAssets[] = {"] + table + ["};", "", "}  // namespace", "",
              "const WebAsset* FindWebAsset(const char* name) {",
              "  for (const WebAsset& a : kAssets) {",
              "    if (std::strcmp(a.name, name) == 0) return &a;",
              "  }",
              "  return nullptr;",
              "}", "", "}  // namespace stagefrontier", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
