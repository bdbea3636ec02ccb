// Structured outputs, logit_bias and /tokenize against `horizon serve`, through the official
// `openai` npm client; schemas validated with ajv (both pinned, test-only).
// Usage: node openai_structured.mjs BASE_URL   Prints one JSON object.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const OpenAI = require('openai');
const Ajv = require('ajv');

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
// The served name, as clients read it from /v1/models (the server checks `model`).
const model = (await client.models.list()).data[0].id;
const prompts = ['A dog', 'The sun', 'Tom had a ball', 'Sara liked to sing', 'One day', 'The big tree', 'Lily saw a bird',
                 'Ben and his mom', 'A little girl', 'The cat', 'It was raining', 'The old man', 'A red car',
                 'Mia had a toy', 'The park', 'A small fish', 'The king', 'Max was sad', 'The moon', 'Sam found a box'];

function parses(text) {
  try {
    const v = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v);
  } catch {
    return false;
  }
}

const out = {};

// json_object: every finished answer is a JSON object (answers cut by max_tokens are reported).
out.json_object = [];
for (const p of prompts) {
  const c = await client.chat.completions.create({ model, messages: [{ role: 'user', content: p }],
                                                   response_format: { type: 'json_object' }, max_tokens: 64,
                                                   temperature: 0 });
  const text = c.choices[0].message.content;
  out.json_object.push({ finish: c.choices[0].finish_reason, parses: parses(text), text });
}

// json_schema (bounded): every answer stops by itself and validates.
const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 1, maximum: 99 },
    mood: { enum: ['happy', 'sad', 'angry'] },
    pets: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 2 },
    friend: { anyOf: [{ type: 'null' }, { type: 'boolean' }] },
  },
  required: ['name', 'age', 'mood', 'pets', 'friend'],
  additionalProperties: false,
};
const validate = new Ajv().compile(schema);
out.json_schema = [];
for (const p of prompts) {
  const c = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: p }], max_tokens: 300, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } } });
  const text = c.choices[0].message.content;
  let valid = false;
  try { valid = validate(JSON.parse(text)); } catch { valid = false; }
  out.json_schema.push({ finish: c.choices[0].finish_reason, valid, text });
}
// Streamed: the deltas reassemble to the same document.
{
  const s = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: prompts[0] }], max_tokens: 300, temperature: 0, stream: true,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } } });
  let text = '';
  let finish = null;
  for await (const chunk of s) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
  }
  out.json_schema_stream = { text, finish };
}
// max_tokens inside the grammar: finish_reason length, the text as generated.
{
  const c = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: prompts[0] }], max_tokens: 3, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } } });
  out.json_schema_cut = { finish: c.choices[0].finish_reason, text: c.choices[0].message.content };
}

// /tokenize and /detokenize (llama-server shapes) round-trip; logit_bias +100 makes greedy pick it.
const post = async (path, body) => (await fetch(baseURL + path, { method: 'POST', body: JSON.stringify(body),
                                                                   headers: { 'Content-Type': 'application/json' } })).json();
const text = 'Once upon a time, a "small" dog {ran} home.';
const tok = await post('/tokenize', { content: text });
const back = await post('/detokenize', { tokens: tok.tokens });
const pieces = await post('/tokenize', { content: text, with_pieces: true });
out.tokenize = { text, tokens: tok.tokens, back: back.content, pieces: pieces.tokens };
const target = tok.tokens[3];
const biased = await client.completions.create({ model, prompt: 'The', max_tokens: 5, temperature: 0,
                                                 logit_bias: { [target]: 100 } });
// Generated text is the pieces verbatim (with SentencePiece's leading space).
out.logit_bias = { text: biased.choices[0].text, expected: pieces.tokens[3].piece.repeat(5) };
console.log(JSON.stringify(out));
