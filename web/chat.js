// The chat page: conversations kept in localStorage, settings, replies streamed from
// /v1/chat/completions (SSE) and rendered as Markdown, a stop button that aborts the request
// (the server cancels the generation when the connection closes), TTFT and tokens/s per reply.
import { el, apiFetch, apiKey, errorText, formatNumber } from './common.js';
import { renderMarkdown } from './markdown.js';

const STORE_CONVERSATIONS = 'horizon.conversations';
const STORE_CURRENT = 'horizon.currentConversation';
const STORE_SETTINGS = 'horizon.settings';
const DEFAULT_SETTINGS = { temperature: 0.7, maxTokens: 512, system: '', extra: '' };

const $ = (id) => document.getElementById(id);

const state = {
  conversations: [],  // [{id, title, updated, messages: [{role, content, meta}]}], newest first
  currentId: null,
  settings: { ...DEFAULT_SETTINGS },
  model: null,
  controller: null,   // the AbortController of the reply streaming now
};

function load() {
  try {
    const list = JSON.parse(localStorage.getItem(STORE_CONVERSATIONS) || '[]');
    if (Array.isArray(list)) state.conversations = list.filter((c) => c && Array.isArray(c.messages));
  } catch (_) { /* a damaged store starts empty */ }
  try {
    state.settings = { ...DEFAULT_SETTINGS, ...JSON.parse(localStorage.getItem(STORE_SETTINGS) || '{}') };
  } catch (_) { /* defaults */ }
  state.currentId = localStorage.getItem(STORE_CURRENT);
  if (!state.conversations.some((c) => c.id === state.currentId)) state.currentId = null;
}

function save() {
  try {
    localStorage.setItem(STORE_CONVERSATIONS, JSON.stringify(state.conversations));
    localStorage.setItem(STORE_SETTINGS, JSON.stringify(state.settings));
    if (state.currentId) localStorage.setItem(STORE_CURRENT, state.currentId);
    else localStorage.removeItem(STORE_CURRENT);
  } catch (e) {
    console.warn('could not save the conversations:', e);
  }
}

function current() {
  return state.conversations.find((c) => c.id === state.currentId) || null;
}

function newId() {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

// ---- rendering ---------------------------------------------------------------------------------

function renderSidebar() {
  const list = $('conversations');
  list.replaceChildren();
  for (const c of state.conversations) {
    const item = el('li', { class: c.id === state.currentId ? 'active' : '' },
      el('button', { type: 'button', class: 'open', title: c.title, text: c.title || 'New chat',
                     onclick: () => switchTo(c.id) }),
      el('button', { type: 'button', class: 'delete', title: 'Delete this conversation', 'aria-label': 'Delete',
                     text: '×', onclick: () => remove(c.id) }));
    list.append(item);
  }
}

function metaText(meta) {
  if (!meta) return '';
  const parts = [];
  if (meta.error) return `error: ${meta.error}`;
  if (meta.ttftMs !== undefined) parts.push(`TTFT ${formatNumber(meta.ttftMs)} ms`);
  if (meta.tokensPerSecond) parts.push(`${formatNumber(meta.tokensPerSecond, 1)} tok/s`);
  if (meta.tokens !== undefined) parts.push(`${meta.approximate ? '≈' : ''}${meta.tokens} tokens`);
  if (meta.stopped) parts.push('stopped');
  else if (meta.finish && meta.finish !== 'stop') parts.push(`finish: ${meta.finish}`);
  return parts.join(' · ');
}

// A message's view: {root, body, meta}. User text is shown as typed; replies as Markdown.
function messageView(message) {
  const body = el('div', { class: 'body' });
  const meta = el('div', { class: 'meta' });
  // A reasoning model's thinking (reasoning_content): folded away once the answer begins.
  const thoughts = el('div', { class: 'thoughts' });
  const reasoning = el('details', { class: 'reasoning', hidden: true }, el('summary', { text: 'Thinking' }), thoughts);
  const root = el('article', { class: `msg ${message.role}` },
    el('div', { class: 'role', text: message.role === 'user' ? 'You' : (state.model || 'Assistant') }), reasoning, body,
    meta);
  const view = { root, body, meta, reasoning, thoughts };
  fillView(view, message);
  return view;
}

function fillView(view, message) {
  if (message.role === 'user') view.body.textContent = message.content;
  else view.body.replaceChildren(renderMarkdown(message.content));
  const thinking = message.reasoning || '';
  // When it first shows: open while there is no answer (the reader's choice is kept after that).
  if (thinking && view.reasoning.hidden) view.reasoning.open = !message.content;
  view.reasoning.hidden = !thinking;
  view.thoughts.textContent = thinking;
  view.meta.textContent = metaText(message.meta);
  view.root.classList.toggle('failed', Boolean(message.meta && message.meta.error));
}

function renderMessages() {
  const box = $('messages');
  box.replaceChildren();
  const c = current();
  if (!c || c.messages.length === 0) {
    box.append(el('div', { class: 'empty' },
      el('h1', { text: state.model ? `Chat with ${state.model}` : 'Chat' }),
      el('p', { text: 'Replies stream as the model writes them; Stop cancels the request on the server.' })));
    return;
  }
  for (const m of c.messages) box.append(messageView(m).root);
  box.scrollTop = box.scrollHeight;
}

function renderSettings() {
  $('temperature').value = state.settings.temperature;
  $('max-tokens').value = state.settings.maxTokens;
  $('system-prompt').value = state.settings.system;
  $('extra-json').value = state.settings.extra;
}

function setBusy(busy) {
  $('send').hidden = busy;
  $('stop').hidden = !busy;
  document.body.classList.toggle('busy', busy);
}

// ---- actions -----------------------------------------------------------------------------------

function switchTo(id) {
  if (state.controller) return;  // finish or stop the running reply first
  state.currentId = id;
  save();
  renderSidebar();
  renderMessages();
}

function remove(id) {
  if (state.controller && id === state.currentId) return;
  state.conversations = state.conversations.filter((c) => c.id !== id);
  if (state.currentId === id) state.currentId = null;
  save();
  renderSidebar();
  renderMessages();
}

function newChat() {
  if (state.controller) return;
  state.currentId = null;
  save();
  renderSidebar();
  renderMessages();
  $('input').focus();
}

// The settings' extra JSON as an object, or throws with a message naming the field.
function extraFields() {
  const text = state.settings.extra.trim();
  if (!text) return {};
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`Extra request fields: not valid JSON (${e.message})`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error('Extra request fields: must be a JSON object');
  }
  return value;
}

// Splits SSE text into events; returns the unfinished tail.
function takeEvents(buffer, onData) {
  let idx;
  while ((idx = buffer.search(/\r?\n\r?\n/)) >= 0) {
    const block = buffer.slice(0, idx);
    buffer = buffer.slice(idx + buffer.slice(idx).match(/^\r?\n\r?\n/)[0].length);
    const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
    if (data.length) onData(data.join('\n'));
  }
  return buffer;
}

async function send() {
  const input = $('input');
  const text = input.value.trim();
  if (!text || state.controller) return;
  let extra;
  try {
    extra = extraFields();
    $('settings-error').textContent = '';
  } catch (e) {
    $('settings-error').textContent = e.message;
    toggleSettings(true);
    return;
  }
  let conv = current();
  if (!conv) {
    conv = { id: newId(), title: '', updated: Date.now(), messages: [] };
    state.conversations.unshift(conv);
    state.currentId = conv.id;
  } else {
    // The conversation used last goes to the top.
    state.conversations = [conv, ...state.conversations.filter((c) => c !== conv)];
  }
  if (!conv.title) conv.title = text.length > 48 ? `${text.slice(0, 48)}…` : text;
  conv.updated = Date.now();
  const history = conv.messages.filter((m) => !(m.meta && m.meta.error) && m.content);
  const user = { role: 'user', content: text };
  const reply = { role: 'assistant', content: '', meta: {} };
  conv.messages.push(user, reply);
  input.value = '';
  autosize();
  save();
  renderSidebar();
  renderMessages();
  const view = messageView(reply);
  $('messages').lastElementChild.replaceWith(view.root);
  view.root.classList.add('streaming');

  const messages = [];
  if (state.settings.system.trim()) messages.push({ role: 'system', content: state.settings.system });
  for (const m of [...history, user]) messages.push({ role: m.role, content: m.content });
  const body = {
    model: state.model || undefined,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number(state.settings.temperature),
    max_tokens: Number(state.settings.maxTokens),
    ...extra,
  };

  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  const t0 = performance.now();
  let tFirst = null;
  let tLast = null;
  let chunks = 0;
  let usage = null;
  let finish = null;
  let redraw = 0;
  const scheduleRedraw = () => {
    if (redraw) return;
    redraw = requestAnimationFrame(() => {
      redraw = 0;
      const box = $('messages');
      const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
      fillView(view, reply);
      if (atBottom) box.scrollTop = box.scrollHeight;
    });
  };
  const onData = (data) => {
    if (data === '[DONE]') return;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new Error(chunk.error.message || 'the server reported an error');
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices && chunk.choices[0];
    if (!choice) return;
    const content = choice.delta && choice.delta.content;
    const thinking = choice.delta && choice.delta.reasoning_content;
    if (content || thinking) {
      const now = performance.now();
      if (tFirst === null) tFirst = now;
      tLast = now;
      ++chunks;
      if (thinking) reply.reasoning = (reply.reasoning || '') + thinking;
      if (content) {
        if (!reply.content && view.reasoning.open) view.reasoning.open = false;  // the answer begins
        reply.content += content;
      }
      scheduleRedraw();
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  };
  try {
    const response = await apiFetch('/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorText(response));
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer = takeEvents(buffer + value, onData);
    }
  } catch (e) {
    if (e.name === 'AbortError') reply.meta.stopped = true;
    else reply.meta.error = e.message;
  } finally {
    state.controller = null;
    if (redraw) cancelAnimationFrame(redraw);
    redraw = 0;
    if (tFirst !== null) {
      reply.meta.ttftMs = tFirst - t0;
      reply.meta.tokens = usage ? usage.completion_tokens : chunks;
      reply.meta.approximate = !usage;  // a stopped stream has no usage: one chunk is about one token
      const seconds = (tLast - tFirst) / 1000;
      if (reply.meta.tokens > 1 && seconds > 0) reply.meta.tokensPerSecond = (reply.meta.tokens - 1) / seconds;
    }
    if (finish) reply.meta.finish = finish;
    conv.updated = Date.now();
    save();
    view.root.classList.remove('streaming');
    fillView(view, reply);
    setBusy(false);
    $('input').focus();
  }
}

function stop() {
  if (state.controller) state.controller.abort();
}

function toggleSettings(open) {
  const panel = $('settings');
  const show = open === undefined ? panel.hidden : open;
  panel.hidden = !show;
  $('settings-toggle').setAttribute('aria-expanded', String(show));
}

function autosize() {
  const input = $('input');
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

async function loadModel() {
  try {
    const response = await apiFetch('/v1/models');
    if (!response.ok) throw new Error(await errorText(response));
    const list = await response.json();
    state.model = list.data && list.data[0] ? list.data[0].id : null;
    $('model-name').textContent = state.model || '(none)';
  } catch (e) {
    $('model-name').textContent = `unavailable (${e.message})`;
  }
  $('forget-key').hidden = !apiKey();
  renderMessages();
}

function init() {
  load();
  renderSettings();
  renderSidebar();
  renderMessages();
  $('send').addEventListener('click', send);
  $('stop').addEventListener('click', stop);
  $('new-chat').addEventListener('click', newChat);
  $('settings-toggle').addEventListener('click', () => toggleSettings());
  $('forget-key').addEventListener('click', () => {
    sessionStorage.clear();
    location.reload();
  });
  const input = $('input');
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  input.addEventListener('input', autosize);
  const bind = (id, key, parse) => $(id).addEventListener('change', (e) => {
    state.settings[key] = parse(e.target.value);
    save();
  });
  bind('temperature', 'temperature', (v) => Math.max(0, Number(v) || 0));
  bind('max-tokens', 'maxTokens', (v) => Math.max(1, Math.round(Number(v) || DEFAULT_SETTINGS.maxTokens)));
  bind('system-prompt', 'system', String);
  bind('extra-json', 'extra', String);
  loadModel();
}

init();
