// The global functions: range, namespace, dict, and HF's raise_exception and strftime_now.
#include <ctime>

#include "chat/jinja/builtins_util.h"
#include "chat/jinja/interpreter.h"

namespace minfer::jinja {

using namespace detail;

namespace {

std::string strftime_now(const std::string& fmt) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  return std::string(buf, n);
}

}  // namespace

Value global_function(std::string_view name) {
  if (name == "range")
    return Value::function([](Interpreter&, CallArgs& a) {
      if (a.args.empty() || a.args.size() > 3) fail("range expects 1 to 3 integer arguments");
      int64_t start = 0, stop, step = 1;
      if (a.args.size() == 1) stop = need_int(a.args[0], "range's stop");
      else {
        start = need_int(a.args[0], "range's start");
        stop = need_int(a.args[1], "range's stop");
        if (a.args.size() == 3) step = need_int(a.args[2], "range's step");
      }
      if (step == 0) fail("range() arg 3 must not be zero");
      List out;
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
        out.push_back(Value::integer(k));
        if (out.size() > 100000) fail("range is too long (over 100000 items)");
      }
      return Value::new_list(std::move(out));
    });
  if (name == "namespace" || name == "dict")
    return Value::function([name](Interpreter& in, CallArgs& a) {
      Value ns = name == "namespace" ? Value::new_namespace() : Value::new_dict();
      if (name == "namespace") in.track_namespace(ns.dict);
      for (const Value& init : a.args) {
        if (!init.is_dict()) fail(std::string(name) + "() takes keyword arguments or a dict");
        for (const auto& [k, v] : init.dict->items) ns.dict->set(k, v);
      }
      for (const auto& [k, v] : a.kwargs) ns.dict->set(k, v);
      return ns;
    });
  if (name == "raise_exception")
    return Value::function([](Interpreter&, CallArgs& a) -> Value {
      fail("raise_exception: " + a.get(0, "message").to_text().s);
    });
  if (name == "strftime_now")
    return Value::function([](Interpreter&, CallArgs& a) {
      return Value::string(Text(strftime_now(need_string(a.get(0, "format"), "the format"))));
    });
  return Value::undefined(std::string(name));
}

}  // namespace minfer::jinja
