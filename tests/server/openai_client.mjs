// Drives a horizon server with the official `openai` npm client (pinned in tests/npm).
// Usage: node openai_client.mjs BASE_URL API_KEY
// Prints one JSON object with what the client saw; the C++ test (openai_client_test.cc) checks it.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const OpenAI = require('openai');

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);
const model = out.models[0];

const c = await client.completions.create({ model, prompt: 'abc', max_tokens: 5, temperature: 0 });
out.completion = { text: c.choices[0].text, finish_reason: c.choices[0].finish_reason, usage: c.usage,
                   object: c.object, model: c.model };

let streamed = '';
let finish = null;
let usage = null;
const cs = await client.completions.create({ model, prompt: 'hello', max_tokens: 7, stream: true,
                                             stream_options: { include_usage: true } });
for await (const chunk of cs) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.text;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
out.completion_stream = { text: streamed, finish_reason: finish, usage };

const chat = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 12, seed: 7 });
out.chat = { content: chat.choices[0].message.content, role: chat.choices[0].message.role,
             finish_reason: chat.choices[0].finish_reason, usage: chat.usage, object: chat.object };

let role = null;
let content = '';
let chatFinish = null;
const chs = await client.chat.completions.create({
  model, messages: [{ role: 'system', content: 'S' }, { role: 'user', content: 'hi' }],
  max_tokens: 9, stream: true });
for await (const chunk of chs) {
  const d = chunk.choices[0]?.delta ?? {};
  if (d.role) role = d.role;
  if (d.content) content += d.content;
  if (chunk.choices[0]?.finish_reason) chatFinish = chunk.choices[0].finish_reason;
}
out.chat_stream = { content, role, finish_reason: chatFinish };

// The helper that accumulates a stream into a final message, as applications use it.
const runner = client.chat.completions.stream({
  model, messages: [{ role: 'user', content: 'yo' }], max_tokens: 4 });
const final = await runner.finalChatCompletion();
out.chat_stream_helper = { content: final.choices[0].message.content };

const n2 = await client.completions.create({ model, prompt: 'a', n: 2, max_tokens: 3 });
out.n2 = { indices: n2.choices.map((c) => c.index), texts: n2.choices.map((c) => c.text), usage: n2.usage };
try {
  await client.completions.create({ model, prompt: 'a', n: 65 });
  out.n65 = { status: 'no error' };
} catch (e) {
  out.n65 = { status: e.status, param: e.param ?? e.error?.param ?? null, type: e.type ?? e.error?.type ?? null };
}

// A model this server does not serve: OpenAI's 404 (the client's NotFoundError).
try {
  await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
  out.wrong_model = { status: 'no error' };
} catch (e) {
  out.wrong_model = { status: e.status, code: e.code ?? null, param: e.param ?? null, name: e.constructor.name };
}

const unauthorized = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0, timeout: 20000 });
try {
  await unauthorized.models.list();
  out.bad_key = { status: 'no error' };
} catch (e) {
  out.bad_key = { status: e.status };
}

console.log(JSON.stringify(out));
