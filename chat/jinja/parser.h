// The Jinja parser: lexed pieces -> statement tree. Expression grammar and precedence are
// Jinja2's (jinja2/parser.py): conditional expression < or < and < not < comparisons (== != < <=
// > >= in, not in) < + - < ~ < * / // % < ** < unary - + < postfix (.attr [key] [a:b:c] (call))
// < filters (|f) and tests (is [not] t).
//
// Statements: if/elif/else, for/else (with an `if` filter and `recursive`), set (names, tuple
// unpacking, namespace attributes, block set with filters), macro (parameters with defaults),
// filter blocks, break/continue (HF enables jinja2.ext.loopcontrols), and HF's
// generation/endgeneration markers (rendered as their body). Anything else — include, import,
// extends, block, call, raw, do, unknown filters and tests — is a TemplateError naming the
// construct and its line, raised here, before anything renders.
#pragma once

#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace minfer::jinja {

/// Parses the pieces of one template. Throws TemplateError (with the line) on a syntax error or
/// an unsupported construct.
Body parse(const std::vector<Piece>& pieces);

}  // namespace minfer::jinja
