// Shared by the chat and status pages: DOM building, the API key (kept in sessionStorage) and
// fetch with the key, asking for it when the server answers 401.

const KEY_STORAGE = 'horizon.apiKey';

// el('div', {class: 'x', text: 'hi'}, child, ...): an element built without HTML parsing.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') node.textContent = value;
    else if (name === 'class') node.className = value;
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || '';
}

// Shows the page's key dialog (#key-dialog) and resolves once a key was entered.
let pendingAsk = null;
export function askForKey(message) {
  if (pendingAsk) return pendingAsk;
  const dialog = document.getElementById('key-dialog');
  const input = document.getElementById('key-input');
  const error = document.getElementById('key-error');
  const submit = document.getElementById('key-submit');
  error.textContent = message || '';
  input.value = '';
  pendingAsk = new Promise((resolve) => {
    const done = () => {
      const key = input.value.trim();
      if (!key) return;
      sessionStorage.setItem(KEY_STORAGE, key);
      submit.removeEventListener('click', done);
      input.removeEventListener('keydown', onKey);
      dialog.close();
      pendingAsk = null;
      resolve(key);
    };
    const onKey = (e) => { if (e.key === 'Enter') { e.preventDefault(); done(); } };
    submit.addEventListener('click', done);
    input.addEventListener('keydown', onKey);
    // Escape must not leave the page without a key and without a way back.
    dialog.addEventListener('cancel', (e) => e.preventDefault());
  });
  dialog.showModal();
  input.focus();
  return pendingAsk;
}

// fetch() with `Authorization: Bearer KEY` when a key is known; a 401 asks for a (new) key and
// tries again, until the server accepts one.
export async function apiFetch(path, options = {}) {
  for (;;) {
    const headers = new Headers(options.headers || {});
    const key = apiKey();
    if (key) headers.set('Authorization', 'Bearer ' + key);
    const response = await fetch(path, { ...options, headers });
    if (response.status !== 401) return response;
    sessionStorage.removeItem(KEY_STORAGE);
    await askForKey(key ? 'The server did not accept that key.' : 'This server needs an API key.');
  }
}

// The error message of a failed API response (the OpenAI error body), or its status line.
export async function errorText(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return `${response.status}: ${body.error.message}`;
  } catch (_) { /* not JSON */ }
  return `${response.status} ${response.statusText}`;
}

export function formatBytes(n) {
  if (!Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return `${n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
}

export function formatNumber(n, digits = 0) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

// Seconds as "850 ms" / "1.20 s".
export function formatSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '—';
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms`;
  return `${s.toFixed(2)} s`;
}
