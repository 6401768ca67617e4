#!/usr/bin/env python3
"""Runs every runnable command of a README as a new user would: from the root
of a fresh copy of the repository (tracked files only, no build/ or models/),
with ../shared beside it and ./run the binary under test.

    readme_commands.py README.md [more.md ...] --run PATH --shared DIR

A command is a line of a ```sh block (backslash continuations joined); a
block runs as one bash script, so a variable set on one line serves the
next.  Skipped, and counted as such:
  * lines with a placeholder written <like-this> (the README says so);
  * `make ...` lines: the build and its targets are what CI itself runs,
    and `make test` would recurse.
Blocks run with bash -e -o pipefail, in the order the README gives them
(later blocks use files earlier ones wrote).  Exit status 0 when all
succeed, 1 at the first failure (printing the command and its stderr)."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9_. -]*>")
TIMEOUT_S = 600


def blocks(markdown_path):
    """(first line number, [commands]) for each ```sh block, and the number of
    commands skipped."""
    out, skipped, block, pending = [], 0, None, ""
    with open(markdown_path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            stripped = line.rstrip("\n")
            if stripped.startswith("```"):
                if block is None and stripped.strip() == "```sh":
                    block = (no + 1, [])
                elif block is not None:
                    if block[1]:
                        out.append(block)
                    block = None
                continue
            if block is None:
                continue
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
                continue
            cmd = (pending + stripped).strip()
            pending = ""
            if not cmd or cmd.startswith("#"):
                continue
            if PLACEHOLDER.search(cmd) or cmd.split()[0] == "make":
                skipped += 1
                continue
            block[1].append(cmd)
    return out, skipped


def fresh_copy(repo, dest):
    """The files git tracks (a clone's content), else the tree without build
    outputs."""
    try:
        files = subprocess.run(["git", "-C", repo, "ls-files", "-z"], check=True,
                               capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root, dirs, names in os.walk(repo):
            dirs[:] = [d for d in dirs if d not in (".git", "build", "models")]
            files += [os.path.relpath(os.path.join(root, n), repo) for n in names]
    for rel in filter(None, files):
        src = os.path.join(repo, rel)
        if not os.path.isfile(src) or rel == "run":
            continue
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("markdown", nargs="+")
    ap.add_argument("--run", required=True, help="the ./run binary to test")
    ap.add_argument("--shared", required=True, help="the shared directory (models/, text/)")
    # this file is tests/cli/readme_commands.py: the repository is two levels up
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(here)))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="posenc-readme-") as tmp:
        clone = os.path.join(tmp, "posenc")
        os.makedirs(clone)
        fresh_copy(args.repo, clone)
        os.symlink(os.path.abspath(args.run), os.path.join(clone, "run"))
        os.symlink(os.path.abspath(args.shared), os.path.join(tmp, "shared"))
        total = 0
        for md in args.markdown:
            rel = os.path.relpath(os.path.abspath(md), args.repo)
            found, skipped = blocks(md)
            print("%s: %d commands in %d blocks, %d skipped (placeholders or make)"
                  % (rel, sum(len(c) for _, c in found), len(found), skipped))
            for line, cmds in found:
                script = "\n".join(cmds)
                r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=clone,
                                   capture_output=True, text=True, timeout=TIMEOUT_S)
                if r.returncode != 0:
                    print("FAIL %s:%d (exit %d):\n%s\n--- stderr:\n%s"
                          % (rel, line, r.returncode, script, r.stderr.strip()))
                    return 1
                total += len(cmds)
        print("all %d commands ran" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
