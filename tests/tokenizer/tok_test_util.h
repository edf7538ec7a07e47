// Helpers for the tokenizer tests: fixture paths, a Vocab loaded from a Hugging Face
// tokenizer.json (test-only; the library itself reads GGUF), the case file, a seeded RNG.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/vocab.h"

namespace minfer::tokenizer::test {

inline std::filesystem::path fixtures_dir() {
  if (const char* env = std::getenv("MINFER_FIXTURES"); env && *env) return env;
  return MINFER_FIXTURES_DEFAULT;
}

/// Path of a fixture file, or empty when it is absent (callers GTEST_SKIP()).
inline std::filesystem::path fixture(const std::string& rel) {
  const auto p = fixtures_dir() / rel;
  return std::filesystem::exists(p) ? p : std::filesystem::path{};
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return nlohmann::json::parse(in);
}

/// The vocabulary of an HF tokenizer.json (BPE model + added_tokens): added tokens with
/// special=true become control tokens, the others user-defined.
inline Vocab vocab_from_hf_json(const std::filesystem::path& p) {
  const nlohmann::json j = read_json(p);
  const auto& model = j.at("model");
  Vocab v;
  size_t n = 0;
  for (const auto& [tok, id] : model.at("vocab").items()) n = std::max<size_t>(n, id.get<size_t>() + 1);
  for (const auto& a : j.at("added_tokens")) n = std::max<size_t>(n, a.at("id").get<size_t>() + 1);
  v.tokens.resize(n);
  v.token_types.assign(n, TokenType::normal);
  for (const auto& [tok, id] : model.at("vocab").items()) v.tokens[id.get<size_t>()] = tok;
  for (const auto& a : j.at("added_tokens")) {
    const auto id = a.at("id").get<size_t>();
    v.tokens[id] = a.at("content").get<std::string>();
    v.token_types[id] = a.at("special").get<bool>() ? TokenType::control : TokenType::user_defined;
  }
  for (const auto& m : model.at("merges")) {
    v.merges.push_back(m.is_string() ? m.get<std::string>()
                                     : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  }
  return v;
}

/// Seed for randomized tests: $MINFER_TEST_SEED when set, else fresh; tests print it on failure.
inline uint64_t test_seed() {
  if (const char* env = std::getenv("MINFER_TEST_SEED"); env && *env) return std::strtoull(env, nullptr, 0);
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

}  // namespace minfer::tokenizer::test
