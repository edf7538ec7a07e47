// The model registry: architecture name (GGUF `general.architecture`) -> model definition.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/model.h"
#include "tensor/backend.h"

namespace minfer::gguf {
class File;
}

namespace minfer::models {

using Factory = std::unique_ptr<Model> (*)(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard);

/// Loads the model in `file` onto `backend` with the definition registered for its
/// architecture; a split `shard` loads rank shard.rank's part of a tensor-parallel model (its
/// q/k/v and gate/up rows, attention-output and down columns; docs/tensor-parallel.md). Throws
/// std::runtime_error naming the architecture and the supported ones when there is none, and what
/// loading throws (missing tensors, a tensor whose shape is not the one the hyper-parameters give
/// it, bad hyper-parameters, a shape the shard count does not divide, OutOfMemoryError); throws
/// std::runtime_error naming them when the file has tensors the model does not use (as llama.cpp
/// refuses them: the definition does not understand the file).
std::unique_ptr<Model> load(std::shared_ptr<const gguf::File> file, Backend& backend, Shard shard = {});

/// Registered architecture names, sorted.
std::vector<std::string> architectures();

/// Throws std::runtime_error when no model definition reads `file`'s general.architecture (an
/// absent key reads as ""); the message names the file, the architecture with its bytes escaped
/// (fmt's {:?}) and the supported ones. load() runs it first.
void check_architecture(const gguf::File& file);

}  // namespace minfer::models
