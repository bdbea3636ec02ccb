#include "runtime/engine_stats.h"

namespace hz {
namespace {

stats::Labels label(const char* name, const char* value) {
  if (name[0] == '\0') return {};
  return {{name, value}};
}

}  // namespace

void EngineStats::collect(stats::Snapshot& out) const {
  const EngineStats& s = *this;
#define HZ_STATS_REPORT_FIELD(field, type, kind, section, name, label_name, label_value, help, ...) \
  if (reports(StatsSection::section))                                                        \
    out.add(name, help, stats::Kind::kind, label(label_name, label_value), stats::value_of(s.field));
#define HZ_STATS_REPORT_VALUE(kind, section, name, label_name, label_value, help, expr) \
  if (reports(StatsSection::section))                                                 \
    out.add(name, help, stats::Kind::kind, label(label_name, label_value), stats::value_of(expr));
  HZ_ENGINE_STATS(HZ_STATS_REPORT_FIELD, HZ_STATS_REPORT_VALUE)
#undef HZ_STATS_REPORT_FIELD
#undef HZ_STATS_REPORT_VALUE
}

}  // namespace hz
