// minfer GGUF I/O: strict mmap reader (gguf::File) and writer (gguf::Writer).
// Format and validation rules: docs/gguf.md. Errors: gguf::Error.
#pragma once

#include "gguf/reader.h"
#include "gguf/types.h"
#include "gguf/value.h"
#include "gguf/writer.h"
