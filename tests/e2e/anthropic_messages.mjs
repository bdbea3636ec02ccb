// Anthropic's Messages API against `horizon serve` through the official `@anthropic-ai/sdk`
// client (pinned, test-only); tool inputs validated with ajv. Usage:
//   node anthropic_messages.mjs BASE_URL API_KEY MODEL     Prints one JSON object.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const AnthropicModule = require('@anthropic-ai/sdk');
const Anthropic = AnthropicModule.default ?? AnthropicModule.Anthropic ?? AnthropicModule;
const Ajv = require('ajv');

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const validate = new Ajv().compile(weather);
const tools = [{ name: 'get_weather', description: 'Weather forecast', input_schema: weather }];
const user = [{ role: 'user', content: 'Once upon a time' }];
const out = {};

const m = await client.messages.create({ model, max_tokens: 24, temperature: 0, system: 'Tell a story.', messages: user });
out.text = { type: m.type, role: m.role, content: m.content, stop_reason: m.stop_reason, usage: m.usage,
             id_prefix: m.id.slice(0, 4) };

// Streamed: the raw event sequence, and the SDK's own accumulation.
{
  const types = [];
  let text = '';
  const s = await client.messages.create({ model, max_tokens: 24, temperature: 0, system: 'Tell a story.', messages: user,
                                           stream: true });
  for await (const ev of s) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  }
  out.stream = { types: [...new Set(types)], first: types[0], last: types[types.length - 1], text };
  const final = await client.messages.stream({ model, max_tokens: 24, temperature: 0, system: 'Tell a story.',
                                               messages: user }).finalMessage();
  out.stream_helper = { content: final.content, stop_reason: final.stop_reason };
}

// Tool use: a forced tool's input validates; streamed the same.
const toolReq = { model, max_tokens: 200, temperature: 0, tools, tool_choice: { type: 'tool', name: 'get_weather' },
                  messages: [{ role: 'user', content: 'Weather in Paris?' }] };
const t = await client.messages.create(toolReq);
const use = t.content.find((b) => b.type === 'tool_use');
out.tool = { stop_reason: t.stop_reason, name: use?.name ?? null, id_prefix: use?.id.slice(0, 6) ?? null,
             input: use?.input ?? null, valid: use ? validate(use.input) : false };
const ts = await client.messages.stream(toolReq).finalMessage();
const suse = ts.content.find((b) => b.type === 'tool_use');
out.tool_stream = { stop_reason: ts.stop_reason, name: suse?.name ?? null, input: suse?.input ?? null };

// The result goes back.
const rt = await client.messages.create({
  model, max_tokens: 10, temperature: 0, tools,
  messages: [{ role: 'user', content: 'Weather in Paris?' }, { role: 'assistant', content: [use] },
             { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny, 21 C' }] }] });
out.round_trip = { stop_reason: rt.stop_reason, input_tokens: rt.usage.input_tokens };

const bad = new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 });
try {
  await bad.messages.create({ model, max_tokens: 5, messages: user });
  out.bad_key = 'no error';
} catch (e) {
  out.bad_key = e.status;
}
console.log(JSON.stringify(out));
