// llama.cpp's RoPE scaling flags for every program that loads a model (through add_model_flags).
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/model.h"

namespace minfer::examples {

/// --rope-scaling {none,linear,yarn} --rope-scale N --rope-freq-base N --rope-freq-scale N
/// --yarn-orig-ctx N --yarn-ext-factor N --yarn-attn-factor N --yarn-beta-slow N --yarn-beta-fast N,
/// in a "RoPE scaling" group; each one given overrides the GGUF's value (HParams::apply).
void add_rope_flags(CLI::App& app, RopeOverrides& o);

}  // namespace minfer::examples
