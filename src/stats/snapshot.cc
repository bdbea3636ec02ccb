#include "stats/snapshot.h"

namespace hz::stats {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kCounter:
      return "counter";
    case Kind::kGauge:
      return "gauge";
    case Kind::kHistogram:
      return "histogram";
  }
  return "untyped";
}

Family& Snapshot::family(std::string_view name, std::string_view help, Kind kind) {
  for (Family& f : families_) {
    if (f.name == name) {
      if (f.help.empty()) f.help = help;
      return f;
    }
  }
  Family& f = families_.emplace_back();
  f.name = name;
  f.help = help;
  f.kind = kind;
  return f;
}

void Snapshot::add(std::string_view name, std::string_view help, Kind kind, Labels labels, Value value) {
  Series& s = family(name, help, kind).series.emplace_back();
  s.labels = std::move(labels);
  s.value = value;
}

const Family* Snapshot::find(std::string_view name) const {
  for (const Family& f : families_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

void Snapshot::label_all(const std::string& name, const std::string& value) {
  for (Family& f : families_) {
    for (Series& s : f.series) s.labels.insert(s.labels.begin(), {name, value});
  }
}

}  // namespace hz::stats
