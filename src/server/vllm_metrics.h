// vLLM's metric names for horizon's quantities (--metrics-compat vllm): dashboards, alerts and
// autoscalers written for a vLLM server read a horizon server unchanged.
#pragma once

#include "stats/snapshot.h"

namespace hz {

// Appends a vLLM-named family for each horizon family it has a counterpart for (same series,
// values and buckets; a label renamed where vLLM names it otherwise), plus vLLM's gauges for
// things horizon does not have (swapped requests, CPU swap space) at 0.
void add_vllm_names(stats::Snapshot& snapshot);

}  // namespace hz
