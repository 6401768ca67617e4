#!/usr/bin/env python3
"""Runs every runnable command of the README and of the other documentation
as a new user would: from the root of a fresh copy of the repository (tracked
files only, no build/ or models/), with ../shared beside it and ./run the
binary under test.

    readme_commands.py [--complete] README.md [more.md ...] --run PATH --shared DIR

A command is a line of a ```sh block (backslash continuations joined); a
block runs as one bash script, so a variable set on one line serves the
next.  Skipped, and counted as such:
  * lines with a placeholder written <like-this> (the README says so);
  * `make ...` lines: the build and its targets are what CI itself runs,
    and `make test` would recurse.
Each markdown file runs on a fresh copy of its own, so a file stands alone
and the order of the files does not matter.  Within a file, blocks run with
bash -e -o pipefail in the order the file gives them (later blocks use files
earlier ones wrote).  With --complete, README.md, CONTRIBUTING.md (when
there is one) and every docs/*.md of the repository must be among the files
given, else nothing runs.  Exit status 0 when all succeed, 1 at the first
failure (printing the command and its stderr) or for a file left out."""
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


def required_docs(repo):
    """The documentation --complete requires: README.md, CONTRIBUTING.md when
    the repository has one, and every docs/*.md, relative to the repository."""
    out = [n for n in ("README.md", "CONTRIBUTING.md") if os.path.isfile(os.path.join(repo, n))]
    docs = os.path.join(repo, "docs")
    if os.path.isdir(docs):
        out += sorted("docs/" + n for n in os.listdir(docs) if n.endswith(".md"))
    return out


def run_file(md, rel, args):
    """Runs one markdown file's blocks on a fresh copy; the number of commands
    run, or None after printing the failure."""
    with tempfile.TemporaryDirectory(prefix="posenc-readme-") as tmp:
        clone = os.path.join(tmp, "posenc")
        os.makedirs(clone)
        fresh_copy(args.repo, clone)
        os.symlink(os.path.abspath(args.run), os.path.join(clone, "run"))
        os.symlink(os.path.abspath(args.shared), os.path.join(tmp, "shared"))
        found, skipped = blocks(md)
        print("%s: %d commands in %d blocks, %d skipped (placeholders or make)"
              % (rel, sum(len(c) for _, c in found), len(found), skipped), flush=True)
        for line, cmds in found:
            script = "\n".join(cmds)
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=clone,
                               capture_output=True, text=True, timeout=TIMEOUT_S)
            if r.returncode != 0:
                print("FAIL %s:%d (exit %d):\n%s\n--- stderr:\n%s"
                      % (rel, line, r.returncode, script, r.stderr.strip()))
                return None
        return sum(len(c) for _, c in found)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("markdown", nargs="+")
    ap.add_argument("--run", required=True, help="the ./run binary to test")
    ap.add_argument("--shared", required=True, help="the shared directory (models/, text/)")
    ap.add_argument("--complete", action="store_true",
                    help="refuse a list that leaves out README.md, CONTRIBUTING.md or a docs/*.md")
    # this file is tests/cli/readme_commands.py: the repository is two levels up
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(here)))
    args = ap.parse_args(argv)
    rels = [os.path.relpath(os.path.abspath(md), args.repo) for md in args.markdown]
    if args.complete:
        missing = [d for d in required_docs(args.repo) if d not in rels]
        if missing:
            print("not passed: %s (--complete: every documentation file runs)" % ", ".join(missing))
            return 1
    total = 0
    for md, rel in zip(args.markdown, rels):
        n = run_file(md, rel, args)
        if n is None:
            return 1
        total += n
    print("all %d commands ran (%d files)" % (total, len(rels)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
