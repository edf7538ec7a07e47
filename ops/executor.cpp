#include "ops/executor.h"

#include "ops/lower.h"

namespace minfer {

void Executor::allocate(Context& ctx, Graph& g) {
  ops::lower_fused(ctx, g, backend_);
  galloc_.allocate(g);
}

void Executor::reserve(Context& ctx, Graph& g) {
  ops::lower_fused(ctx, g, backend_);
  galloc_.reserve(g);
}

}  // namespace minfer
