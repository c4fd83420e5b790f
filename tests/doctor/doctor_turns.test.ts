// Issue 25, the Doctor's multi-turn rules on the real Qwen3 and Llama 3 tokenizers: tool-tokens-in-loss,
// turn-retokenization and reasoning-dropped name the row, turn and tokens of planted cases and stay silent
// on clean conversations. Seed 003 (TRL #5145) both ways: as the new TRL stores it (the 47 sampled ids of the
// odd-whitespace tool call, parsed to tool_calls) the turn differs from its render; as the old TRL re-rendered
// it (26 tokens) with tool_mask extended from the sampled length, tool-output tokens are trained. Stored ids
// come from hand-written text pieces (tests/helpers/conversations.ts); counts are tokens of literal text.
import { beforeAll, describe, expect, it } from 'vitest';
import { diagnose } from '../../src/doctor/index.ts';
import type { ChatMessage, GrpoBatch } from '../../src/io/batch.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { LLAMA_EOT, llamaTwoTurns, QWEN_EOS, QWEN_TOOLS_SYSTEM, qwenToolConversation, qwenTwoQueries, storedRow, TOOLS } from '../helpers/conversations.ts';
import { LLAMA3_DIR, QWEN3_DIR } from '../helpers/tokenizers.ts';

const SEED_003_IDS = [151657, 198, 515, 6656, 330, 606, 1, 286, 549, 338, 330, 64648, 22785, 756, 6656, 330, 16370, 1, 256, 549, 338, 341, 6374, 330, 64, 1, 256, 549, 220, 220, 18, 345, 6374, 330, 65, 1, 256, 549, 220, 220, 19, 198, 4569, 456, 532, 151658, 151645];
const QWEN_PAD = 151643; // <|endoftext|>
const TURN_RULES = ['tool-tokens-in-loss', 'turn-retokenization', 'reasoning-dropped'];

let qwen: Tokenizer;
let llama: Tokenizer;
beforeAll(async () => {
  [qwen, llama] = await Promise.all([loadTokenizerDir(QWEN3_DIR), loadTokenizerDir(LLAMA3_DIR)]);
});

interface Row { prompt: number[]; completion: number[]; tool_mask?: number[]; messages: ChatMessage[] }

function batchOf(rows: Row[], eos: number, pad: number, extra: Partial<GrpoBatch> = {}): GrpoBatch {
  return {
    format: 'grpo-batch/v1', num_generations: rows.length, pad_token_id: pad, eos_token_ids: [eos],
    prompt_ids: rows.map((r) => r.prompt), completion_ids: rows.map((r) => r.completion), completion_mask: rows.map((r) => r.completion.map(() => 1)),
    tool_mask: rows.some((r) => r.tool_mask) ? rows.map((r) => r.tool_mask ?? r.completion.map(() => 1)) : undefined,
    messages: rows.map((r) => r.messages), rewards: rows.map((_, i) => i), ...extra,
  };
}

const turnFindings = (batch: GrpoBatch, tokenizer?: Tokenizer) => diagnose(batch, { tokenizer }).findings.filter((f) => TURN_RULES.includes(f.rule));

/** Seed 003's conversation: Qwen3, thinking on, one call of multiply_tool, its result, the answer. */
function seedMessages(result: string): ChatMessage[] {
  return [
    { role: 'user', content: 'What is 3 times 4?' },
    { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'multiply_tool', arguments: { a: 3, b: 4 } } }] },
    { role: 'tool', name: 'multiply_tool', content: result },
    { role: 'assistant', content: 'It is 12.', reasoning_content: 'The tool said 12.' },
  ];
}
const SEED_TOOLS = [{ type: 'function', function: { name: 'multiply_tool' } }];
const seedPrompt = () => qwen.encode(`${QWEN_TOOLS_SYSTEM.replace(/<tools>\n.*\n<\/tools>/s, '<tools>\n{"type": "function", "function": {"name": "multiply_tool"}}\n</tools>')}<|im_start|>user\nWhat is 3 times 4?<|im_end|>\n<|im_start|>assistant\n`);
const toolBlock = (result: string) => `\n<|im_start|>user\n<tool_response>\n${result}\n</tool_response><|im_end|>\n`;
const POST = '<think>\nThe tool said 12.\n</think>\n\nIt is 12.<|im_end|>';

describe('multi-turn Doctor rules', () => {
  it('clean Qwen3 tool and Llama 3 conversations give none of the turn findings', () => {
    const q = qwenToolConversation();
    const qr = storedRow(qwen, q.pieces);
    const qb = batchOf([{ ...qr, messages: q.messages }], QWEN_EOS, QWEN_PAD, { tools: TOOLS });
    expect(turnFindings(qb, qwen)).toEqual([]);
    // A whole conversation in messages is its prompt up to the first assistant turn for template-mismatch, rendered with the batch's tools.
    expect(diagnose(qb, { tokenizer: qwen }).findings.filter((f) => f.rule === 'template-mismatch')).toEqual([]);
    const l = llamaTwoTurns();
    const lr = storedRow(llama, l.pieces);
    expect(turnFindings(batchOf([{ ...lr, messages: l.messages }], LLAMA_EOT, 128001), llama)).toEqual([]);
  });

  it('seed 003 as new TRL stores it: the sampled tool call differs from its render (turn-retokenization, a warning: trained as sampled)', () => {
    const prompt = seedPrompt();
    const suffix = qwen.encode(`${toolBlock('12')}<|im_start|>assistant\n`);
    const post = qwen.encode(POST);
    const completion = [...SEED_003_IDS, ...suffix, ...post];
    const tool_mask = [...SEED_003_IDS.map(() => 1), ...suffix.map(() => 0), ...post.map(() => 1)];
    const found = turnFindings(batchOf([{ prompt, completion, tool_mask, messages: seedMessages('12') }], QWEN_EOS, QWEN_PAD, { tools: SEED_TOOLS }), qwen);
    // Only the call's spelling differs: a concatenating loop trains the model's own tokens, which is right; the
    // warning says what a loop that re-renders would train instead.
    expect(found.map((f) => [f.rule, f.severity, f.sample])).toEqual([['turn-retokenization', 'warning', 0]]);
    expect(found[0].message).toMatch(/^sample 0, turn 1 \((assistant|tool call)\): .*tool-call-retokenized/);
    expect(found[0].hint).toMatch(/model's own spelling.*huggingface\/trl#5145/);
    expect(found[0].field).toBe('completion_ids');
    expect(found[0].span![0]).toBeLessThan(SEED_003_IDS.length);
  });

  it('seed 003 as old TRL re-rendered it: tool_mask extended from 47 sampled tokens trains the tool output', () => {
    // TRL < #5242: completion_ids = the re-rendered turn (26 tokens) + tool block; tool_mask += [0] * (len(pct) −
    // prompt − 47) + [1] * post. A short result leaves no 0 at all (41 − 47 < 0); a long one shifts the 0s by 47 − 26 = 21.
    const prompt = seedPrompt();
    const call = qwen.encode('<tool_call>\n{"name": "multiply_tool", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>');
    expect(SEED_003_IDS.length - call.length).toBe(21);
    const post = qwen.encode(POST);
    for (const result of ['12', 'The product of the two numbers you asked about is twelve, written 12, which is even.']) {
      const suffix = qwen.encode(`${toolBlock(result)}<|im_start|>assistant\n`);
      const completion = [...call, ...suffix, ...post];
      const toolLength = call.length + suffix.length - SEED_003_IDS.length; // TRL's tool_length, may be negative
      const tool_mask = [...SEED_003_IDS.map(() => 1), ...new Array<number>(Math.max(0, toolLength)).fill(0), ...post.map(() => 1)];
      const found = diagnose(batchOf([{ prompt, completion, tool_mask, messages: seedMessages(result) }], QWEN_EOS, QWEN_PAD, { tools: SEED_TOOLS }), { tokenizer: qwen }).findings;
      const tool = found.filter((f) => f.rule === 'tool-tokens-in-loss');
      expect(tool).toHaveLength(1);
      const toolTokens = qwen.encode(toolBlock(result)).length;
      // Trained: the whole tool response when no 0 was appended, else its first 21 tokens.
      const trained = toolLength <= 0 ? toolTokens : SEED_003_IDS.length - call.length;
      expect(tool[0]).toMatchObject({ severity: 'error', sample: 0, field: 'completion_ids', span: [call.length, call.length + trained] });
      expect(tool[0].message).toContain(`turn 2 (tool response): ${trained} of its ${toolTokens} tokens are in the loss`);
      // The render agrees with the stored ids (the trainer re-rendered): no turn-retokenization.
      expect(found.filter((f) => f.rule === 'turn-retokenization')).toEqual([]);
    }
  });

  it('a tool conversation without tool_mask trains every tool-response token', () => {
    const q = qwenToolConversation();
    const row = storedRow(qwen, q.pieces);
    const found = turnFindings(batchOf([{ prompt: row.prompt, completion: row.completion, messages: q.messages }], QWEN_EOS, QWEN_PAD, { tools: TOOLS }), qwen);
    const n = qwen.encode(toolBlock('12')).length;
    expect(found.map((f) => f.rule)).toEqual(['tool-tokens-in-loss']);
    expect(found[0].message).toContain(`turn 2 (tool response): ${n} of its ${n} tokens are in the loss (completion_mask 1 and no tool_mask`);
  });

  it('reasoning the template drops from an earlier turn, in the loss (reasoning-dropped)', () => {
    const q = qwenTwoQueries();
    const row = storedRow(qwen, q.pieces);
    const found = turnFindings(batchOf([{ ...row, messages: q.messages }], QWEN_EOS, QWEN_PAD), qwen);
    const block = qwen.encode('<think>\nSmall primes: 2, 3, 5, 7.\n</think>\n\n').length;
    expect(found.map((f) => [f.rule, f.severity])).toEqual([['reasoning-dropped', 'warning']]);
    expect(found[0]).toMatchObject({ sample: 0, field: 'completion_ids', span: [0, block] });
    expect(found[0].message).toContain(`turn 1 (assistant): its reasoning block (${block} tokens, ${block} in the loss`);
    // Masked out of the loss, the same drop is no finding.
    const masked = batchOf([{ ...row, tool_mask: row.tool_mask.map((x, t) => (t < block ? 0 : x)), messages: q.messages }], QWEN_EOS, QWEN_PAD);
    expect(turnFindings(masked, qwen)).toEqual([]);
  });

  it('an effective loss mask that ignores tool_mask, without a tokenizer', () => {
    const batch = batchOf([{ prompt: [5, 6], completion: [7, 8, 9, 10, 2], tool_mask: [1, 0, 0, 1, 1], messages: [{ role: 'user', content: 'x' }] }], 2, 0, { effective_loss_mask: [[1, 1, 0, 1, 1]] });
    const found = turnFindings(batch);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ rule: 'tool-tokens-in-loss', severity: 'error', sample: 0, field: 'effective_loss_mask', span: [1, 2] });
  });

  it('a conversation the template cannot render is a warning naming the row, the other rows still checked', () => {
    const q = qwenToolConversation();
    const row = storedRow(qwen, q.pieces);
    // Content as a list of parts: Qwen3's template calls content.split(...) on an assistant turn and raises.
    const broken = q.messages.map((m, i) => (i === 3 ? { ...m, content: [{ type: 'text', text: 'The answer is 12.' }] } : m)) as unknown as ChatMessage[];
    const noMask = { prompt: row.prompt, completion: row.completion, messages: q.messages };
    const found = turnFindings(batchOf([{ ...row, messages: broken }, noMask], QWEN_EOS, QWEN_PAD, { tools: TOOLS }), qwen);
    // Errors are listed first.
    expect(found.map((f) => [f.rule, f.severity, f.sample])).toEqual([['tool-tokens-in-loss', 'error', 1], ['turn-retokenization', 'warning', 0]]);
    expect(found[1].message).toMatch(/^sample 0: the conversation in messages could not be checked against the stored ids: the chat template raised/);
  });

  it('says why the render rules are skipped', () => {
    const q = qwenToolConversation();
    const row = storedRow(qwen, q.pieces);
    const noTok = diagnose(batchOf([{ ...row, messages: q.messages }], QWEN_EOS, QWEN_PAD));
    expect(noTok.skipped.find((s) => s.rule === 'turn-retokenization')?.reason).toMatch(/tokenizer/);
    const perPrompt = diagnose({ ...batchOf([{ ...row, messages: q.messages }, { ...row, messages: q.messages }], QWEN_EOS, QWEN_PAD), messages: [q.messages.slice(0, 1)], num_generations: 2 }, { tokenizer: qwen });
    expect(perPrompt.skipped.find((s) => s.rule === 'reasoning-dropped')?.reason).toMatch(/one whole conversation per sample/);
  });
});
