// Real chat templates of every family, rendered by minfer's engine and by python3-jinja2 (set up
// as Hugging Face's apply_chat_template) on fresh random conversations: the bytes must be equal,
// and where jinja2 refuses a conversation (raise_exception, an undefined attribute) minfer must
// refuse it too. The seed is printed; MINFER_TEST_SEED replays a run.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "common/chat_json.h"
#include "conversations.h"
#include "oracle.h"
#include "tokenizer/tok_test_util.h"

namespace minfer::test {
namespace {

struct Family {
  const char* name;
  const char* file;
  const char* bos;
  const char* eos;
  Shape shape;
};

const Family kFamilies[] = {
    {"Qwen2.5-Instruct", "qwen2.5-instruct.jinja", "", "<|im_end|>", Shape::any_roles},
    {"Qwen3", "qwen3.jinja", "", "<|im_end|>", Shape::any_roles},
    {"Llama3", "llama3.jinja", "<|begin_of_text|>", "<|eot_id|>", Shape::any_roles},
    {"Llama3.1", "llama3.1.jinja", "<|begin_of_text|>", "<|eot_id|>", Shape::any_roles},
    {"Gemma3", "gemma3.jinja", "<bos>", "<end_of_turn>", Shape::alternating_parts},
    {"DeepSeekV3", "deepseek-v3.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", Shape::any_roles},
    {"Mistral", "mistral-instruct.jinja", "<s>", "</s>", Shape::alternating},
    {"GptOss", "gpt-oss-harmony.jinja", "<|startoftext|>", "<|return|>", Shape::harmony},
    {"ChatML", "", "", "<|im_end|>", Shape::any_roles},
};

std::string template_source(const Family& f) {
  if (!*f.file) return chat::ChatTemplate::chatml_source();
  // MINFER_CHAT_TEMPLATES points the test at another folder of templates with the same names.
  const char* dir = std::getenv("MINFER_CHAT_TEMPLATES");
  return read_text_file(dir && *dir ? std::filesystem::path(dir) / f.file
                                    : std::filesystem::path(MINFER_CHAT_TEST_DATA) / "templates" / f.file);
}

// Our rendering of one variable set, through the same ChatTemplate the programs use.
OracleResult render_ours(const chat::ChatTemplate& t, const ojson& vars) {
  chat::ChatInputs in;
  in.messages = examples::json_to_value(vars.at("messages"));
  if (vars.contains("tools")) in.tools = examples::json_to_value(vars.at("tools"));
  in.add_generation_prompt = vars.at("add_generation_prompt").get<bool>();
  if (vars.contains("enable_thinking")) in.enable_thinking = vars.at("enable_thinking").get<bool>();
  for (const char* k : {"reasoning_effort", "model_identity"})
    if (vars.contains(k)) in.extra.emplace_back(k, examples::json_to_value(vars.at(k)));
  OracleResult r;
  try {
    r.text = t.render(in).s;
    r.ok = true;
  } catch (const jinja::TemplateError& e) {
    r.error = e.what();
  }
  return r;
}

class TemplateFamily : public ::testing::TestWithParam<Family> {};

TEST_P(TemplateFamily, RendersLikeJinja2OnRandomConversations) {
  if (!oracle_available()) GTEST_SKIP() << "python3-jinja2 is not installed (scripts/setup.sh installs it)";
  const Family& f = GetParam();
  const uint64_t seed = tokenizer::test::test_seed();
  SCOPED_TRACE("MINFER_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string src = template_source(f);
  const chat::ChatTemplate t(src, f.bos, f.eos, f.name);
  std::vector<ojson> cases;
  for (int k = 0; k < 100; ++k) cases.push_back(random_conversation(f.shape, rng, f.bos, f.eos));
  const std::string date = today();
  const auto want = oracle_render(src, cases);
  ASSERT_EQ(want.size(), cases.size());
  std::vector<OracleResult> ours;
  for (const auto& c : cases) ours.push_back(render_ours(t, c));
  if (today() != date) GTEST_SKIP() << "the date changed during the test (strftime_now): run it again";
  int rendered = 0, refused = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const OracleResult& got = ours[k];
    SCOPED_TRACE("case " + std::to_string(k) + ": " + cases[k].dump());
    if (!want[k].ok) {
      EXPECT_FALSE(got.ok) << "jinja2 refused (" << want[k].error << ") but minfer rendered:\n" << got.text;
      ++refused;
      continue;
    }
    ASSERT_TRUE(got.ok) << "minfer refused: " << got.error;
    EXPECT_EQ(got.text, want[k].text);
    ++rendered;
  }
  // Every family must really be exercised, not refused wholesale.
  EXPECT_GE(rendered, 20) << refused << " refused";
  std::printf("[ %s ] %d conversations rendered identically, %d refused by both\n", f.name, rendered, refused);
}

INSTANTIATE_TEST_SUITE_P(Families, TemplateFamily, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return std::string(info.param.name) == "Qwen2.5-Instruct" ? std::string("Qwen25Instruct")
                                                       : std::string(info.param.name) == "Llama3.1" ? std::string("Llama31")
                                                                                                    : std::string(info.param.name); });

}  // namespace
}  // namespace minfer::test
