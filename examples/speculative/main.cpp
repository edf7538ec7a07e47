// minfer-speculative: minfer-generate with the draft model required. A draft model proposes tokens
// that the target verifies in one batched pass; prints the text, the acceptance rate, the mean
// accepted length, tok/s, and the speedup over plain decoding measured in the same run
// (--no-baseline skips that run). Usage: minfer-speculative -m TARGET -md DRAFT [generate flags].
#include "common/generate_main.h"

int main(int argc, char** argv) {
  return minfer::examples::generate_main(
      argc, argv,
      {"minfer-speculative", "minfer-speculative: speculative decoding with a draft model (-m TARGET -md DRAFT)",
       /*draft_required=*/true});
}
