#!/usr/bin/env python3
"""The test oracle: renders chat templates with python3-jinja2 exactly as Hugging Face
transformers' apply_chat_template does (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, HF's tojson / raise_exception / strftime_now).

Usage: render_jinja2.py IN.json OUT.json
IN:  {"template": "...", "cases": [{"vars": {...}}, ...]}
OUT: [{"ok": "rendered text"} | {"error": "message"}, ...] in the same order."""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def main():
    data = json.load(open(sys.argv[1], encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    tpl = env.from_string(data["template"])
    out = []
    for case in data["cases"]:
        try:
            out.append({"ok": tpl.render(**case["vars"])})
        except Exception as e:  # every failure counts as "the template refused"
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
    json.dump(out, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)


if __name__ == "__main__":
    main()
