#include "base/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace hz {

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

Result<uint64_t> parse_byte_size(std::string_view text, std::string_view what, uint64_t percent_base) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  s = s.substr(start);
  if (s.empty()) return invalid_argument("{}: empty size", what);
  size_t num_end = 0;
  while (num_end < s.size() && (std::isdigit(static_cast<unsigned char>(s[num_end])) || s[num_end] == '.')) ++num_end;
  if (num_end == 0) return invalid_argument("{}: '{}' is not a size (expected e.g. 24GiB, 512MiB or 50%)", what, text);
  std::string num = s.substr(0, num_end);
  if (num.find('.') != num.rfind('.') || num == ".")
    return invalid_argument("{}: '{}' is not a number", what, text);
  double value = std::strtod(num.c_str(), nullptr);
  std::string unit = lower(s.substr(num_end));
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  double mult = 0;
  if (unit == "%") {
    if (percent_base == 0) return invalid_argument("{}: a percentage is not allowed here ('{}')", what, text);
    if (value > 100) return invalid_argument("{}: {}% is more than 100%", what, num);
    return static_cast<uint64_t>(std::floor(static_cast<double>(percent_base) * value / 100.0));
  }
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else {
    const char prefixes[] = "kmgtp";
    const char* p = unit.empty() ? nullptr : std::strchr(prefixes, unit[0]);
    if (p == nullptr) return invalid_argument("{}: unknown unit '{}' in '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB or %)", what, s.substr(num_end), text);
    int power = static_cast<int>(p - prefixes) + 1;
    std::string rest = unit.substr(1);
    double base;
    if (rest.empty() || rest == "ib" || rest == "i") {
      base = 1024;
    } else if (rest == "b") {
      base = 1000;
    } else {
      return invalid_argument("{}: unknown unit '{}' in '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB or %)", what, s.substr(num_end), text);
    }
    mult = std::pow(base, power);
  }
  double bytes = value * mult;
  if (!(bytes < 1.8e19)) return invalid_argument("{}: '{}' is too large", what, text);
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, kUnits[u]);
}

}  // namespace hz
