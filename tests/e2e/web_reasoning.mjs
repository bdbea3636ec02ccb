// The chat page with a model that reasons (stories260K behind a chat template that opens the
// reasoning, so its whole story is reasoning_content): the thinking shows in its own folded block
// above the answer, with the same text the API returns, and the answer stays empty.
// Usage: node web_reasoning.mjs BASE_URL OUT_DIR. Prints one JSON object; exits 1 on a failure.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const puppeteer = require('puppeteer-core');

const [base, outDir] = process.argv.slice(2);
const WAIT_MS = 30000;

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function setField(page, selector, value) {
  await page.$eval(selector, (e) => { e.value = ''; });
  await page.type(selector, String(value));
  await page.$eval(selector, (e) => e.dispatchEvent(new Event('change')));
}

const browser = await puppeteer.launch({
  executablePath: process.env.HORIZON_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check'],
  defaultViewport: { width: 1280, height: 800 },
});
const pageErrors = [];
let page;
try {
  page = await browser.newPage();
  page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(`console: ${m.text()}`); });
  await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => document.getElementById('model-name')?.textContent, { timeout: WAIT_MS });
  await page.click('#settings-toggle');
  await setField(page, '#temperature', 0);
  await setField(page, '#max-tokens', 40);
  await page.click('#settings-toggle');
  await page.type('#input', 'Once upon a time');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('.msg.assistant .meta')?.textContent &&
                             !document.querySelector('.msg.streaming'), { timeout: WAIT_MS });
  const shown = await page.$eval('.msg.assistant:last-of-type', (e) => ({
    hidden: e.querySelector('.reasoning').hidden,
    open: e.querySelector('.reasoning').open,
    thoughts: e.querySelector('.reasoning .thoughts').textContent,
    answer: e.querySelector('.body').textContent,
    meta: e.querySelector('.meta').textContent,
  }));
  await page.screenshot({ path: path.join(outDir, 'web-reasoning.png') });
  const api = await (await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Once upon a time' }], temperature: 0, max_tokens: 40 }),
  })).json();
  const message = api.choices[0].message;
  check(!shown.hidden, 'the thinking block is shown');
  check(shown.open, 'the thinking block is open while there is no answer');
  check(shown.thoughts.length > 20, `the thinking has text: "${shown.thoughts}"`);
  check(shown.thoughts === message.reasoning_content,
        `the page shows the API's reasoning_content: "${shown.thoughts}" vs "${message.reasoning_content}"`);
  check(shown.answer.trim() === '' && message.content === '', `no answer: "${shown.answer}"`);
  check(/40 tokens/.test(shown.meta), `reply figures count the thinking: "${shown.meta}"`);
  check(pageErrors.length === 0, `no script errors: ${pageErrors.join(' | ')}`);
  console.log(JSON.stringify({ thoughts: shown.thoughts }));
} catch (e) {
  console.error(e.stack || String(e));
  if (pageErrors.length) console.error(pageErrors.join('\n'));
  process.exitCode = 1;
} finally {
  await browser.close();
}
