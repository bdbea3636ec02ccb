// Renders chat-template test cases with the independent reference renderer @huggingface/jinja
// (pinned in tests/npm/package.json) and prints the results as JSON. Usage:
//   node tests/chat/render_jinja.mjs tests/fixtures/chat_templates/cases.json > expected.json
// cases.json: {"template_dir": "<dir relative to cases.json>",
//              "conversations": [{"name", "messages", "extra", "templates"?: [files]}],
//              "inline": [{"name", "template", "vars"}]}
// Every .jinja file in template_dir is rendered over every conversation (or the listed ones),
// with add_generation_prompt false and true.
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "npm", "package.json"));
const { Template } = require("@huggingface/jinja");

const casesPath = resolve(process.argv[2]);
const spec = JSON.parse(readFileSync(casesPath, "utf8"));
const templateDir = join(dirname(casesPath), spec.template_dir);

function render(source, vars) {
  try {
    return { output: new Template(source).render(vars) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
}

const out = { templates: [], inline: [] };
const files = readdirSync(templateDir).filter((f) => f.endsWith(".jinja")).sort();
for (const file of files) {
  const source = readFileSync(join(templateDir, file), "utf8");
  for (const conv of spec.conversations) {
    if (conv.templates && !conv.templates.includes(file)) continue;
    for (const agp of [false, true]) {
      const vars = { ...(conv.extra || {}), messages: conv.messages, add_generation_prompt: agp };
      out.templates.push({ template: file, conversation: conv.name, add_generation_prompt: agp, ...render(source, vars) });
    }
  }
}
for (const c of spec.inline || []) out.inline.push({ name: c.name, ...render(c.template, c.vars || {}) });
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
