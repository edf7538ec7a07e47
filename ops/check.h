// Internal: argument checks shared by the op builders. Errors name the op and the operands.
#pragma once

#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "ops/rope.h"
#include "tensor/tensor.h"

namespace minfer::ops::detail {

[[noreturn]] inline void fail(Op op, const std::string& what) {
  throw OpError(fmt::format("{}: {}", op_name(op), what));
}

inline void require_src(Op op, const Tensor* t, std::string_view role) {
  if (!t) fail(op, fmt::format("{} is null", role));
}

inline void require_type(Op op, const Tensor* t, std::string_view role, std::initializer_list<DType> ok) {
  require_src(op, t, role);
  for (DType d : ok)
    if (t->type == d) return;
  std::string list;
  for (DType d : ok) list += (list.empty() ? "" : ", ") + std::string(dtype_name(d));
  fail(op, fmt::format("{} {} has dtype {}, expected one of {}", role, describe(*t), dtype_name(t->type), list));
}

inline bool is_float(const Tensor* t) { return t->type == DType::F32 || t->type == DType::F16; }

/// Checks RoPE parameters (n_rot already resolved) for a head of `head_dim` and the optional
/// freq_factors; shared by ROPE and QKV. Defined in ops/nn.cpp.
void check_rope_params(Op op, const RopeParams& p, int64_t head_dim, const Tensor* freq_factors);

}  // namespace minfer::ops::detail
