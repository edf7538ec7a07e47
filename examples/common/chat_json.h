// OpenAI-style chat JSON (messages, tools) -> the values a chat template sees. Every string is
// marked as data (chat/jinja/value.h taint), so nothing a client sends can become a special
// token (chat/tokenize_chat.h). Header-only: the server, the programs and the tests share it.
#pragma once

#include <nlohmann/json.hpp>

#include "chat/jinja/value.h"

namespace minfer::examples {

/// JSON -> jinja value: objects keep their key order, strings are tainted (data).
inline jinja::Value json_to_value(const nlohmann::ordered_json& j) {
  using jinja::Value;
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return jinja::tainted_string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::List l;
      for (const auto& x : j) l.push_back(json_to_value(x));
      return Value::new_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::new_dict();
      for (const auto& [k, v] : j.items()) d.dict->set(jinja::Value::string(jinja::Text::of(k, true)), json_to_value(v));
      return d;
    }
    default: return Value::undefined("binary JSON value");
  }
}

}  // namespace minfer::examples
