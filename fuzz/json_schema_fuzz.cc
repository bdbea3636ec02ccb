// libFuzzer target for the JSON Schema compiler: any JSON text as a schema. Checks: no crash or
// hang; an accepted schema yields grammar text that parses; a refused one says why.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(in, nullptr, false);
  if (schema.is_discarded()) return 0;
  auto text = hz::grammar::json_schema_to_grammar(schema);
  if (!text.ok()) {
    if (text.status().message().empty()) __builtin_trap();
    return 0;
  }
  // The server's limits (a response_format compiles under the defaults): a schema beyond them is
  // refused, so the fuzzer spends no time on grammars no request can reach.
  auto g = hz::grammar::Grammar::parse(*text);
  if (!g.ok() && g.status().message().find("more than") == std::string::npos) __builtin_trap();
  if (g.ok()) (void)g->accepts(in);
  return 0;
}
