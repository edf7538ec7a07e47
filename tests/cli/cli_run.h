// Running a program as a user does: its exit code and its stdout and stderr together.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace minfer::test {

struct Result {
  int code;
  std::string out;  // what the command printed (see the redirections below)
};

/// Runs `cmd` through the shell as written (add the redirections you want).
inline Result run_shell(const std::string& cmd) {
  Result r{-1, {}};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// stdout and stderr together.
inline Result run(const std::string& cmd) { return run_shell(cmd + " 2>&1"); }

/// stdout alone (for output that must parse, e.g. --json).
inline Result run_stdout(const std::string& cmd) { return run_shell(cmd + " 2>/dev/null"); }

}  // namespace minfer::test
