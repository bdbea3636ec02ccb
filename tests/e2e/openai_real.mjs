// Drives `horizon serve` on a real model with the official `openai` npm client (pinned, test-only).
// Usage: node openai_real.mjs BASE_URL MODE [ARGS...]
//   basic PROMPT N              completions + chat, streamed and not, greedy
//   concurrent N PROMPT...      every prompt streamed at once (N tokens each), greedy
//   disconnect K PROMPT...      stream each prompt, abort after K chunks
//   choices PROMPT N K SEED     n = K sampled choices (temperature 1), streamed and not, and each
//                               seed SEED + i alone
//   batch N K SEED PROMPT...    the prompts as one batch with n = K (temperature 1), streamed and
//                               not, and each prompt alone with the same n
//   score PROMPT...             echo + logprobs with one greedy token, the prompts as one batch and
//                               each alone, and each plain (no echo)
// Prints one JSON object.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const OpenAI = require('openai');

const [baseURL, mode, ...args] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
// The served name, as clients read it from /v1/models (the server checks `model`).
const model = (await client.models.list()).data[0].id;

async function streamCompletion(prompt, n) {
  const s = await client.completions.create({ model, prompt, max_tokens: n, temperature: 0, stream: true,
                                              stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage };
}

const out = {};
if (mode === 'basic') {
  const [prompt, n] = [args[0], Number(args[1])];
  const c = await client.completions.create({ model, prompt, max_tokens: n, temperature: 0 });
  out.completion = { text: c.choices[0].text, finish: c.choices[0].finish_reason, usage: c.usage, model: c.model };
  out.completion_stream = await streamCompletion(prompt, n);
  const chat = await client.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }],
                                                      max_tokens: n, temperature: 0 });
  out.chat = { text: chat.choices[0].message.content, finish: chat.choices[0].finish_reason, usage: chat.usage };
  const cs = await client.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }],
                                                    max_tokens: n, temperature: 0, stream: true });
  let text = '';
  for await (const chunk of cs) text += chunk.choices[0]?.delta?.content ?? '';
  out.chat_stream = { text };
} else if (mode === 'choices') {
  const [prompt, n, k, seed] = [args[0], Number(args[1]), Number(args[2]), Number(args[3])];
  const params = { model, prompt, max_tokens: n, temperature: 1, seed };
  const c = await client.completions.create({ ...params, n: k });
  out.choices = c.choices.map((x) => ({ index: x.index, text: x.text, finish: x.finish_reason }));
  out.usage = c.usage;
  const s = await client.completions.create({ ...params, n: k, stream: true });
  out.streamed = Array(k).fill('');
  for await (const chunk of s) {
    for (const x of chunk.choices) out.streamed[x.index] += x.text;
  }
  out.single = [];
  for (let i = 0; i < k; ++i) {
    out.single.push((await client.completions.create({ ...params, seed: seed + i })).choices[0].text);
  }
} else if (mode === 'batch') {
  const [n, k, seed] = [Number(args[0]), Number(args[1]), Number(args[2])];
  const prompts = args.slice(3);
  const params = { model, max_tokens: n, temperature: 1, seed, n: k };
  const c = await client.completions.create({ ...params, prompt: prompts });
  out.choices = c.choices.map((x) => ({ index: x.index, text: x.text, finish: x.finish_reason }));
  out.usage = c.usage;
  const s = await client.completions.create({ ...params, prompt: prompts, stream: true,
                                              stream_options: { include_usage: true } });
  out.streamed = Array(prompts.length * k).fill('');
  for await (const chunk of s) {
    if (chunk.usage) out.streamed_usage = chunk.usage;
    for (const x of chunk.choices) out.streamed[x.index] += x.text;
  }
  out.alone = [];
  out.alone_prompt_tokens = 0;
  for (const p of prompts) {
    const a = await client.completions.create({ ...params, prompt: p });
    out.alone.push(...a.choices.map((x) => x.text));
    out.alone_prompt_tokens += a.usage.prompt_tokens;
  }
} else if (mode === 'score') {
  const params = { model, max_tokens: 1, temperature: 0, logprobs: 1, echo: true };
  const pick = (c) => ({ text: c.text, logprobs: c.logprobs, finish: c.finish_reason });
  out.batch = (await client.completions.create({ ...params, prompt: args })).choices.map(pick);
  out.alone = [];
  out.plain = [];
  for (const p of args) {
    out.alone.push(pick((await client.completions.create({ ...params, prompt: p })).choices[0]));
    out.plain.push(pick((await client.completions.create({ ...params, prompt: p, echo: false })).choices[0]));
  }
} else if (mode === 'concurrent') {
  const n = Number(args[0]);
  out.results = await Promise.all(args.slice(1).map((p) => streamCompletion(p, n)));
} else if (mode === 'disconnect') {
  const k = Number(args[0]);
  out.aborted = await Promise.all(args.slice(1).map(async (p) => {
    const controller = new AbortController();
    const s = await client.completions.create({ model, prompt: p, max_tokens: 400, temperature: 0, stream: true,
                                                ignore_eos: true }, { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const _ of s) {
        if (++chunks >= k) controller.abort();
      }
    } catch (e) { /* aborted */ }
    return chunks;
  }));
}
console.log(JSON.stringify(out));
