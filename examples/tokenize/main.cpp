// minfer-tokenize: the token ids of a text, as llama-tokenize prints them. Needs only the
// tokenizer, so vocab-only GGUFs work.
//   minfer-tokenize -m model.gguf -p "Hello world"          # one "id -> 'piece'" line per token
//   minfer-tokenize -m vocab.gguf -f text.txt --ids          # one JSON array
// As in minfer-generate, -p takes \n \t \\ \" \xNN escapes (--no-escape: as typed; -f and --stdin
// text is never escaped). Special-token text is parsed unless --no-parse-special; BOS is added when
// the file says so (add_bos_token) unless --no-bos. Errors exit with 1.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/common.h"
#include "common/prompt.h"
#include "gguf/gguf.h"

using namespace minfer;

int main(int argc, char** argv) {
  return examples::run_main([&] {
    CLI::App app{"minfer-tokenize: token ids of a text (vocab-only GGUFs work)"};
    std::string model, prompt, file;
    bool ids_only = false, no_bos = false, no_parse_special = false, show_count = false, no_escape = false;
    bool from_stdin = false, log_disable = false;
    app.add_option("-m,--model", model, "GGUF file (a model or a vocab-only file; default: the repo's small model)");
    auto* p_opt = app.add_option("-p,--prompt", prompt, "text to tokenize");
    auto* f_opt = app.add_option("-f,--file", file, "read the text from a file");
    auto* in_opt = app.add_flag("--stdin", from_stdin, "read the text from standard input");
    p_opt->excludes(f_opt)->excludes(in_opt);
    f_opt->excludes(in_opt);
    app.add_flag("--no-escape", no_escape, "-p as typed: no \\n \\t \\xNN escape processing");
    app.add_flag("--log-disable", log_disable, "accepted for llama-tokenize's scripts (this program logs nothing)");
    app.add_flag("--ids", ids_only, "print only the ids, as one JSON array");
    app.add_flag("--no-bos", no_bos, "do not add BOS even when the file asks for it");
    app.add_flag("--no-parse-special", no_parse_special, "special-token text is plain text");
    app.add_flag("--show-count", show_count, "print the number of tokens at the end");
    MINFER_PARSE(app, argc, argv);
    if (app.count("-p") == 0 && app.count("-f") == 0 && !from_stdin)
      throw std::invalid_argument("give the text: -p TEXT, -f FILE or --stdin");
    if (!file.empty()) {
      prompt = examples::read_text_file(file, "-f");
    } else if (from_stdin) {
      std::ostringstream in;
      in << std::cin.rdbuf();
      prompt = in.str();
    } else if (!no_escape) {
      prompt = examples::process_escapes(prompt);
    }
    const std::string path = model.empty() ? examples::default_model_path() : model;
    if (!std::filesystem::exists(path)) throw std::runtime_error(fmt::format("model file '{}' does not exist", path));
    const gguf::File f(path);
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(f);
    const std::vector<int32_t> ids = examples::raw_prompt_ids(tok, prompt, !no_parse_special, !no_bos);
    if (ids_only) {
      std::string out = "[";
      for (size_t k = 0; k < ids.size(); ++k) out += (k ? ", " : "") + std::to_string(ids[k]);
      std::puts((out + "]").c_str());
    } else {
      for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, tok.token_to_piece(id).c_str());
    }
    if (show_count) std::printf("Total number of tokens: %zu\n", ids.size());
    return 0;
  });
}
