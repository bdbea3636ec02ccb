// Drives horizon's web pages in Debian's chromium through puppeteer-core (pinned, test-only).
// Usage: node web_ui.mjs BASE_URL OUT_DIR [API_KEY]
// Chat page: headers, the API key dialog (with a key), Markdown rendering and its safety, a short
// streamed reply, a long reply stopped mid-stream (the server's running requests drop to 0 and it
// counts a 499), a reply holding HTML shown as text. Status page: its numbers change after a request.
// Screenshots go to OUT_DIR. Prints one JSON object; exits 1 with the reason on the first failure.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const puppeteer = require('puppeteer-core');

const [base, outDir, apiKey = ''] = process.argv.slice(2);
const tag = apiKey ? 'key' : 'open';
const authHeaders = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
// How long the page may take to reach a state: generous, because CI runs this beside other tests
// on two cores (a 10 s wait for the status page's first update ran out there once).
const WAIT_MS = 30000;
const result = { mode: tag, screenshots: [] };

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function status() {
  const r = await fetch(`${base}/v1/status`, { headers: authHeaders });
  check(r.ok, `GET /v1/status answers ${r.status}`);
  return r.json();
}

async function metric(name) {
  const r = await fetch(`${base}/metrics`, { headers: authHeaders });
  // Every series carries a model_name label; read the lines without it.
  const text = (await r.text()).replace(/\{model_name="[^"]*"\}/g, '').replace(/model_name="[^"]*",/g, '');
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

async function waitFor(fn, what, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function shot(page, name, fullPage = false) {
  const file = path.join(outDir, `web-${name}-${tag}.png`);
  await page.screenshot({ path: file, fullPage });
  result.screenshots.push(file);
}

async function enterKey(page, key) {
  await page.waitForSelector('#key-dialog[open]', { timeout: WAIT_MS });
  await page.type('#key-input', key);
  await page.click('#key-submit');
}

// Sets a settings field the way a person does: type, then leave the field.
async function setField(page, selector, value) {
  await page.$eval(selector, (e) => { e.value = ''; });
  await page.type(selector, String(value));
  await page.$eval(selector, (e) => e.dispatchEvent(new Event('change')));
}

async function sendMessage(page, text) {
  await page.type('#input', text);
  await page.keyboard.press('Enter');
}

const lastReply = (page, fn) => page.$eval('.msg.assistant:last-of-type', fn);

fs.rmSync(path.join(outDir, `web-failure-${tag}.png`), { force: true });
const browser = await puppeteer.launch({
  executablePath: process.env.HORIZON_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check'],
  defaultViewport: { width: 1280, height: 800 },
});
let page;
const pageErrors = [];
try {
  page = await browser.newPage();
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // 401s are expected before the key is entered; anything else (a CSP violation, a script error) is not.
    if (m.type() === 'error' && !/status of 401/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
  });

  // ---- the chat page and its headers ----
  const response = await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
  const h = response.headers();
  check(response.status() === 200, `GET / answers 200 (got ${response.status()})`);
  check(h['content-type'] === 'text/html; charset=utf-8', `content type of / (${h['content-type']})`);
  check(/default-src 'self'/.test(h['content-security-policy'] || '') &&
        /script-src 'self'(;|$)/.test(h['content-security-policy']), `CSP of / (${h['content-security-policy']})`);
  check(h['x-content-type-options'] === 'nosniff', 'nosniff on /');
  check(Boolean(h.etag), 'ETag on /');
  const js = await fetch(`${base}/chat.js`, { headers: { 'If-None-Match': h.etag } });
  check(js.status === 200 && js.headers.get('content-type').startsWith('text/javascript'), 'chat.js is JavaScript');
  const again = await fetch(`${base}/chat.js`, { headers: { 'If-None-Match': js.headers.get('etag') } });
  check(again.status === 304, `a matching If-None-Match gets 304 (got ${again.status})`);

  if (apiKey) {
    const denied = await fetch(`${base}/v1/status`);
    check(denied.status === 401, `the status feed needs the key (got ${denied.status})`);
    await enterKey(page, 'not-the-key');
    await page.waitForFunction(() => document.getElementById('key-dialog').open &&
                               /did not accept/.test(document.getElementById('key-error')?.textContent),
                               { timeout: WAIT_MS });
    await page.type('#key-input', apiKey);
    await page.click('#key-submit');
  }
  const model = (await status()).model;
  await page.waitForFunction((m) => document.getElementById('model-name')?.textContent === m, { timeout: WAIT_MS }, model);
  if (apiKey) {
    check(await page.evaluate(() => sessionStorage.getItem('horizon.apiKey')) === apiKey, 'the key is in sessionStorage');
    check(await page.evaluate(() => localStorage.getItem('horizon.apiKey')) === null, 'the key is not in localStorage');
  }

  // ---- Markdown: structure, and model text never becoming HTML ----
  const md = await page.evaluate(async () => {
    const { renderMarkdown } = await import('/markdown.js');
    const render = (text) => {
      const box = document.createElement('div');
      box.append(renderMarkdown(text));
      return box;
    };
    const hostile = render('Hi <script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">\n\n' +
                           '<b onclick="x()">bold?</b> [link](javascript:window.__pwned=3) ' +
                           '[data](data:text/html,<script>alert(1)</script>) ![img](https://example.com/x.png)\n\n' +
                           '```html\n<iframe src="https://example.com"></iframe>\n```');
    const rich = render('# Title\n\nSome **bold**, *italic*, ~~gone~~, `a<b>` and snake_case_name.\n\n' +
                        '- one\n- two\n  - nested\n\n1. first\n2. second\n\n> quoted\n\n' +
                        '| a | b |\n|---|--:|\n| 1 | 2 |\n\n---\n\nSee https://example.com/docs.');
    return {
      hostileElements: [...hostile.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()),
      hostileText: hostile.textContent,
      hostileHrefs: [...hostile.querySelectorAll('a')].map((a) => a.getAttribute('href')),
      hostileAttributes: [...hostile.querySelectorAll('*')].flatMap((e) => e.getAttributeNames()),
      richTags: [...rich.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()),
      richCode: rich.querySelector('p code')?.textContent,
      richText: rich.querySelector('p').textContent,
      nested: rich.querySelector('ul ul li')?.textContent,
      pwned: window.__pwned,
    };
  });
  check(md.pwned === undefined, 'no hostile script ran');
  check(md.hostileElements.every((t) => ['p', 'br', 'pre', 'code', 'a'].includes(t)),
        `hostile Markdown made only text elements (${md.hostileElements})`);
  check(md.hostileText.includes('<script>window.__pwned = 1</script>') && md.hostileText.includes('<img src=x') &&
        md.hostileText.includes('<iframe src='), 'hostile HTML shows as text');
  check(md.hostileHrefs.length === 1 && md.hostileHrefs[0] === 'https://example.com/x.png',
        `only the https link became a link (${md.hostileHrefs})`);
  check(md.hostileAttributes.every((a) => ['href', 'rel', 'target', 'data-lang'].includes(a)),
        `no attribute from the text (${md.hostileAttributes})`);
  for (const t of ['h1', 'strong', 'em', 'del', 'code', 'ul', 'ol', 'blockquote', 'table', 'th', 'td', 'hr', 'a']) {
    check(md.richTags.includes(t), `Markdown renders <${t}>`);
  }
  check(md.richCode === 'a<b>', 'a code span keeps its text');
  check(md.richText.includes('snake_case_name'), 'snake_case stays text');
  check(md.nested === 'nested', 'a nested list');
  result.markdown = 'ok';

  // ---- the status page's feed adapter: the /metrics.json twin of /metrics -> the page's figures ----
  const feed = await page.evaluate(async () => {
    const { fromMetricsJson, quantile } = await import('/feed.js');
    const g = (value, labels = {}) => ({ labels, value });
    const twin = { time_unix_ms: 1, metrics: {
      horizon_requests_running: { type: 'gauge', series: [g(2)] },
      horizon_requests_waiting: { type: 'gauge', series: [g(1)] },
      horizon_generation_tokens_total: { type: 'counter', series: [g(120)] },
      horizon_requests_finished_total: { type: 'counter', series: [g(3, { finish_reason: 'stop' }),
                                                                   g(4, { finish_reason: 'length' })] },
      horizon_kv_blocks_total: { type: 'gauge', series: [g(64)] },
      horizon_kv_tier_bytes_used: { type: 'gauge', series: [g(1000, { tier: 'ram' }), g(5000, { tier: 'disk' })] },
      horizon_kv_tier_bytes_total: { type: 'gauge', series: [g(9000, { tier: 'ram' }), g(8000, { tier: 'disk' })] },
      horizon_time_to_first_token_seconds: { type: 'histogram', series: [{ labels: {}, count: 4, sum: 1,
        buckets: [{ le: 0.1, count: 1 }, { le: 0.5, count: 3 }, { le: 1, count: 3 }] }] },
    } };
    const m = fromMetricsJson(twin, 'm');
    return { m, p50: quantile([0.1, 0.5, 1], [1, 2, 0, 1], 0.5), p99: quantile([0.1, 0.5, 1], [1, 2, 0, 1], 0.99) };
  });
  check(feed.m.requests.running === 2 && feed.m.requests.waiting === 1 && feed.m.requests.finished_total === 7,
        `feed: requests ${JSON.stringify(feed.m.requests)}`);
  check(feed.m.kv.ram.bytes_used === 1000 && feed.m.kv.disk.enabled && feed.m.kv.disk.bytes_total === 8000 &&
        !feed.m.kv.far.enabled, `feed: tiers ${JSON.stringify(feed.m.kv)}`);
  check(JSON.stringify(feed.m.latency.ttft_seconds.buckets) === '[1,2,0,1]', 'feed: cumulative buckets per bucket');
  check(Math.abs(feed.p50 - 0.3) < 1e-9 && feed.p99 === 1, `quantiles ${feed.p50} ${feed.p99}`);
  result.feed = 'ok';

  // ---- a short streamed reply ----
  await page.click('#settings-toggle');
  await setField(page, '#temperature', 0);
  await setField(page, '#max-tokens', 80);
  await page.click('#settings-toggle');
  await sendMessage(page, 'Tell me a story about a cat.');
  // A short reply may be over before a poll could see the Stop button: wait for its figures.
  await page.waitForFunction(() => document.querySelector('.msg.assistant .meta')?.textContent &&
                             !document.querySelector('.msg.streaming'), { timeout: 30000 });
  const short = await lastReply(page, (e) => ({ text: e.querySelector('.body').textContent,
                                               meta: e.querySelector('.meta').textContent }));
  check(short.text.trim().length > 0, 'the reply has text');
  check(/TTFT \d+ ms/.test(short.meta) && /80 tokens/.test(short.meta), `reply figures: "${short.meta}"`);
  result.short_reply = short;

  // ---- a long reply: text arrives while it streams, then Stop cancels it on the server ----
  const before499 = await metric('horizon_http_requests_total{status="499"}');
  await page.click('#new-chat');
  await page.click('#settings-toggle');
  await setField(page, '#max-tokens', 16000);
  await setField(page, '#extra-json', '{"ignore_eos": true}');
  await page.click('#settings-toggle');
  await sendMessage(page, 'Once upon a time');
  const lengths = new Set();
  await waitFor(async () => {
    const n = await lastReply(page, (e) => e.querySelector('.body').textContent.length);
    if (n > 0) lengths.add(n);
    return lengths.size >= 3;
  }, 'the reply text to grow while streaming');
  check(await page.$eval('#stop', (e) => !e.hidden), 'still streaming after text arrived');
  const running = (await status()).requests.running;
  check(running >= 1, `the server runs the request mid-stream (running = ${running})`);
  await page.click('#stop');
  await page.waitForSelector('#send:not([hidden])', { timeout: WAIT_MS });
  const stopped = await lastReply(page, (e) => e.querySelector('.meta').textContent);
  await shot(page, 'chat-stopped');
  check(/stopped/.test(stopped) && /tok\/s/.test(stopped) && /TTFT/.test(stopped), `stopped reply figures: "${stopped}"`);
  const after = await waitFor(async () => {
    const s = await status();
    return s.requests.running === 0 && s.requests.waiting === 0 ? s : null;
  }, 'running requests to drop to 0 after Stop', 10000);
  const after499 = await waitFor(async () => {
    const n = await metric('horizon_http_requests_total{status="499"}');
    return n > before499 ? n : null;
  }, 'the server to count the stopped request as client-closed (499)', 10000);
  check(after.tokens.generation_total < 16000, 'the reply was cut short');
  result.stop = { stream_lengths_seen: lengths.size, running_mid_stream: running, running_after: 0,
                  status_499: after499, meta: stopped };

  // ---- the same reply flow with HTML in the model's text (a mocked stream) ----
  await page.click('#settings-toggle');
  await setField(page, '#max-tokens', 40);
  await setField(page, '#extra-json', '');
  await page.click('#settings-toggle');
  await page.click('#new-chat');
  await page.setRequestInterception(true);
  const hostileReply = 'Here is <script>window.__pwned = 4</script> and <img src=x onerror="window.__pwned = 5"> ' +
                       'with **bold** text.\n\n```html\n<b onclick="window.__pwned = 6">not bold</b>\n```\n\n' +
                       '- an item with `<code>`\n- a [link](https://example.com) and a [bad one](javascript:window.__pwned=7)\n\n' +
                       '| tag | safe |\n|---|:--:|\n| <script> | as text |\n';
  const onRequest = (req) => {
    if (req.method() !== 'POST' || !req.url().endsWith('/v1/chat/completions')) return req.continue();
    const pieces = hostileReply.match(/[^]{1,12}/g);
    const chunk = (obj) => `data: ${JSON.stringify(obj)}\n\n`;
    let body = pieces.map((p) => chunk({ choices: [{ index: 0, delta: { content: p }, finish_reason: null }] })).join('');
    body += chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    body += chunk({ choices: [], usage: { prompt_tokens: 5, completion_tokens: pieces.length } }) + 'data: [DONE]\n\n';
    req.respond({ status: 200, contentType: 'text/event-stream', body });
  };
  page.on('request', onRequest);
  await sendMessage(page, 'Show me some HTML');
  await page.waitForFunction(() => !document.querySelector('.msg.streaming') &&
                             document.querySelectorAll('.msg.assistant').length === 1, { timeout: WAIT_MS });
  page.off('request', onRequest);
  await page.setRequestInterception(false);
  const html = await lastReply(page, (e) => ({
    text: e.querySelector('.body').textContent,
    elements: [...e.querySelector('.body').querySelectorAll('*')].map((x) => x.tagName.toLowerCase()),
    links: [...e.querySelectorAll('.body a')].map((a) => a.getAttribute('href')),
    pwned: window.__pwned,
  }));
  check(html.pwned === undefined, 'no script from the reply ran');
  check(html.text.includes('<script>window.__pwned = 4</script>') && html.text.includes('<img src=x onerror=') &&
        html.text.includes('<b onclick='), `the reply's HTML shows as text ("${html.text}")`);
  check(html.elements.every((t) => ['p', 'strong', 'pre', 'code', 'ul', 'li', 'a', 'div', 'table', 'thead', 'tbody',
                                    'tr', 'th', 'td'].includes(t)), `only Markdown made elements (${html.elements})`);
  check(html.links.length === 1 && html.links[0] === 'https://example.com', `links: ${html.links}`);
  await shot(page, 'chat-html');
  result.html_reply = 'text';

  // Back to the story for the screenshot.
  await page.click('#conversations li:last-child .open');
  await page.waitForFunction(() => document.querySelectorAll('.msg').length === 2, { timeout: WAIT_MS });
  await shot(page, 'chat');

  // ---- the status page (same tab: the key is still in sessionStorage) ----
  await page.click('a[href="/status"]');
  await page.waitForFunction(() => /live/.test(document.getElementById('live-text')?.textContent) &&
                             document.getElementById('s-finished')?.textContent !== '—', { timeout: WAIT_MS });
  check(await page.$eval('#key-dialog', (d) => !d.open), 'the status page reused the key');
  const number = (id) => page.$eval(id, (e) => Number(e.textContent.replace(/[^0-9.]/g, '')));
  const finishedBefore = await number('#s-finished');
  const generatedBefore = await number('#s-gen-total');
  check(await page.$eval('#s-running', (e) => e.textContent) === '0', 'the status page shows 0 running');
  const r = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...authHeaders },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 32, temperature: 0 }),
  });
  check(r.ok, `a request for the status page answers ${r.status}`);
  await page.waitForFunction((f, g) => Number(document.getElementById('s-finished')?.textContent.replace(/[^0-9.]/g, '')) > f &&
                             Number(document.getElementById('s-gen-total')?.textContent.replace(/[^0-9.]/g, '')) >= g + 32,
                             { timeout: WAIT_MS }, finishedBefore, generatedBefore);
  await page.waitForFunction(() => document.getElementById('s-ttft-p50')?.textContent !== '—', { timeout: WAIT_MS });
  await new Promise((res) => setTimeout(res, 2500));  // a few more points on the charts
  result.status_page = {
    finished_before: finishedBefore, finished_after: await number('#s-finished'),
    generated_before: generatedBefore, generated_after: await number('#s-gen-total'),
    ttft_p50: await page.$eval('#s-ttft-p50', (e) => e.textContent),
    ram_free: await page.$eval('#s-ram-free', (e) => e.textContent),
  };
  await shot(page, 'status', true);

  if (apiKey) {
    // A new tab has no key yet: the status page asks for it.
    const fresh = await browser.newPage();
    await fresh.goto(base + '/status', { waitUntil: 'domcontentloaded' });
    await enterKey(fresh, apiKey);
    await fresh.waitForFunction(() => /live/.test(document.getElementById('live-text')?.textContent), { timeout: WAIT_MS });
    await fresh.close();
    result.status_page.asked_for_key = true;
  }
  check(pageErrors.length === 0, `no script errors or policy violations: ${pageErrors.join(' | ')}`);
  console.log(JSON.stringify(result));
} catch (e) {
  if (page) {
    try { await shot(page, 'failure'); } catch (_) { /* the page may be gone */ }
  }
  console.error(e.stack || String(e));
  if (pageErrors.length) console.error(pageErrors.join('\n'));
  process.exitCode = 1;
} finally {
  await browser.close();
}
