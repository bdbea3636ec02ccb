// The status page's view of the server's figures, whichever JSON feed carries them: GET /v1/status
// (already in this shape) or the /metrics.json twin of /metrics (metric families by name, turned
// into this shape by fromMetricsJson). Pure functions: the browser test checks them directly.
//
// The shape: {model, requests: {running, waiting, queue_capacity, finished_total,
//   queue_rejections_total, preemptions_total}, tokens: {prompt_total, generation_total},
//   kv: {ram: {...}, prefix_cache: {...}, disk: {enabled, ...}, far: {enabled, ...}},
//   latency: {ttft_seconds, itl_seconds: {bounds, buckets (per bucket, last +Inf), sum, count}}}

// The q-quantile of a histogram given as bounds + per-bucket counts (the last one +Inf),
// interpolating linearly inside the bucket as Prometheus' histogram_quantile does.
export function quantile(bounds, buckets, q) {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let cumulative = 0;
  for (let i = 0; i < buckets.length; ++i) {
    const prev = cumulative;
    cumulative += buckets[i];
    if (cumulative >= rank && buckets[i] > 0) {
      if (i >= bounds.length) return bounds[bounds.length - 1];  // the +Inf bucket
      const lower = i === 0 ? 0 : bounds[i - 1];
      return lower + (bounds[i] - lower) * ((rank - prev) / buckets[i]);
    }
  }
  return bounds[bounds.length - 1];
}

// /metrics.json ({metrics: {name: {type, series: [{labels, value} | {count, sum, buckets}]}}}) ->
// the shape above. A family that is absent reads as 0; a tier whose families are absent is off.
export function fromMetricsJson(feed, model) {
  const families = feed.metrics || {};
  const series = (name, labels = {}) => {
    const f = families[name];
    if (!f || !Array.isArray(f.series)) return null;
    return f.series.find((s) => Object.entries(labels).every(([k, v]) => (s.labels || {})[k] === v)) || null;
  };
  const has = (name, labels) => series(name, labels) !== null;
  const value = (name, labels) => Number(series(name, labels)?.value ?? 0);
  const sumOf = (name) => (families[name]?.series || []).reduce((a, s) => a + Number(s.value || 0), 0);
  const histogram = (name) => {
    const s = series(name);
    if (!s) return { bounds: [1], buckets: [0, 0], sum: 0, count: 0 };
    // Cumulative finite buckets -> per bucket, plus the +Inf bucket from the total count.
    const bounds = s.buckets.map((b) => Number(b.le));
    const buckets = s.buckets.map((b, i) => b.count - (i ? s.buckets[i - 1].count : 0));
    buckets.push(s.count - (s.buckets.length ? s.buckets[s.buckets.length - 1].count : 0));
    return { bounds, buckets, sum: s.sum, count: s.count };
  };
  return {
    model,
    requests: {
      running: value('horizon_requests_running'),
      waiting: value('horizon_requests_waiting'),
      queue_capacity: value('horizon_queue_capacity'),
      finished_total: sumOf('horizon_requests_finished_total'),
      queue_rejections_total: value('horizon_queue_rejections_total'),
      preemptions_total: value('horizon_preemptions_total'),
    },
    tokens: {
      prompt_total: value('horizon_prompt_tokens_total'),
      generation_total: value('horizon_generation_tokens_total'),
    },
    kv: {
      ram: {
        blocks_total: value('horizon_kv_blocks_total'),
        blocks_used: value('horizon_kv_blocks_used'),
        blocks_cached: value('horizon_kv_blocks_cached'),
        blocks_free: value('horizon_kv_blocks_free'),
        bytes_used: value('horizon_kv_tier_bytes_used', { tier: 'ram' }),
        bytes_total: value('horizon_kv_tier_bytes_total', { tier: 'ram' }),
      },
      prefix_cache: {
        blocks: value('horizon_kv_blocks_cached'),
        queries: value('horizon_prefix_cache_queries_total'),
        hits: value('horizon_prefix_cache_hits_total'),
        evictions: value('horizon_prefix_cache_evictions_total'),
      },
      disk: {
        enabled: has('horizon_kv_tier_bytes_used', { tier: 'disk' }),
        degraded: value('horizon_kv_disk_degraded') > 0,
        blocks: value('horizon_kv_tier_blocks', { tier: 'disk' }),
        bytes_used: value('horizon_kv_tier_bytes_used', { tier: 'disk' }),
        bytes_total: value('horizon_kv_tier_bytes_total', { tier: 'disk' }),
        hits: value('horizon_kv_disk_hits_total'),
        promotions: value('horizon_kv_disk_promotions_total'),
        demotions: value('horizon_kv_disk_demotions_total'),
      },
      far: {
        enabled: has('horizon_kv_far_blocks'),
        degraded: value('horizon_kv_far_degraded') > 0,
        blocks: value('horizon_kv_far_blocks'),
        bytes_used: value('horizon_kv_far_bytes_used'),
        bytes_total: value('horizon_kv_far_bytes_total'),
        spills: value('horizon_kv_far_spills_total'),
      },
    },
    latency: {
      ttft_seconds: histogram('horizon_time_to_first_token_seconds'),
      itl_seconds: histogram('horizon_inter_token_latency_seconds'),
    },
  };
}

// Either feed -> the shape above.
export function normalizeFeed(feed, model) {
  return feed && feed.metrics ? fromMetricsJson(feed, model) : feed;
}
