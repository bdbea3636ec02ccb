// Tool calling against `horizon serve` through the official `openai` npm client; arguments
// validated with ajv (both pinned, test-only). Usage: node openai_tools.mjs BASE_URL
// Prints one JSON object: named, named_stream, named_helper, required, round_trip, auto.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const OpenAI = require('openai');
const Ajv = require('ajv');

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;

const weather = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
};
const time = {
  type: 'object',
  properties: { zone: { type: 'string', maxLength: 8 } },
  required: ['zone'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather forecast for a city', parameters: weather } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone', parameters: time } },
];
const validators = { get_weather: new Ajv().compile(weather), get_time: new Ajv().compile(time) };
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

function summary(choice) {
  const calls = (choice.message.tool_calls ?? []).map((c) => {
    let args = null;
    try { args = JSON.parse(c.function.arguments); } catch { args = null; }
    const validate = validators[c.function.name];
    return { id: c.id, type: c.type, name: c.function.name, arguments: c.function.arguments, parses: args !== null,
             valid: validate ? validate(args) : false };
  });
  return { finish: choice.finish_reason, content: choice.message.content, calls };
}

const out = {};
const named = { type: 'function', function: { name: 'get_weather' } };
const base = { model, messages, tools, temperature: 0, max_tokens: 200 };

const c = await client.chat.completions.create({ ...base, tool_choice: named });
out.named = summary(c.choices[0]);

// Streamed by hand: deltas by index, as an application would collect them.
{
  const s = await client.chat.completions.create({ ...base, tool_choice: named, stream: true });
  const calls = [];
  let content = '';
  let finish = null;
  for await (const chunk of s) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    if (ch.delta?.content) content += ch.delta.content;
    for (const t of ch.delta?.tool_calls ?? []) {
      calls[t.index] ??= { id: '', type: '', function: { name: '', arguments: '' } };
      if (t.id) calls[t.index].id = t.id;
      if (t.type) calls[t.index].type = t.type;
      if (t.function?.name) calls[t.index].function.name += t.function.name;
      if (t.function?.arguments) calls[t.index].function.arguments += t.function.arguments;
    }
  }
  out.named_stream = summary({ finish_reason: finish, message: { content: content || null, tool_calls: calls } });
}
// The client's own stream helper assembles the same message.
{
  const runner = client.chat.completions.stream({ ...base, tool_choice: named });
  const final = await runner.finalChatCompletion();
  out.named_helper = summary(final.choices[0]);
}

// required, one call: any of the tools, its arguments valid for that tool.
const r = await client.chat.completions.create({ ...base, tool_choice: 'required', parallel_tool_calls: false });
out.required = summary(r.choices[0]);

// The call and its result go back to the model.
{
  const call = c.choices[0].message.tool_calls[0];
  const rt = await client.chat.completions.create({
    model, temperature: 0, max_tokens: 20, tools,
    messages: [...messages, { role: 'assistant', content: null, tool_calls: [call] },
               { role: 'tool', tool_call_id: call.id, content: '{"forecast": "sunny", "celsius": 21}' },
               { role: 'user', content: 'Thanks!' }] });
  out.round_trip = { finish: rt.choices[0].finish_reason, usage: rt.usage };
}

// auto: the model decides; whatever it does comes back well-formed.
const a = await client.chat.completions.create({ ...base, max_tokens: 120 });
out.auto = summary(a.choices[0]);
console.log(JSON.stringify(out));
