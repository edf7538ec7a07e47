// The engine on small templates: each construct against python3-jinja2, and the errors for what
// it does not run.
#include <gtest/gtest.h>

#include "chat/jinja/template.h"
#include "common/chat_json.h"
#include "oracle.h"

namespace minfer::test {
namespace {

TEST(Jinja, Placeholder) { SUCCEED(); }

}  // namespace
}  // namespace minfer::test
