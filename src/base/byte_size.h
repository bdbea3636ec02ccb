// Byte sizes as people write them: "24GiB", "512MiB", "1.5G", "4096", "50%" (of a given base,
// e.g. available RAM). Parsing for flags and formatting for reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hz {

// Parses a size. Units (case-insensitive): B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB; decimal
// prefixes (KB, MB...) are powers of 1000, binary ones (KiB, K...) powers of 1024, since "24G"
// on a command line nearly always means GiB. A trailing '%' takes that share of `percent_base`
// (0 means percentages are not allowed). `what` names the flag in errors.
Result<uint64_t> parse_byte_size(std::string_view text, std::string_view what, uint64_t percent_base = 0);

// "23.50 GiB", "512.00 MiB", "100 B": binary units, two decimals.
std::string format_bytes(uint64_t bytes);

}  // namespace hz
