// minfer-generate: text completion, the main job. With no arguments it runs the small model
// shipped in the repo on a default prompt, streams the text and prints prefill/decode speed.
// With --draft DRAFT it decodes speculatively (the same program as minfer-speculative).
#include "common/generate_main.h"

int main(int argc, char** argv) {
  return minfer::examples::generate_main(
      argc, argv, {"minfer-generate", "minfer-generate: complete a prompt with a GGUF model", /*draft_required=*/false});
}
