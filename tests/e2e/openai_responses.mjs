// OpenAI's Responses API against `horizon serve` through the official `openai` npm client; tool
// arguments and structured output validated with ajv (both pinned, test-only).
// Usage: node openai_responses.mjs BASE_URL. Prints one JSON object (see the keys of `out`).
import { createRequire } from 'node:module';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const OpenAI = require('openai');
const Ajv = require('ajv');

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const out = {};

const base = { model, input: 'Once upon a time', instructions: 'Tell a story.', max_output_tokens: 24, temperature: 0 };
const r = await client.responses.create(base);
out.text = { id: r.id, object: r.object, status: r.status, incomplete: r.incomplete_details, text: r.output_text,
             instructions: r.instructions, usage: r.usage, items: r.output.map((i) => i.type) };

{
  const s = await client.responses.create({ ...base, stream: true });
  const types = [];
  let text = '';
  let final = null;
  for await (const e of s) {
    types.push(e.type);
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
  }
  out.stream = { types: [...new Set(types)], text, final_text: final.output[0].content[0].text, status: final.status };
}
{
  const s = client.responses.stream(base);
  const final = await s.finalResponse();
  out.stream_helper = { text: final.output_text, status: final.status };
}

const weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const tools = [{ type: 'function', name: 'get_weather', description: 'Weather forecast', parameters: weather, strict: true }];
const validate = new Ajv().compile(weather);
function calls(resp) {
  return resp.output.filter((i) => i.type === 'function_call').map((c) => {
    let args = null;
    try { args = JSON.parse(c.arguments); } catch { args = null; }
    return { name: c.name, call_id: c.call_id, arguments: c.arguments, valid: args !== null && validate(args) };
  });
}
const toolReq = { model, input: 'Weather in Oslo?', tools, tool_choice: { type: 'function', name: 'get_weather' },
                  temperature: 0, max_output_tokens: 200 };
const t = await client.responses.create(toolReq);
out.tool = { status: t.status, calls: calls(t) };
{
  const s = client.responses.stream(toolReq);
  const final = await s.finalResponse();
  out.tool_stream = { status: final.status, calls: calls(final) };
}
{
  const call = t.output.find((i) => i.type === 'function_call');
  const back = await client.responses.create({
    model, tools, max_output_tokens: 8, temperature: 0,
    input: [{ role: 'user', content: 'Weather in Oslo?' },
            { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
            { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 20 C' }],
  });
  out.round_trip = { status: back.status, input_tokens: back.usage.input_tokens };
}

const answer = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 1, maximum: 9 } },
  required: ['name', 'age'],
  additionalProperties: false,
};
{
  const s = await client.responses.create({
    model, input: 'Who is in the story?', temperature: 0, max_output_tokens: 200,
    text: { format: { type: 'json_schema', name: 'answer', schema: answer, strict: true } },
  });
  let parsed = null;
  try { parsed = JSON.parse(s.output_text); } catch { parsed = null; }
  out.schema = { status: s.status, text: s.output_text, valid: parsed !== null && new Ajv().compile(answer)(parsed) };
}

try {
  await client.responses.create({ ...base, previous_response_id: 'resp_123' });
  out.previous = 200;
} catch (e) {
  out.previous = e.status;
}
console.log(JSON.stringify(out));
