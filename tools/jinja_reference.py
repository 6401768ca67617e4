#!/usr/bin/env python3
"""Renders chat templates with Python's Jinja in the environment Hugging Face
transformers renders them in (utils/chat_template_utils.py: a sandboxed
environment with trim_blocks, lstrip_blocks and loop controls; tojson without
ASCII escapes; raise_exception and strftime_now), for the cases where posenc and
@huggingface/jinja (tests/chat/jinja_reference.mjs) disagree: Jinja itself
decides which of the two renders what transformers would.

    jinja_reference.py CASES.json

CASES.json is jinja_reference.mjs's case list; for each case this writes the
rendering to OUT.jinja2 ("out" + ".jinja2"), or "ERROR: message" when the
template raises."""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = environment()
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    for case in cases:
        variables = {"messages": case["messages"],
                     "add_generation_prompt": case["add_generation_prompt"]}
        for key in ("bos_token", "eos_token", "date_string"):
            if key in case:
                variables[key] = case[key]
        variables.update(case.get("kwargs", {}))
        try:
            with open(case["template"], encoding="utf-8") as f:
                out = env.from_string(f.read()).render(**variables)
        except Exception as e:  # the template's own error, whatever its class
            out = "ERROR: %s" % e
        with open(case["out"] + ".jinja2", "w", encoding="utf-8", newline="") as f:
            f.write(out)


if __name__ == "__main__":
    main()
