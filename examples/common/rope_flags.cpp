#include "common/rope_flags.h"

#include <map>

#include "common/flag_checks.h"

namespace minfer::examples {

void add_rope_flags(CLI::App& app, RopeOverrides& o) {
  const std::string g = "RoPE scaling (default: the model's)";
  // CLI11 fills std::optional<float> directly; the scaling type goes through its name.
  static const std::map<std::string, RopeScaling> kTypes = {
      {"none", RopeScaling::NONE}, {"linear", RopeScaling::LINEAR}, {"yarn", RopeScaling::YARN}};
  app.add_option("--rope-scaling", o.scaling, "RoPE frequency scaling method: none, linear or yarn")
      ->transform(CLI::CheckedTransformer(kTypes).description(""))
      ->type_name("{none,linear,yarn}")
      ->group(g);
  auto* scale = app.add_option("--rope-scale", o.scale, "RoPE context scaling factor (freq-scale = 1/N)")
                    ->check(above(0))
                    ->group(g);
  app.add_option("--rope-freq-base", o.freq_base, "RoPE base frequency")->check(above(0))->group(g);
  app.add_option("--rope-freq-scale", o.freq_scale, "RoPE frequency scaling factor (1/N extends the context N times)")
      ->check(above(0))
      ->excludes(scale)
      ->group(g);
  app.add_option("--yarn-orig-ctx", o.yarn_orig_ctx, "YaRN: original context size of the model")
      ->check(above(0))
      ->group(g);
  app.add_option("--yarn-ext-factor", o.yarn_ext_factor, "YaRN: extrapolation mix factor (0: off, -1: 1 for yarn)")
      ->check(finite())
      ->group(g);
  app.add_option("--yarn-attn-factor", o.yarn_attn_factor,
                 "YaRN: attention magnitude (<= 0: 0.1 ln(factor) + 1)")
      ->check(finite())
      ->group(g);
  app.add_option("--yarn-beta-slow", o.yarn_beta_slow, "YaRN: high correction dim or alpha")->check(above(0))->group(g);
  app.add_option("--yarn-beta-fast", o.yarn_beta_fast, "YaRN: low correction dim or beta")->check(above(0))->group(g);
}

}  // namespace minfer::examples
