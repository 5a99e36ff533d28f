#!/usr/bin/env python3
"""Runs every ```sh block of a Markdown file, in order, in one bash process
(variables carry over), against a live stack (the caller's environment).

A block preceded by `<!-- expect NNN -->` must print NNN as its last output
line (an HTTP status); every other block must succeed (bash -e, pipefail).
Exits 1 naming the first block that failed. Usage: run_doc_examples.py FILE.md
"""
import re
import subprocess
import sys


def blocks(text):
    expect = None
    for m in re.finditer(r"(<!-- expect (\d+) -->\s*\n)?```sh\n(.*?)```", text, re.S):
        yield m.group(2), m.group(3), text[: m.start()].count("\n") + 1


def main():
    path = sys.argv[1]
    text = open(path, encoding="utf-8").read()
    script = ["set -euo pipefail"]
    n = 0
    for expect, body, line in blocks(text):
        n += 1
        script.append(f'echo "--- {path}:{line}" >&2')
        if expect:
            script.append(f"out_{n}=$(\n{body})")
            script.append(f'printf "%s\\n" "$out_{n}"')
            script.append(f'[ "$(printf "%s" "$out_{n}" | tail -n 1)" = "{expect}" ] || '
                          f'{{ echo "{path}:{line}: expected {expect}, got: $out_{n}" >&2; exit 1; }}')
        else:
            script.append(body)
    if n == 0:
        print(f"{path}: no sh blocks", file=sys.stderr)
        return 1
    r = subprocess.run(["bash", "-c", "\n".join(script)])
    if r.returncode != 0:
        print(f"{path}: an example failed (exit {r.returncode}); the last '---' line above names it",
              file=sys.stderr)
        return 1
    print(f"{path}: {n} examples ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
