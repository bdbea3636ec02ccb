// `horizon tokenize -m MODEL [-p TEXT | -f FILE] [--ids] [--no-special]`: a model's tokenization of
// a text. Reads only the vocabulary, so vocabulary-only GGUFs and unsupported architectures work.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tools/cli.h"

namespace hz::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string prompt;
  std::string file;
  bool ids_only = false;
  bool no_special = false;
};

// The piece's bytes as JSON string content. Bytes that are not part of valid UTF-8 (e.g. a lone
// byte-fallback token) cannot appear in JSON text; they are written as \u00XX with XX the byte.
std::string json_escape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<uint8_t>(s[i]);
    uint32_t cp;
    size_t len = c < 0x80 ? 1 : utf8::decode(s.data() + i, s.size() - i, &cp);
    if (len == 0) {
      out += fmt::format("\\u{:04x}", c);
      ++i;
      continue;
    }
    if (len > 1) {
      out.append(s, i, len);
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\b') {
      out += "\\b";
    } else if (c == '\f') {
      out += "\\f";
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
    i += len;
  }
  return out;
}

int run_tokenize(const TokenizeOptions& o, bool have_prompt) {
  if (have_prompt == !o.file.empty()) return fail("tokenize: give exactly one of -p TEXT and -f FILE");
  std::string text = o.prompt;
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) return fail(fmt::format("tokenize: cannot read '{}'", o.file));
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return fail(fmt::format("tokenize: error reading '{}'", o.file));
    text = ss.str();
  }
  auto f = GgufFile::open(o.model);
  if (!f.ok()) return fail(f.status().message());
  auto tok = Tokenizer::from_gguf(*f);
  if (!tok.ok()) return fail(tok.status().message());

  const bool special = !o.no_special;
  std::vector<int32_t> ids = (*tok)->encode(text, /*add_special=*/special, /*parse_special=*/special);
  std::string out;
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += std::to_string(ids[i]);
    }
    out.push_back('\n');
  } else {
    for (int32_t id : ids) {
      out += fmt::format("{}\t{}\n", id, json_escape((*tok)->token_to_piece(id, /*special=*/true)));
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : fail("tokenize: cannot write the output");
}

Subcommand kTokenize("tokenize", "Print the tokens of a text under a model's vocabulary", [](CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  auto* positional = app.add_option("MODEL", o->model, "GGUF file (same as -m)");
  app.add_option("-m,--model", o->model, "GGUF file (a vocabulary-only file is enough)")->excludes(positional);
  auto* prompt = app.add_option("-p,--prompt", o->prompt, "Text to tokenize");
  app.add_option("-f,--file", o->file, "Read the text from this file (byte-exact)");
  app.add_flag("--ids", o->ids_only, "Print only the ids, space-separated on one line");
  app.add_flag("--no-special", o->no_special,
               "Add no BOS/EOS and do not parse control tokens in the text (user-defined tokens still match)");
  app.footer("Default output: one line per token, ID<TAB>PIECE, the piece's bytes escaped as JSON string "
             "content (bytes outside valid UTF-8 as \\u00XX).");
  return [o, prompt] {
    if (o->model.empty()) return fail("no model: give MODEL or -m MODEL (a GGUF file)");
    return run_tokenize(*o, prompt->count() > 0);
  };
});

}  // namespace
}  // namespace hz::cli
