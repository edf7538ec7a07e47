#include <minfer/allocator.h>
#include <cstdio>
int main() {
  std::vector<minfer::alloc::BufferRequest> r = {{.size = 64, .alignment = 64, .first_use = 0, .last_use = 1}};
  auto l = minfer::alloc::plan_layout(r);
  std::printf("arena %zu\n", l.arena_size);
}
