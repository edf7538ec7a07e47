#include "ops/cpu/cpu_backend.h"
#include "ops/ops.h"
#include "models/registry.h"
#include <cstdio>
int main() {
  minfer::Context c;
  auto* a = c.new_tensor(minfer::DType::F32, {4});
  auto* s = minfer::ops::scale(c, a, 2.0f);
  std::printf("%s archs %zu\n", minfer::describe(*s).c_str(), minfer::models::architectures().size());
}
