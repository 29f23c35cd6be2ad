#!/usr/bin/python3
"""The shell blocks of a Markdown document, for tests/docs/docs_walk.sh:

    tests/docs/doc_commands.py DOC [--section HEADING_REGEX]

Prints one JSON object per fenced ```sh / ```bash / ```shell / ```console block of DOC (or of
the section whose heading matches HEADING_REGEX, down to the next heading of its level or
higher), in order: {"doc", "block" (1-based), "line" (of the opening fence), "lang",
"directive", "reason", "placeholders", "fixtures", "text" (the commands exactly as written; a
console block's "$ " lines without the prompt)}.

A block that cannot run unattended as written says so in an HTML comment right above it (only
blank lines between):

    <!-- walk: background -->       a server the reader leaves running in a terminal: the walk
                                    starts it, runs the next blocks, and stops it with Ctrl-C
                                    (SIGINT) at the end of the document, wanting exit status 0
    <!-- walk: skip (why) -->       not run; the reason is printed
    <!-- walk: placeholder <this repository> = repository -->
                                    the walk puts its value for "repository" in its place
    <!-- walk: fixture train.py = tests/docs/train.py -->
                                    the reader's own file: the walk copies this one into the
                                    block's directory first
Several directives go in one comment, separated by ";". A block that needs one and lacks it is
an error (exit 1), never skipped: a placeholder (<like this>) nobody fills, a console block
with no "$ " line (output, not input), a coordinator or sidecar started in the foreground
without "background", an unlabelled fence in the walked part, a directive that is not above a
block or that the walk does not know.
"""
import argparse
import json
import re
import sys

SHELL = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^(```+|~~~+)\s*([A-Za-z0-9_+-]*)\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
DIRECTIVE = re.compile(r"^<!--\s*walk:\s*(.*?)\s*-->\s*$")
PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9 _-]*>")
PLACEHOLDER_DIRECTIVE = re.compile(r"^placeholder\s+(<[^>]+>)\s*=\s*([a-z][a-z0-9_-]*)$")
FIXTURE_DIRECTIVE = re.compile(r"^fixture\s+(\S+)\s*=\s*(\S+)$")
SKIP_DIRECTIVE = re.compile(r"^skip\s*\((.+)\)$")
# A daemon started in the foreground (not "&", not just asked for --help): it never returns.
DAEMON = re.compile(r"(^|[\s/])stagefrontier-(coordinator|sidecar)\b(?!.*(--help|--version|&\s*$))")


def section_lines(lines, section):
    """(first, end) 0-based line range of the section whose heading matches SECTION."""
    if section is None:
        return 0, len(lines)
    pattern = re.compile(section)
    fenced = False
    start = level = None
    for i, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if not m:
            continue
        if start is None and pattern.search(m.group(2)):
            start, level = i, len(m.group(1))
        elif start is not None and len(m.group(1)) <= level:
            return start, i
    if start is None:
        raise SystemExit(f"no heading matches {section!r}")
    return start, len(lines)


def parse_directive(text, where, errors):
    out = {"directive": "run", "reason": "", "placeholders": {}, "fixtures": {}}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if part == "background":
            out["directive"] = "background"
        elif SKIP_DIRECTIVE.match(part):
            out["directive"] = "skip"
            out["reason"] = SKIP_DIRECTIVE.match(part).group(1).strip()
        elif PLACEHOLDER_DIRECTIVE.match(part):
            m = PLACEHOLDER_DIRECTIVE.match(part)
            out["placeholders"][m.group(1)] = m.group(2)
        elif FIXTURE_DIRECTIVE.match(part):
            m = FIXTURE_DIRECTIVE.match(part)
            out["fixtures"][m.group(1)] = m.group(2)
        elif part.startswith("skip"):
            errors.append(f"{where}: skip wants its reason: skip (why)")
        else:
            errors.append(f"{where}: unknown walk directive {part!r} (background, skip (why), "
                          "placeholder <x> = name, fixture FILE = PATH)")
    return out


def console_commands(body):
    """A console block's commands: the "$ " lines, with their "\\" continuations."""
    out, cont = [], False
    for line in body:
        if cont or line.startswith("$ "):
            out.append(line if cont else line[2:])
            cont = line.endswith("\\")
    return out


def blocks(path, section):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    first, end = section_lines(lines, section)
    errors, found = [], []
    pending = None  # (line number, parsed directive) of a walk comment waiting for its block
    i = first
    while i < end:
        line = lines[i]
        d = DIRECTIVE.match(line)
        if d:
            if pending:
                errors.append(f"{path}:{pending[0]}: walk directive not above a block")
            pending = (i + 1, parse_directive(d.group(1), f"{path}:{i + 1}", errors))
            i += 1
            continue
        m = FENCE.match(line)
        if not m:
            if pending and line.strip():
                errors.append(f"{path}:{pending[0]}: walk directive not right above a block")
                pending = None
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence[:3]):
            j += 1
        body = lines[i + 1:j]
        info = pending[1] if pending else parse_directive("", "", errors)
        pending = None
        where = f"{path}:{i + 1}"
        if lang == "":
            errors.append(f"{where}: a fence without a language in the walked part: say sh if "
                          "it is to be run, text if not")
        elif lang in SHELL:
            cmds = console_commands(body) if lang == "console" else body
            text = "\n".join(cmds)
            if info["directive"] != "skip":
                if lang == "console" and not cmds:
                    errors.append(f"{where}: a console block with no '$ ' line is output, "
                                  "not input: mark it <!-- walk: skip (why) -->")
                if info["directive"] != "background" and any(
                        DAEMON.search(c) for c in text.replace("\\\n", " ").split("\n")
                        if not c.lstrip().startswith("#")):
                    errors.append(f"{where}: starts a daemon that keeps running: mark it "
                                  "<!-- walk: background --> (or skip it)")
                for p in sorted(set(PLACEHOLDER.findall(text)) - set(info["placeholders"])):
                    errors.append(f"{where}: placeholder {p} cannot run as written: mark it "
                                  f"<!-- walk: placeholder {p} = NAME --> or skip it")
            found.append(dict(doc=path, block=len(found) + 1, line=i + 1, lang=lang,
                              text=text, **info))
        i = j + 1
    if pending:
        errors.append(f"{path}:{pending[0]}: walk directive not above a block")
    return found, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("doc")
    ap.add_argument("--section", help="regular expression for the section's heading")
    args = ap.parse_args()
    found, errors = blocks(args.doc, args.section)
    if not found:
        errors.append(f"{args.doc}: no shell block to walk"
                      + (f" in the section {args.section!r}" if args.section else ""))
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    for b in found:
        print(json.dumps(b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
