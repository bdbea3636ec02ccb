// A small Markdown renderer for model output: paragraphs, headings, emphasis, code spans and
// fenced blocks, lists, block quotes, tables, rules and links. It builds DOM nodes and sets only
// textContent and vetted attributes, so text from the model never becomes HTML whatever it holds
// (`<script>` shows as the characters `<script>`). Unclosed constructs (a fence still streaming)
// render as far as they go.

const SAFE_URL = /^(https?:\/\/|mailto:)/i;
const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:\s+(.*))?$/;
const TABLE_SEPARATOR = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function make(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Markdown text -> a DocumentFragment.
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  renderBlocks(String(text).replace(/\r\n?/g, '\n').split('\n'), fragment, false);
  return fragment;
}

function isBlank(line) {
  return /^\s*$/.test(line);
}

function indentOf(line) {
  return line.match(/^ */)[0].length;
}

// True when `line` starts a block that ends a paragraph.
function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || LIST_ITEM.test(line);
}

// `tight`: paragraphs become bare inline content (list items without blank lines).
function renderBlocks(lines, parent, tight) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) { ++i; continue; }
    let m;
    if ((m = line.match(FENCE))) {
      const fence = m[1];
      const close = new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`);
      const body = [];
      for (++i; i < lines.length && !close.test(lines[i]); ++i) body.push(lines[i]);
      ++i;  // the closing fence, if any
      const pre = make('pre');
      const code = make('code', body.join('\n'));
      const lang = m[2].replace(/[^\w+#.-]/g, '');
      if (lang) code.dataset.lang = lang;
      pre.append(code);
      parent.append(pre);
      continue;
    }
    if ((m = line.match(HEADING))) {
      const h = make(`h${m[1].length}`);
      renderInline(m[2] || '', h);
      parent.append(h);
      ++i;
      continue;
    }
    if (RULE.test(line)) {
      parent.append(make('hr'));
      ++i;
      continue;
    }
    if (QUOTE.test(line)) {
      const inner = [];
      for (; i < lines.length && (m = lines[i].match(QUOTE)); ++i) inner.push(m[1]);
      const quote = make('blockquote');
      renderBlocks(inner, quote, false);
      parent.append(quote);
      continue;
    }
    if ((m = line.match(LIST_ITEM))) {
      i = renderList(lines, i, parent);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1]) &&
        lines[i + 1].includes('-')) {
      i = renderTable(lines, i, parent);
      continue;
    }
    const para = [line];
    for (++i; i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i]); ++i) para.push(lines[i]);
    const target = tight ? parent : make('p');
    renderInline(para.map((l) => l.trim()).join('\n'), target);
    if (!tight) parent.append(target);
  }
}

// A list starting at lines[start]; returns the index after it.
function renderList(lines, start, parent) {
  const first = lines[start].match(LIST_ITEM);
  const ordered = /\d/.test(first[2]);
  const baseIndent = first[1].length;
  const list = make(ordered ? 'ol' : 'ul');
  if (ordered) {
    const n = parseInt(first[2], 10);
    if (n !== 1) list.start = n;
  }
  const items = [];  // each: the item's lines, dedented
  let loose = false;
  let contentIndent = 0;
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const m = line.match(LIST_ITEM);
    if (m && m[1].length === baseIndent && /\d/.test(m[2]) === ordered) {
      items.push([m[3] || '']);
      contentIndent = baseIndent + m[2].length + 1;
      ++i;
      continue;
    }
    if (isBlank(line)) {
      // A blank line continues the list only if more of it follows.
      let j = i + 1;
      while (j < lines.length && isBlank(lines[j])) ++j;
      if (j >= lines.length) break;
      const next = lines[j].match(LIST_ITEM);
      const sameList = next && next[1].length === baseIndent && /\d/.test(next[2]) === ordered;
      if (!sameList && indentOf(lines[j]) < contentIndent) break;
      loose = true;
      items[items.length - 1].push('');
      i = j;
      continue;
    }
    if (indentOf(line) > baseIndent) {
      items[items.length - 1].push(line.slice(Math.min(indentOf(line), contentIndent)));
      ++i;
      continue;
    }
    // A lazy continuation of the item's paragraph.
    if (!startsBlock(line) && !isBlank(lines[i - 1])) {
      items[items.length - 1].push(line);
      ++i;
      continue;
    }
    break;
  }
  for (const itemLines of items) {
    const li = make('li');
    renderBlocks(itemLines, li, !loose);
    list.append(li);
  }
  parent.append(list);
  return i;
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cell = '';
  for (let i = 0; i < s.length; ++i) {
    if (s[i] === '\\' && s[i + 1] === '|') { cell += '|'; ++i; continue; }
    if (s[i] === '|') { cells.push(cell.trim()); cell = ''; continue; }
    cell += s[i];
  }
  cells.push(cell.trim());
  return cells;
}

function renderTable(lines, start, parent) {
  const header = splitRow(lines[start]);
  const aligns = splitRow(lines[start + 1]).map((c) =>
    c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : '');
  const table = make('table');
  const thead = make('thead');
  const headRow = make('tr');
  header.forEach((text, col) => {
    const th = make('th');
    if (aligns[col]) th.className = `align-${aligns[col]}`;
    renderInline(text, th);
    headRow.append(th);
  });
  thead.append(headRow);
  table.append(thead);
  const tbody = make('tbody');
  let i = start + 2;
  for (; i < lines.length && !isBlank(lines[i]) && lines[i].includes('|'); ++i) {
    const row = make('tr');
    const cells = splitRow(lines[i]);
    for (let col = 0; col < header.length; ++col) {
      const td = make('td');
      if (aligns[col]) td.className = `align-${aligns[col]}`;
      renderInline(cells[col] || '', td);
      row.append(td);
    }
    tbody.append(row);
  }
  table.append(tbody);
  const wrap = make('div');
  wrap.className = 'table-wrap';
  wrap.append(table);
  parent.append(wrap);
  return i;
}

// [label](url) at text[start] === '['; returns {label, url, end} or null.
function parseLink(text, start) {
  let depth = 0;
  let close = -1;
  for (let i = start; i < text.length; ++i) {
    if (text[i] === '\\') { ++i; continue; }
    if (text[i] === '[') ++depth;
    else if (text[i] === ']' && --depth === 0) { close = i; break; }
  }
  if (close < 0 || text[close + 1] !== '(') return null;
  let parens = 0;
  let end = -1;
  for (let i = close + 2; i < text.length; ++i) {
    if (text[i] === '(') ++parens;
    else if (text[i] === ')') {
      if (parens === 0) { end = i; break; }
      --parens;
    } else if (text[i] === '\n') return null;
  }
  if (end < 0) return null;
  let url = text.slice(close + 2, end).trim();
  url = url.replace(/\s+("[^"]*"|'[^']*')$/, '');  // an optional title
  if (url.startsWith('<') && url.endsWith('>')) url = url.slice(1, -1);
  return { label: text.slice(start + 1, close), url, end: end + 1 };
}

// A link to a safe URL with Markdown `label` (inside it, no further links); any other URL
// (javascript:, data:, relative) leaves just the label.
function appendLink(parent, label, url) {
  if (!SAFE_URL.test(url)) {
    renderInline(label, parent, true);
    return;
  }
  const a = make('a');
  a.href = url;
  a.rel = 'noopener noreferrer nofollow';
  a.target = '_blank';
  renderInline(label, a, true);
  if (!a.textContent) a.textContent = url;
  parent.append(a);
}

// A bare URL without the punctuation that ends its sentence; a closing parenthesis stays when the
// URL opened one (https://en.wikipedia.org/wiki/Foo_(bar)).
function trimAutolink(url) {
  for (;;) {
    const trimmed = url.replace(/[.,;:!?'"\]]+$/, '');
    const opens = (trimmed.match(/\(/g) || []).length;
    const closes = (trimmed.match(/\)/g) || []).length;
    if (trimmed.endsWith(')') && closes > opens) url = trimmed.slice(0, -1);
    else return trimmed;
  }
}

const EMPHASIS = [['**', 'strong'], ['__', 'strong'], ['~~', 'del'], ['*', 'em'], ['_', 'em']];
const WORD = /[\p{L}\p{N}]/u;

// The index of the delimiter closing one opened just before `from`, or -1. A run of delimiter
// characters is taken as a whole: `**` never closes a single `*`, `***` closes either.
function findClose(text, delim, from) {
  const c = delim[0];
  for (let j = from; j < text.length; ++j) {
    if (text[j] === '\\') { ++j; continue; }
    if (text[j] === '`') {  // emphasis does not close inside a code span
      const end = text.indexOf('`', j + 1);
      if (end > 0) { j = end; continue; }
    }
    if (text[j] !== c) continue;
    const start = j;
    let run = 1;
    while (text[start + run] === c) ++run;
    j = start + run - 1;
    if (run < delim.length || start === from || /\s/.test(text[start - 1])) continue;
    if (delim.length === 1 && run === 2) continue;
    if (c === '_' && WORD.test(text[start + run] || '')) continue;  // snake_case stays text
    return start + run - delim.length;
  }
  return -1;
}

// Inline Markdown -> nodes appended to `parent`; every piece of text goes in as a text node.
// `inLink`: inside a link's label, where links do not nest.
function renderInline(text, parent, inLink = false) {
  let buf = '';
  const flush = () => {
    if (buf) parent.append(document.createTextNode(buf));
    buf = '';
  };
  let i = 0;
  outer: while (i < text.length) {
    const c = text[i];
    if (c === '\\' && /[!-/:-@[-`{-~]/.test(text[i + 1] || '')) {
      buf += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      flush();
      parent.append(make('br'));
      ++i;
      continue;
    }
    if (c === '`') {
      let n = 1;
      while (text[i + n] === '`') ++n;
      const fence = '`'.repeat(n);
      let end = text.indexOf(fence, i + n);
      while (end >= 0 && text[end + n] === '`') end = text.indexOf(fence, end + n + 1);
      if (end >= 0) {
        flush();
        let code = text.slice(i + n, end).replace(/\n/g, ' ');
        if (/^ .* $/.test(code) && code.trim()) code = code.slice(1, -1);
        parent.append(make('code', code));
        i = end + n;
        continue;
      }
      buf += fence;
      i += n;
      continue;
    }
    if (!inLink && (c === '[' || (c === '!' && text[i + 1] === '['))) {
      const link = parseLink(text, c === '!' ? i + 1 : i);
      if (link) {
        flush();
        // Images are not loaded (the page's policy forbids other origins): they show as links.
        appendLink(parent, link.label || link.url, link.url);
        i = link.end;
        continue;
      }
    }
    if (!inLink && c === '<') {
      const m = text.slice(i).match(/^<(https?:\/\/[^\s<>]+)>/);
      if (m) {
        flush();
        appendLink(parent, m[1], m[1]);
        i += m[0].length;
        continue;
      }
    }
    if (!inLink && c === 'h' && (i === 0 || /[\s(]/.test(text[i - 1]))) {
      const m = text.slice(i).match(/^https?:\/\/[^\s<>"`]+/);
      if (m) {
        const url = trimAutolink(m[0]);
        flush();
        appendLink(parent, url, url);
        i += url.length;
        continue;
      }
    }
    if (c === '*' || c === '_' || c === '~') {
      for (const [delim, tag] of EMPHASIS) {
        if (!text.startsWith(delim, i)) continue;
        const after = text[i + delim.length];
        if (after === undefined || /\s/.test(after)) continue;
        if (delim[0] === '_' && i > 0 && WORD.test(text[i - 1])) continue;
        const close = findClose(text, delim, i + delim.length);
        if (close < 0) continue;
        flush();
        const node = make(tag);
        renderInline(text.slice(i + delim.length, close), node, inLink);
        parent.append(node);
        i = close + delim.length;
        continue outer;
      }
      // No closing delimiter: the whole run is text.
      let n = 1;
      while (text[i + n] === c) ++n;
      buf += text.slice(i, i + n);
      i += n;
      continue;
    }
    buf += c;
    ++i;
  }
  flush();
}
