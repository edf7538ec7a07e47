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

using Factory = std::unique_ptr<Model> (*)(std::shared_ptr<const gguf::File> file, Backend& backend);

/// Loads the model in `file` onto `backend` with the definition registered for its
/// architecture. Throws std::runtime_error naming the architecture and the supported ones when
/// there is none, and what loading throws (missing tensors, bad hyper-parameters, OutOfMemoryError).
std::unique_ptr<Model> load(std::shared_ptr<const gguf::File> file, Backend& backend);

/// Registered architecture names, sorted.
std::vector<std::string> architectures();

}  // namespace minfer::models
