// Builtins of the chat-template language: filters and tests (jinja_filters.cc), methods of
// str/list/dict, attribute and item access, iteration and globals (jinja_methods.cc).
#pragma once

#include <string>
#include <vector>

#include "chat/jinja_interpreter.h"

namespace hz::jinja {

Result<Value> apply_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args);
Result<bool> apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args);

// Whether `name` is a method of v's type (str.strip, list.append, dict.items, ...).
bool has_method(const Value& v, const std::string& name);
// Calls a method; list/dict mutators change `receiver` in place (copying it first if shared).
Result<Value> call_method(Interpreter& in, Value& receiver, const std::string& name, const CallArgs& args);
// obj.name: a bound method, a dict key, a namespace attribute, or undefined. Names starting
// with '_' are refused by the caller (sandbox).
Value get_attribute(const Value& obj, const std::string& name);
// obj[key]: dict key, list/str index (negative from the end), or undefined.
Value get_item(const Value& obj, const Value& key);
// The elements a for loop visits: list items, dict keys, string characters; undefined is empty.
Result<std::vector<Value>> iterate(Interpreter& in, const Value& v);
// range, namespace, dict, raise_exception, strftime_now.
void install_globals(Scope& globals);

}  // namespace hz::jinja
