#include "ops/executor.h"

namespace minfer {

void Executor::allocate(Context& ctx, Graph& g) {
  backend_.rewrite(ctx, g);
  galloc_.allocate(g);
}

void Executor::reserve(Context& ctx, Graph& g) {
  backend_.rewrite(ctx, g);
  galloc_.reserve(g);
}

}  // namespace minfer
