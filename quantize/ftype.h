// Quantization targets: llama.cpp's file types (`llama_ftype`, the "mixes") and plain dtypes.
//
// A mix names a recipe (quantize/recipe.h) that picks a dtype per tensor; its id is stored as
// `general.file_type`. A plain dtype name ("q4_K", "q8_0", "f16") quantizes every quantizable
// tensor to that one dtype (llama-quantize's --pure), with the same shape fallbacks.
//
// Source of the ids and default dtypes: llama.cpp include/llama.h (`enum llama_ftype`) and
// src/llama-quant.cpp (`llama_ftype_get_default_type`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace minfer::quantize {

/// llama.cpp's `llama_ftype` ids (the value of `general.file_type`). Only the mixes minfer can
/// produce are listed: the IQ mixes need IQ kernels and an importance matrix, Q2_K_S needs an
/// importance matrix.
enum class FileType : uint32_t {
  ALL_F32 = 0,
  MOSTLY_F16 = 1,
  MOSTLY_Q4_0 = 2,
  MOSTLY_Q4_1 = 3,
  MOSTLY_Q8_0 = 7,
  MOSTLY_Q5_0 = 8,
  MOSTLY_Q5_1 = 9,
  MOSTLY_Q2_K = 10,
  MOSTLY_Q3_K_S = 11,
  MOSTLY_Q3_K_M = 12,
  MOSTLY_Q3_K_L = 13,
  MOSTLY_Q4_K_S = 14,
  MOSTLY_Q4_K_M = 15,
  MOSTLY_Q5_K_S = 16,
  MOSTLY_Q5_K_M = 17,
  MOSTLY_Q6_K = 18,
  MOSTLY_BF16 = 32,
};

/// llama-quantize's name of `t`: "F32", "F16", "Q4_K_M", ...
std::string_view file_type_name(FileType t);

/// The dtype most tensors of a `t` file get (llama_ftype_get_default_type): Q4_K for Q4_K_S and
/// Q4_K_M, Q3_K for the Q3_K mixes, F16 for MOSTLY_F16, ...
DType file_type_default_dtype(FileType t);

/// Every FileType, in id order.
const std::vector<FileType>& all_file_types();

/// What a `--type` value asks for.
struct QuantTarget {
  FileType ftype = FileType::MOSTLY_Q4_K_M;  ///< written as general.file_type
  bool pure = false;  ///< every quantizable tensor gets file_type_default_dtype(ftype)
  std::string name;   ///< canonical name: the mix name ("Q4_K_M") or the dtype name ("q4_K")
};

/// Parses a `--type` value:
///   - a mix name, exactly as llama-quantize spells it: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K
///     Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K, plus llama-quantize's aliases
///     Q3_K = Q3_K_M, Q4_K = Q4_K_M, Q5_K = Q5_K_M;
///   - else a mix's llama.cpp file type number ("15" = Q4_K_M, as llama-quantize takes it);
///   - else a plain dtype name, case-insensitive: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K
///     q4_K q5_K q6_K (pure; general.file_type becomes the mix with that default dtype, the _S
///     variant for q3_K/q4_K/q5_K);
///   - else a mix name in any case ("q4_k_m").
/// So "Q8_0" is the Q8_0 mix and "q8_0" the plain dtype; they differ only in the output tensor
/// rule. Throws std::invalid_argument naming the value and listing the accepted names; the IQ
/// mixes and Q2_K_S get a message saying why they are not available.
QuantTarget parse_target(std::string_view s);

/// The accepted `--type` values, for help texts.
std::string target_help();

}  // namespace minfer::quantize
