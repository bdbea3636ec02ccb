// /v1/embeddings through the official `openai` npm client (pinned, test-only) and plain fetch.
// Usage: node openai_embeddings.mjs BASE_URL   Prints one JSON object.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../npm/package.json', import.meta.url));
const OpenAI = require('openai');

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const texts = ['Once upon a time', 'The cat sat on the mat.', 'Lily liked to play in the park with her dog.'];

const post = async (body) => {
  const r = await fetch(baseURL + '/v1/embeddings', { method: 'POST', body: JSON.stringify({ model, ...body }),
                                                       headers: { 'Content-Type': 'application/json' } });
  return { status: r.status, body: await r.json() };
};
const decode = (b64) => {
  const buf = Buffer.from(b64, 'base64');
  return Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4));
};
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

const out = {};
// The client asks for base64 by default and decodes it itself.
const c = await client.embeddings.create({ model, input: texts });
out.client = { n: c.data.length, dims: c.data.map((d) => d.embedding.length), norms: c.data.map((d) => norm(d.embedding)),
               usage: c.usage, object: c.object };
const asFloat = await post({ input: texts, encoding_format: 'float' });
const asBase64 = await post({ input: texts, encoding_format: 'base64' });
out.float_equals_client = asFloat.body.data.every((d, i) => JSON.stringify(d.embedding) === JSON.stringify(c.data[i].embedding));
out.base64_decodes_to_float = asBase64.body.data.every(
  (d, i) => JSON.stringify(decode(d.embedding)) === JSON.stringify(asFloat.body.data[i].embedding));
// One by one, and in another batch order: the same bytes.
const single = [];
for (const t of texts) single.push((await post({ input: t, encoding_format: 'base64' })).body.data[0].embedding);
out.batch_equals_single = asBase64.body.data.every((d, i) => d.embedding === single[i]);
const reversed = await post({ input: [...texts].reverse(), encoding_format: 'base64' });
out.order_independent = reversed.body.data.every((d, i) => d.embedding === single[texts.length - 1 - i]);
out.distinct = single[0] !== single[1] && single[1] !== single[2];
// Token ids as input equal the text they spell.
const tok = await (await fetch(baseURL + '/tokenize', { method: 'POST', body: JSON.stringify({ content: texts[0], add_special: true }) })).json();
const byIds = await post({ input: tok.tokens, encoding_format: 'base64' });
out.tokens_equal_text = byIds.body.data[0].embedding === single[0];
out.errors = {
  wrong_model: (await post({ model: 'nope', input: 'a' })).status,
  empty: (await post({ input: [] })).body.error?.param ?? null,
  dimensions: (await post({ input: 'a', dimensions: 8 })).body.error?.param ?? null,
  format: (await post({ input: 'a', encoding_format: 'hex' })).body.error?.param ?? null,
};
console.log(JSON.stringify(out));
