// The status page: polls GET /v1/status (the JSON twin of /metrics) once a second and shows the KV
// tiers, the queue, throughput and latency percentiles as numbers and small live charts. Rates and
// windowed percentiles come from differences between polls.
import { el, apiFetch, errorText, formatBytes, formatNumber, formatSeconds } from './common.js';
import { Chart, COLORS } from './charts.js';
import { normalizeFeed, quantile } from './feed.js';

const STATUS_URL = '/v1/status';
const POLL_MS = 1000;
const HISTORY = 120;    // points per chart (two minutes)
const WINDOW_S = 30;    // percentiles and hit rates over this window

const samples = [];     // [{t: seconds, s: status JSON}], oldest first, HISTORY + 1 at most
const cards = {};       // name -> {values: {key: element}, chart, series: [[...]], note}

const $ = (id) => document.getElementById(id);

// ---- figures from the JSON ---------------------------------------------------------------------

function bucketDiff(now, then) {
  return now.buckets.map((b, i) => b - (then ? then.buckets[i] : 0));
}

// The sample closest to `seconds` before the newest one (or the oldest there is).
function sampleBefore(seconds) {
  const newest = samples[samples.length - 1];
  for (let i = samples.length - 2; i >= 0; --i) if (newest.t - samples[i].t >= seconds) return samples[i];
  return samples.length > 1 ? samples[0] : null;
}

// Percentiles over the window, or since start when the window saw no sample.
function percentiles(key) {
  const now = samples[samples.length - 1].s.latency[key];
  const then = sampleBefore(WINDOW_S);
  let buckets = bucketDiff(now, then && then.s.latency[key]);
  let scope = `last ${WINDOW_S} s`;
  if (buckets.every((b) => b === 0)) {
    buckets = now.buckets;
    scope = 'since start';
  }
  return { p50: quantile(now.bounds, buckets, 0.5), p90: quantile(now.bounds, buckets, 0.9),
           p99: quantile(now.bounds, buckets, 0.99), count: buckets.reduce((a, b) => a + b, 0), scope };
}

function rate(get, seconds) {
  const then = sampleBefore(seconds);
  const now = samples[samples.length - 1];
  if (!then || now.t <= then.t) return null;
  return Math.max(0, (get(now.s) - get(then.s)) / (now.t - then.t));
}

function ratio(hits, queries) {
  return queries > 0 ? hits / queries : null;
}

const pct = (v) => (v === null ? '—' : `${(v * 100).toFixed(1)} %`);

// ---- cards -------------------------------------------------------------------------------------

// A card with named figures, an optional bar and a chart with a legend.
function card(name, title, figures, chart) {
  const values = {};
  const grid = el('dl', { class: 'figures' });
  for (const [key, label] of figures) {
    values[key] = el('dd', { id: `s-${key}`, text: '—' });
    grid.append(el('div', { class: 'figure' }, el('dt', { text: label }), values[key]));
  }
  const note = el('p', { class: 'note' });
  const bar = chart && chart.bar ? el('div', { class: 'bar', role: 'img' }) : null;
  const canvas = chart ? el('canvas', { class: 'chart', 'aria-label': `${title} over time` }) : null;
  const legend = chart ? el('ul', { class: 'legend' }) : null;
  if (chart) {
    chart.series.forEach((s, k) => {
      const idx = s.colorIdx ?? k;
      s.color = COLORS[idx % COLORS.length];
      legend.append(el('li', {}, el('span', { class: `swatch c${idx}` }), s.label));
    });
  }
  const root = el('section', { class: 'card', id: `card-${name}` }, el('h2', { text: title }), grid, bar, note,
                  canvas, legend);
  $('cards').append(root);
  cards[name] = {
    values, note, bar,
    chart: chart ? new Chart(canvas, chart.series, chart.options || {}) : null,
    series: chart ? chart.series.map(() => []) : [],
  };
  return cards[name];
}

function set(name, key, text) {
  cards[name].values[key].textContent = text;
}

function push(name, ...points) {
  const c = cards[name];
  points.forEach((v, k) => {
    c.series[k].push(v);
    if (c.series[k].length > HISTORY) c.series[k].shift();
  });
}

// A stacked bar: parts [{value, label, colorIdx}] of `total`.
function setBar(name, parts, total) {
  const bar = cards[name].bar;
  bar.replaceChildren();
  parts.forEach((p, k) => {
    const seg = el('span', { class: `seg c${p.colorIdx ?? k}`, title: `${p.label}: ${formatNumber(p.value)}` });
    seg.style.width = `${total > 0 ? (100 * p.value) / total : 0}%`;
    bar.append(seg);
  });
  bar.setAttribute('aria-label', parts.map((p) => `${p.label} ${formatNumber(p.value)}`).join(', '));
}

function buildCards() {
  const perSecond = (v) => `${formatNumber(v, v < 10 ? 1 : 0)}/s`;
  card('requests', 'Requests', [['running', 'running'], ['waiting', 'waiting'], ['finished', 'finished'],
                                ['rejected', 'rejected (queue full)']],
       { series: [{ label: 'running' }, { label: 'waiting' }], options: { format: (v) => formatNumber(v) } });
  card('throughput', 'Throughput', [['gen-tps', 'generated tok/s'], ['prompt-tps', 'prompt tok/s'],
                                    ['gen-total', 'generated tokens'], ['prompt-total', 'prompt tokens']],
       { series: [{ label: 'generated tok/s' }, { label: 'prompt tok/s' }], options: { format: perSecond } });
  card('ttft', 'Time to first token', [['ttft-p50', 'p50'], ['ttft-p90', 'p90'], ['ttft-p99', 'p99'],
                                       ['ttft-count', 'requests']],
       { series: [{ label: 'p50' }, { label: 'p99' }], options: { format: formatSeconds } });
  card('itl', 'Inter-token latency', [['itl-p50', 'p50'], ['itl-p90', 'p90'], ['itl-p99', 'p99'],
                                      ['itl-count', 'tokens']],
       { series: [{ label: 'p50' }, { label: 'p99' }], options: { format: formatSeconds } });
  card('ram', 'KV · RAM pool', [['ram-used', 'blocks in use'], ['ram-cached', 'blocks cached'],
                                ['ram-free', 'blocks free'], ['ram-bytes', 'memory']],
       { bar: true, series: [{ label: 'in use' }, { label: 'cached', colorIdx: 2 }],
         options: { stacked: true, format: (v) => formatNumber(v) } });
  card('prefix', 'KV · prefix cache', [['prefix-blocks', 'blocks cached'], ['prefix-hit', 'hit rate'],
                                       ['prefix-hit-all', 'hit rate since start'], ['prefix-evictions', 'evictions']],
       { series: [{ label: 'hit rate' }], options: { min: 0, max: 1, format: (v) => `${v * 100} %` } });
  card('disk', 'KV · disk store', [['disk-blocks', 'blocks'], ['disk-bytes', 'bytes used'],
                                   ['disk-free', 'bytes free'], ['disk-hits', 'hits · promotions']],
       { bar: true, series: [{ label: 'bytes used' }], options: { format: formatBytes } });
  card('far', 'KV · far tier', [['far-blocks', 'blocks'], ['far-bytes', 'bytes used'], ['far-free', 'bytes free'],
                                ['far-spills', 'spills']],
       { bar: true, series: [{ label: 'bytes used' }], options: { format: formatBytes } });
}

// A tier that may be off: a note saying so, its figures dashed.
function tierOff(name, text) {
  cards[name].note.textContent = text;
  document.getElementById(`card-${name}`).classList.toggle('off', Boolean(text));
}

function update() {
  const s = samples[samples.length - 1].s;
  $('model-name').textContent = s.model || modelName || '—';
  const r = s.requests;
  set('requests', 'running', formatNumber(r.running));
  set('requests', 'waiting', r.queue_capacity ? `${formatNumber(r.waiting)} / ${formatNumber(r.queue_capacity)}`
                                              : formatNumber(r.waiting));
  set('requests', 'finished', formatNumber(r.finished_total));
  set('requests', 'rejected', formatNumber(r.queue_rejections_total));
  cards.requests.note.textContent = `running: in the batch · waiting: queued · preempted ${formatNumber(r.preemptions_total)}`;
  push('requests', r.running, r.waiting);

  const genTps = rate((x) => x.tokens.generation_total, 2);
  const promptTps = rate((x) => x.tokens.prompt_total, 2);
  set('throughput', 'gen-tps', genTps === null ? '—' : formatNumber(genTps, 1));
  set('throughput', 'prompt-tps', promptTps === null ? '—' : formatNumber(promptTps, 1));
  set('throughput', 'gen-total', formatNumber(s.tokens.generation_total));
  set('throughput', 'prompt-total', formatNumber(s.tokens.prompt_total));
  cards.throughput.note.textContent = 'tokens per second over the last 2 s';
  push('throughput', genTps, promptTps);

  for (const [name, key] of [['ttft', 'ttft_seconds'], ['itl', 'itl_seconds']]) {
    const p = percentiles(key);
    set(name, `${name}-p50`, formatSeconds(p.p50));
    set(name, `${name}-p90`, formatSeconds(p.p90));
    set(name, `${name}-p99`, formatSeconds(p.p99));
    set(name, `${name}-count`, formatNumber(s.latency[key].count));
    cards[name].note.textContent = `percentiles ${p.scope}`;
    push(name, p.scope === 'since start' ? null : p.p50, p.scope === 'since start' ? null : p.p99);
  }

  const ram = s.kv.ram;
  set('ram', 'ram-used', formatNumber(ram.blocks_used));
  set('ram', 'ram-cached', formatNumber(ram.blocks_cached));
  set('ram', 'ram-free', `${formatNumber(ram.blocks_free)} of ${formatNumber(ram.blocks_total)}`);
  set('ram', 'ram-bytes', `${formatBytes(ram.bytes_used)} of ${formatBytes(ram.bytes_total)}`);
  cards.ram.note.textContent = 'in use: by running requests · cached: for prefix reuse';
  setBar('ram', [{ value: ram.blocks_used, label: 'in use' }, { value: ram.blocks_cached, label: 'cached', colorIdx: 2 }],
         ram.blocks_total);
  push('ram', ram.blocks_used, ram.blocks_cached);

  const pc = s.kv.prefix_cache;
  const then = sampleBefore(WINDOW_S);
  const windowHit = then ? ratio(pc.hits - then.s.kv.prefix_cache.hits, pc.queries - then.s.kv.prefix_cache.queries)
                         : null;
  set('prefix', 'prefix-blocks', formatNumber(pc.blocks));
  set('prefix', 'prefix-hit', pct(windowHit));
  set('prefix', 'prefix-hit-all',
      pc.queries === 0 ? '—' : `${pct(ratio(pc.hits, pc.queries))} · ${formatNumber(pc.hits)}/${formatNumber(pc.queries)}`);
  set('prefix', 'prefix-evictions', formatNumber(pc.evictions));
  cards.prefix.note.textContent = pc.queries === 0 ? 'no lookups yet (is --enable-prefix-caching on?)'
                                                   : `hit rate: prompt blocks found, last ${WINDOW_S} s`;
  push('prefix', windowHit);

  const disk = s.kv.disk;
  set('disk', 'disk-blocks', disk.enabled ? formatNumber(disk.blocks) : '—');
  set('disk', 'disk-bytes', disk.enabled ? `${formatBytes(disk.bytes_used)} of ${formatBytes(disk.bytes_total)}` : '—');
  set('disk', 'disk-free', disk.enabled ? formatBytes(Math.max(0, disk.bytes_total - disk.bytes_used)) : '—');
  set('disk', 'disk-hits', disk.enabled ? `${formatNumber(disk.hits)} · ${formatNumber(disk.promotions)}` : '—');
  setBar('disk', [{ value: disk.bytes_used, label: 'used' }], disk.bytes_total);
  tierOff('disk', !disk.enabled ? 'off (start the server with --kv-disk-dir DIR)'
                                : disk.degraded ? 'degraded: an I/O error turned it off' : '');
  push('disk', disk.enabled ? disk.bytes_used : null);

  const far = s.kv.far;
  set('far', 'far-blocks', far.enabled ? formatNumber(far.blocks) : '—');
  set('far', 'far-bytes', far.enabled ? `${formatBytes(far.bytes_used)} of ${formatBytes(far.bytes_total)}` : '—');
  set('far', 'far-free', far.enabled ? formatBytes(Math.max(0, far.bytes_total - far.bytes_used)) : '—');
  set('far', 'far-spills', far.enabled ? formatNumber(far.spills) : '—');
  setBar('far', [{ value: far.bytes_used, label: 'used' }], far.bytes_total);
  tierOff('far', !far.enabled ? 'off (long sequences spill here with --kv-disk-dir DIR)'
                              : far.degraded ? 'degraded: an I/O error stopped spills' : '');
  push('far', far.enabled ? far.bytes_used : null);

  const remote = s.kv.remote;
  if (remote) {
    if (!cards.remote) {
      card('remote', 'KV · remote tier', [['remote-blocks', 'blocks'], ['remote-bytes', 'bytes used'],
                                          ['remote-hits', 'hits'], ['remote-errors', 'errors']],
           { series: [{ label: 'bytes used' }], options: { format: formatBytes } });
    }
    const num = (v) => (v === undefined ? '—' : formatNumber(v));
    set('remote', 'remote-blocks', num(remote.blocks));
    set('remote', 'remote-bytes', remote.bytes_used === undefined ? '—' : formatBytes(remote.bytes_used));
    set('remote', 'remote-hits', num(remote.hits));
    set('remote', 'remote-errors', num(remote.errors));
    tierOff('remote', remote.enabled === false ? 'off' : remote.degraded ? 'degraded: recomputing instead' : '');
    push('remote', remote.bytes_used ?? null);
  }

  drawCharts();
}

function drawCharts() {
  // The x axis holds 30 s at first and grows to HISTORY points, so a new page shows its data.
  const n = samples.length;
  const capacity = Math.min(HISTORY, Math.max(30, n));
  for (const c of Object.values(cards)) if (c.chart) c.chart.draw(c.series, capacity);
}

async function poll() {
  try {
    const response = await apiFetch(STATUS_URL, { cache: 'no-store' });
    if (!response.ok) throw new Error(await errorText(response));
    const s = normalizeFeed(await response.json(), modelName);
    samples.push({ t: performance.now() / 1000, s });
    if (samples.length > HISTORY + 1) samples.shift();
    update();
    $('live-dot').className = 'dot ok';
    $('live-text').textContent = `live · updated ${new Date().toLocaleTimeString('en-GB')}`;
  } catch (e) {
    $('live-dot').className = 'dot bad';
    $('live-text').textContent = `not updating: ${e.message}`;
  }
  setTimeout(poll, POLL_MS);
}

// The model's name, for a feed that does not carry it.
let modelName = null;
async function loadModelName() {
  try {
    const response = await apiFetch('/v1/models');
    if (response.ok) modelName = (await response.json()).data?.[0]?.id || null;
  } catch (_) { /* the feed's errors are shown by poll() */ }
}

buildCards();
window.addEventListener('resize', drawCharts);
loadModelName().then(poll);
