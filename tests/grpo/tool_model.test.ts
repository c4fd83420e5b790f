// The embedded tool-calling model (public/models/tiny-tool) and its task (src/grpo/tool_task.ts): a Hugging
// Face checkpoint folder whose tokenizer is Qwen3's cut down without changing how the task's text is split,
// whose chat template renders tools, tool calls and tool messages as Qwen3's does (a shorter tools system
// prompt aside), whose rewards and tool source do what the task says, and whose model, scored in float64
// by the oracle (src/oracle/model.ts) — the GPU forward must agree —, calls the tool right and then answers
// right with a probability that leaves a group of 8 mixed, in all three JSON spellings.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { assembleBatch, padBatch } from '../../src/grpo/batch.ts';
import { allProblems, isHeldOut } from '../../src/grpo/default_task.ts';
import { compileUserReward, scoreColumn, scoreRewards, type JsRewardRunner, type RewardSample } from '../../src/grpo/rewards.ts';
import {
  CALL_SPELLINGS,
  TOOL_GRPO_CONFIG,
  TOOL_MODEL_NAME,
  TOOL_MODEL_PATH,
  TOOL_PROBLEMS,
  TOOL_PROMPTS,
  TOOL_REWARDS,
  TOOL_TASK_SOURCE,
  TOOL_TASK_TOOLS,
  callText,
  toolConversation,
  toolExamplePieces,
  toolFrame,
  type CallSpelling,
  type MultiplicationProblem,
} from '../../src/grpo/tool_task.ts';
import { parseConfig } from '../../src/model/config.ts';
import { CausalLM } from '../../src/model/model.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { RefModel } from '../../src/oracle/model.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { testGpu } from '../helpers/gpu.ts';
import { expectCutKeepsSplit, QWEN3_DIR } from '../helpers/tokenizers.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MODEL_DIR = path.join(ROOT, 'public', TOOL_MODEL_PATH);

let small: Tokenizer;
let qwen: Tokenizer;
beforeAll(async () => {
  [small, qwen] = await Promise.all([loadTokenizerDir(MODEL_DIR), loadTokenizerDir(QWEN3_DIR)]);
});

const SPELLINGS: CallSpelling[] = ['canonical', 'compact', 'padded'];
const p0: MultiplicationProblem = { a: 37, b: 45 }; // the brief's example (a training problem: fine for rendering)

describe('tiny-tool files and tokenizer', () => {
  it('is a Hugging Face checkpoint folder under 20 MB whose vocabulary matches its tokenizer, with the tool special tokens', () => {
    expect(TOOL_MODEL_PATH).toBe(`models/${TOOL_MODEL_NAME}`);
    const files = readdirSync(MODEL_DIR);
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'generation_config.json', 'README.md']) expect(files).toContain(f);
    expect(files.reduce((n, f) => n + statSync(path.join(MODEL_DIR, f)).size, 0)).toBeLessThan(20 * 1024 * 1024);
    const config = parseConfig(JSON.parse(readFileSync(path.join(MODEL_DIR, 'config.json'), 'utf8')));
    expect(config.family).toBe('qwen2');
    expect(config.vocab_size).toBe(small.vocab_size);
    expect(small.vocab_size).toBeLessThan(1000);
    expect(small.idToToken(small.eos_token_id!)).toBe('<|im_end|>');
    expect(small.idToToken(small.pad_token_id!)).toBe('<|endoftext|>');
    for (const t of ['<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>', '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>']) {
      const ids = small.encode(t);
      expect(ids, t).toHaveLength(1);
      expect(small.idToToken(ids[0])).toBe(t);
    }
  });

  it('splits tool conversations, every spelling and answer style, into the same tokens as the full Qwen3 tokenizer', () => {
    expect(qwen.vocab_size).toBeGreaterThan(150_000);
    const texts = [...TOOL_PROBLEMS, { a: 99, b: 99 }, { a: 10, b: 10 }].flatMap((p) => {
      const frame = toolFrame(small, p);
      return SPELLINGS.flatMap((spelling) => [false, true].map((sentence) => toolExamplePieces(frame, p, spelling, sentence).map((x) => x.text).join('')));
    });
    expectCutKeepsSplit(small, qwen, texts, 'Ünïcödé ✓ 🚀 {"x":\t[1, 2]}');
  });

  it("renders tools, the assistant's tool call and the tool message as Qwen3's template does, with a one-line tools prompt", () => {
    const conversation = toolConversation(p0);
    const opts = { tools: TOOL_TASK_TOOLS, add_generation_prompt: false };
    const mine = small.renderChat(conversation, opts);
    const theirs = qwen.applyChatTemplate(conversation, opts);
    // Hand-written: the compact tools system block, then Qwen3's own turns (the last one with its empty think block).
    const system = '<|im_start|>system\n# Tools\n<tools>\nmultiply(a: integer, b: integer)\n</tools><|im_end|>\n';
    const turns =
      '<|im_start|>user\nWhat is 37 * 45?<|im_end|>\n' +
      '<|im_start|>assistant\n<tool_call>\n{"name": "multiply", "arguments": {"a": 37, "b": 45}}\n</tool_call><|im_end|>\n' +
      '<|im_start|>user\n<tool_response>\n1665\n</tool_response><|im_end|>\n' +
      '<|im_start|>assistant\n<think>\n\n</think>\n\n1665<|im_end|>\n';
    expect(mine.text).toBe(system + turns);
    // Qwen3 differs in the system block only.
    expect(theirs.startsWith('<|im_start|>system\n# Tools\n\nYou may call one or more functions')).toBe(true);
    expect(theirs.endsWith(turns)).toBe(true);
    expect(theirs.slice(0, theirs.indexOf('<|im_end|>\n') + 11)).not.toBe(system);
    // The call and the response are tokens, not text: one id each for their tags.
    const tags = mine.tokens.filter((t) => ['<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>'].includes(t.token));
    expect(tags.map((t) => mine.text.slice(t.start, t.end))).toEqual(['<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>']);
    // A user system message goes first in the tools block, as in Qwen3's.
    const withSystem = small.applyChatTemplate([{ role: 'system', content: 'Be brief.' }, ...conversation.slice(0, 1)], { tools: TOOL_TASK_TOOLS });
    expect(withSystem).toBe('<|im_start|>system\nBe brief.\n\n# Tools\n<tools>\nmultiply(a: integer, b: integer)\n</tools><|im_end|>\n<|im_start|>user\nWhat is 37 * 45?<|im_end|>\n<|im_start|>assistant\n');
    // No tools: Qwen3's template exactly.
    expect(small.applyChatTemplate(conversation.slice(0, 1))).toBe(qwen.applyChatTemplate(conversation.slice(0, 1)));
  });

  it("the tool loop's pieces: the prompt, the call, the tool block up to the next generation prompt, the answer", () => {
    const pieces = toolExamplePieces(toolFrame(small, p0), p0, 'compact', true);
    expect(pieces.map((x) => x.trained)).toEqual([false, true, false, true]);
    expect(pieces[0].text.endsWith('<|im_start|>user\nWhat is 37 * 45?<|im_end|>\n<|im_start|>assistant\n')).toBe(true);
    expect(pieces.slice(1).map((x) => x.text)).toEqual([
      '<tool_call>\n{"name":"multiply","arguments":{"a":37,"b":45}}\n</tool_call><|im_end|>',
      '\n<|im_start|>user\n<tool_response>\n1665\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
      'The answer is 1665.<|im_end|>',
    ]);
  });

  it('re-rendering a compact or padded call canonically changes its token count (the bug the studio shows)', () => {
    const n = (s: CallSpelling) => small.encode(callText(p0, s)).length;
    expect(n('compact')).toBeLessThan(n('canonical'));
    expect(n('padded')).toBeGreaterThan(n('canonical'));
    // Every spelling is valid JSON for the same call.
    for (const s of SPELLINGS) expect(JSON.parse(callText(p0, s).slice('<tool_call>\n'.length, -'\n</tool_call>'.length))).toEqual({ name: 'multiply', arguments: { a: 37, b: 45 } });
  });
});

describe('tool task', () => {
  it('preloads held-out prompts with 3- and 4-digit products and their reference answers', () => {
    for (const p of TOOL_PROBLEMS) expect(isHeldOut(p)).toBe(true);
    expect(TOOL_PROMPTS.map((p) => p.answer)).toEqual(['1776', '276', '7826', '850']);
    expect(TOOL_PROMPTS[0].messages).toEqual([{ role: 'user', content: 'What is 37 * 48?' }]);
  });

  it('runs the tool source as the sandbox will: multiply(a, b) = a·b', () => {
    const tools = new Function(`"use strict"; return (${TOOL_TASK_SOURCE});`)() as Record<string, (args: Record<string, number>) => number>;
    expect(Object.keys(tools)).toEqual(TOOL_TASK_TOOLS.map((t) => (t.function as { name: string }).name));
    expect(tools.multiply({ a: 37, b: 45 })).toBe(1665);
  });

  it('leaves room for the longest trained completion (padded call, tool block, sentence)', () => {
    let longest = 0;
    for (const p of allProblems().filter((q) => q.a * q.b >= 1000 && (q.a + q.b) % 7 === 0)) {
      const pieces = toolExamplePieces(toolFrame(small, p), p, 'padded', true);
      longest = Math.max(longest, pieces.slice(1).reduce((n, x) => n + small.encode(x.text).length, 0));
    }
    expect(longest).toBeGreaterThan(60);
    expect(TOOL_GRPO_CONFIG.max_completion_length!).toBeGreaterThanOrEqual(longest);
    expect(TOOL_GRPO_CONFIG.max_tool_calling_iterations).toBe(2);
  });

  it('rewards the right final answer and a right call in any spelling, on completions decoded with or without special tokens', async () => {
    const block = '\n<|im_start|>user\n<tool_response>\n1665\n</tool_response><|im_end|>\n<|im_start|>assistant\n';
    const call = (s: CallSpelling) => `${callText(p0, s)}<|im_end|>`;
    // [completion (special tokens kept), correctness, tool_call]
    const cases: [string, number, number][] = [
      [`${call('canonical')}${block}1665<|im_end|>`, 1, 1],
      [`${call('padded')}${block}1665<|im_end|>`, 1, 1],
      [`${call('compact')}${block}1665`, 1, 1], // cut off before <|im_end|>: still right
      [`${call('canonical')}${block}The answer is 1665.<|im_end|>`, 0, 1], // the sentence style
      [`${call('canonical')}${block}1656<|im_end|>`, 0, 1],
      [`${callText({ a: 37, b: 54 }, 'canonical')}<|im_end|>${block.replace('1665', '1998')}1998<|im_end|>`, 0, 0], // wrong call
      ['1665<|im_end|>', 1, 0], // answered without the tool
      ['<tool_call>\n{"name": "multiply", "arguments": {"a": 37,\n</tool_call><|im_end|>', 0, 0], // broken JSON, no tool result
    ];
    const skipSpecial = (s: string) => s.replace(/<\|[a-z_]+\|>/g, '');
    const samples: RewardSample[] = [...cases.map(([c]) => c), ...cases.map(([c]) => skipSpecial(c))].map((completion, index) => ({ index, group: 0, prompt: '', completion, answer: '1665', completion_ids: [] }));
    const runJs: JsRewardRunner = async (spec, s) => scoreColumn(compileUserReward(spec.name, spec.source), s);
    const t = await scoreRewards(TOOL_REWARDS, samples, runJs);
    expect(t.names).toEqual(['correctness', 'tool_call']);
    expect(t.errors).toEqual([]);
    const expected = cases.map(([, c, k]) => [c, k]);
    expect(t.rewards_per_func).toEqual([...expected, ...expected]);
  });
});

/** log softmax of one row of logits, in float64. */
function logSoftmax(z: ArrayLike<number>, off: number, V: number): (i: number) => number {
  let m = -Infinity;
  for (let v = 0; v < V; v++) m = Math.max(m, z[off + v]);
  let s = 0;
  for (let v = 0; v < V; v++) s += Math.exp(z[off + v] - m);
  const lse = m + Math.log(s);
  return (i) => z[off + i] - lse;
}

describe('the shipped tiny-tool model, scored in float64', () => {
  // Held-out problems: the preloaded prompts and a fixed spread of others.
  const problems: MultiplicationProblem[] = [...TOOL_PROBLEMS, ...allProblems().filter((p) => isHeldOut(p) && (p.a * 13 + p.b) % 61 === 0)];

  /** Rows of every (problem, spelling, style): prompt, completion and the trained-token mask. */
  function rows() {
    return problems.flatMap((p) =>
      SPELLINGS.flatMap((spelling) =>
        [false, true].map((sentence) => {
          const [prompt, ...rest] = toolExamplePieces(toolFrame(small, p), p, spelling, sentence).map((x) => ({ ids: small.encode(x.text), trained: x.trained }));
          return { p, spelling, sentence, prompt: prompt.ids, completion: rest.flatMap((x) => x.ids), loss: rest.flatMap((x) => x.ids.map((): number => (x.trained ? 1 : 0))) };
        }),
      ),
    );
  }

  it('calls the tool right, then answers right, about half the time at temperature 1, in all three spellings; the GPU agrees', async () => {
    expect(problems.length).toBeGreaterThanOrEqual(10);
    const rs = rows();
    const batch = padBatch(assembleBatch({ prompt_ids: rs.map((r) => r.prompt), completion_ids: rs.map((r) => r.completion), num_generations: 1, pad_token_id: small.pad_token_id!, eos_token_ids: [] }));
    const { B, L, P, C } = batch;
    const oracle = await RefModel.from_pretrained(new FolderSource(MODEL_DIR));
    const V = oracle.config.vocab_size;
    const logits = oracle.forward({ B, T: L, input_ids: batch.input_ids, attention_mask: batch.attention_mask, position_ids: batch.position_ids }).logits; // (B·L, V)
    // Per row: log P(call) (first trained run) and log P(answer | call, tool result) (second run); token t of
    // the completion is scored by the logits at position P + t − 1.
    const segs = rs.map((r, b) => {
      const out: number[] = [];
      r.loss.forEach((m, t) => {
        if (!m) return;
        if (t === 0 || !r.loss[t - 1]) out.push(0);
        out[out.length - 1] += logSoftmax(logits, (b * L + P + t - 1) * V, V)(r.completion[t]);
      });
      return out;
    });
    expect(segs.every((s) => s.length === 2)).toBe(true);

    // The GPU forward the studio scores with gives the same per-token log-probs.
    const gpu = await testGpu();
    const policy = await CausalLM.from_pretrained(new FolderSource(MODEL_DIR), gpu);
    const rec = gpu.recorder('tool_model');
    const scores = score_completions(rec, policy, batch, { temperature: 1 });
    await rec.finish();
    const gpuLogp = await gpu.readF32(scores.per_token_logps, B * C);
    scores.destroy();
    policy.destroy();
    rs.forEach((r, b) => {
      let call = 0; // the call is the completion's first tokens, up to the tool block
      for (let t = 0; t < r.loss.indexOf(0); t++) call += gpuLogp[b * C + t];
      expect(Math.abs(call - segs[b][0])).toBeLessThan(1e-3);
    });

    // Per problem: P(right call) = Σ over spellings, P(right call and right answer) = Σ over spellings and styles.
    const perProblem = problems.map((_, i) => {
      const mine = segs.slice(6 * i, 6 * i + 6);
      const call = (s: CallSpelling) => Math.exp(mine[2 * SPELLINGS.indexOf(s)][0]);
      return {
        call: SPELLINGS.reduce((a, s) => a + call(s), 0),
        right: mine.reduce((a, [c, ans]) => a + Math.exp(c + ans), 0),
        shares: Object.fromEntries(SPELLINGS.map((s) => [s, call(s)])) as Record<CallSpelling, number>,
      };
    });
    const mean = (f: (x: (typeof perProblem)[number]) => number) => perProblem.reduce((a, x) => a + f(x), 0) / perProblem.length;
    const right = mean((x) => x.right);
    const call = mean((x) => x.call);
    // A group of 8 is mixed unless all agree: p⁸ + (1 − p)⁸ stays under ~0.2 for p in [0.2, 0.85].
    expect(right).toBeGreaterThan(0.2);
    expect(right).toBeLessThan(0.85);
    expect(call).toBeGreaterThanOrEqual(right);
    expect(call).toBeLessThanOrEqual(1);
    // Not a model that always calls right: some calls go wrong too.
    expect(call).toBeLessThan(0.97);
    // Every spelling is sampled: among right calls, compact and padded each hold a few percent, canonical the most.
    const share = (s: CallSpelling) => mean((x) => x.shares[s]) / call;
    expect(share('canonical')).toBeGreaterThan(share('compact'));
    expect(share('canonical')).toBeGreaterThan(share('padded'));
    for (const s of ['compact', 'padded'] as const) expect(share(s)).toBeGreaterThan(0.03);
    // The preloaded prompts are not all-right or all-wrong either.
    for (const x of perProblem.slice(0, TOOL_PROBLEMS.length)) expect(x.right).toBeGreaterThan(0.02);
    expect(CALL_SPELLINGS.map((c) => c.spelling)).toEqual(SPELLINGS);
  });
});
