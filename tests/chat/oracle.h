// The test oracle: python3-jinja2 rendering a template the way Hugging Face does
// (render_jinja2.py). Tests that need it skip visibly when python3 or jinja2 is missing
// (scripts/setup.sh installs python3-jinja2).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace minfer::test {

struct OracleResult {
  bool ok = false;
  std::string text;   ///< the rendering when ok
  std::string error;  ///< jinja2's exception otherwise
};

/// Today's local date, as strftime_now("%Y-%m-%d") renders it: templates that print the date
/// can only be compared when it did not change between the two renderings.
inline std::string today() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

inline bool oracle_available() {
  static const bool ok = std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0;
  return ok;
}

inline std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Renders `tpl` with each variable set of `cases` through python3-jinja2.
inline std::vector<OracleResult> oracle_render(const std::string& tpl, const std::vector<nlohmann::ordered_json>& cases) {
  namespace fs = std::filesystem;
  static int n = 0;
  const fs::path dir = fs::temp_directory_path() / ("minfer_oracle_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  fs::create_directories(dir);
  nlohmann::ordered_json in;
  in["template"] = tpl;
  in["cases"] = nlohmann::ordered_json::array();
  for (const auto& c : cases) in["cases"].push_back({{"vars", c}});
  std::ofstream(dir / "in.json") << in.dump();
  const std::string cmd = std::string("python3 ") + MINFER_ORACLE_SCRIPT + " " + (dir / "in.json").string() + " " +
                          (dir / "out.json").string();
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("oracle failed: " + cmd);
  const auto out = nlohmann::json::parse(read_text_file(dir / "out.json"));
  std::vector<OracleResult> r;
  for (const auto& o : out) {
    OracleResult x;
    x.ok = o.contains("ok");
    if (x.ok) x.text = o["ok"].get<std::string>();
    else x.error = o["error"].get<std::string>();
    r.push_back(std::move(x));
  }
  fs::remove_all(dir);
  return r;
}

}  // namespace minfer::test
