#!/usr/bin/env python3
"""Renders random conversations with the real Qwen3 chat template (Jinja2, as Hugging Face
apply_chat_template does: trim_blocks, lstrip_blocks) into qwen3_chat_cases.json, the reference for
format_chatml's Qwen3 style. Usage: gen_chat_cases.py TEMPLATE_FILE > qwen3_chat_cases.json
(the template is tokenizer.chat_template of the fixture GGUFs)."""
import json, random, sys
import jinja2

template = open(sys.argv[1]).read()
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
tpl = env.from_string(template)
rng = random.Random(20260530)
pieces = ["Hi", "What is 2+2?", "\n\nleading newlines", "trailing\n\n", "multi\nline\ntext", "",
          "<tool_response>\nx\n</tool_response>", "ünïcödé 🚀", "<think>\nplan\n</think>\n\nanswer",
          "<think>r</think>a", "pre</think>post", "a</think>b</think>c", "<think>x\n\n</think>\n\n\ny",
          "no think here"]
cases = []
for i in range(40):
    n = rng.randint(1, 6)
    msgs = []
    for k in range(n):
        role = rng.choice(["system", "user", "user", "assistant", "assistant", "tool"])
        msgs.append({"role": role, "content": rng.choice(pieces)})
    for gen in (False, True):
        for thinking in (None, True, False):
            kw = {} if thinking is None else {"enable_thinking": thinking}
            out = tpl.render(messages=msgs, add_generation_prompt=gen, **kw)
            cases.append({"messages": msgs, "add_generation_prompt": gen,
                          "enable_thinking": thinking is not False, "expected": out})
json.dump(cases, sys.stdout, ensure_ascii=False, indent=0)
