// Issue 25, item 1: a row's turns for the grid (src/view/turns.ts). From the masks (property-based, fast-check):
// the spans cover every real position once and in order, a 0-run of tool_mask or inside completion_mask is a
// tool span, and a tool span with tool_mask 0 counts no loss token. From the render: a real Qwen3 tool
// conversation proven by the Doctor (src/doctor/turns.ts provenTurns) gives its roles in place, and a tool
// call the trainer re-rendered is marked as a tool-call-retokenized run.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { diagnose } from '../../src/doctor/index.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { hasTurns, maskTurns, realRange, rowTurns, spanAt, turnSums } from '../../src/view/turns.ts';
import { QWEN_EOS, qwenToolConversation, storedRow, TOOLS, type Piece } from '../helpers/conversations.ts';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';

const PAD = 0;
const EOS = 9;

/** One row: left padding, a prompt, a completion of assistant (1) / tool (0) runs ending at EOS, right padding. */
const rowArb = fc.record({
  pads: fc.nat(3),
  prompt: fc.integer({ min: 1, max: 6 }),
  runs: fc.array(fc.record({ tool: fc.boolean(), n: fc.integer({ min: 1, max: 5 }) }), { minLength: 1, maxLength: 6 }),
  tail: fc.nat(3),
  viaToolMask: fc.boolean(),
});
type RowSpec = { pads: number; prompt: number; runs: { tool: boolean; n: number }[]; tail: number; viaToolMask: boolean };

/** A batch of one row per spec: tool runs as TRL's tool_mask 0 (completion_mask 1), or as verl's completion_mask 0. */
function batchOf(rows: RowSpec[]): GrpoBatch {
  const useTool = rows.some((r) => r.viaToolMask);
  const prompt_ids: number[][] = [];
  const completion_ids: number[][] = [];
  const completion_mask: number[][] = [];
  const tool_mask: number[][] = [];
  for (const r of rows) {
    prompt_ids.push([...Array(r.pads).fill(PAD), ...Array(r.prompt).fill(5)]);
    // The last run is the model's: a completion ends on its own turn (EOS, mask 1).
    const runs = [...r.runs, { tool: false, n: 1 }];
    const ids: number[] = [];
    const cm: number[] = [];
    const tm: number[] = [];
    for (const run of runs)
      for (let i = 0; i < run.n; i++) {
        ids.push(run.tool ? 7 : 6);
        cm.push(run.tool && !r.viaToolMask ? 0 : 1);
        tm.push(run.tool && r.viaToolMask ? 0 : 1);
      }
    ids[ids.length - 1] = EOS;
    completion_ids.push([...ids, ...Array(r.tail).fill(PAD)]);
    completion_mask.push([...cm, ...Array(r.tail).fill(0)]);
    tool_mask.push([...tm, ...Array(r.tail).fill(0)]);
  }
  return { format: 'grpo-batch/v1', num_generations: rows.length, pad_token_id: PAD, eos_token_ids: [EOS], prompt_ids, completion_ids, completion_mask, ...(useTool ? { tool_mask } : {}) };
}

describe('turns from the masks', () => {
  it('cover every real position once, in order; a 0-run inside the completion is a tool span; tool spans count no loss token', () => {
    fc.assert(
      fc.property(fc.array(rowArb, { minLength: 1, maxLength: 4 }), (rows) => {
        const batch = batchOf(rows);
        rows.forEach((r, b) => {
          const spans = maskTurns(batch, b);
          const [first, end] = realRange(batch, b);
          expect([first, end]).toEqual([r.pads, r.pads + r.prompt + r.runs.reduce((n, x) => n + x.n, 0) + 1]);
          // Contiguous, in order, from the first real prompt token to the completion's end.
          expect(spans[0].start).toBe(first);
          expect(spans[spans.length - 1].end).toBe(end);
          for (let k = 1; k < spans.length; k++) expect(spans[k].start).toBe(spans[k - 1].end);
          for (const s of spans) expect(s.end).toBeGreaterThan(s.start);
          // Every position's span is found, and it is the one that holds it.
          for (let p = first; p < end; p++) expect(spans[spanAt(spans, p)].start).toBeLessThanOrEqual(p);
          expect(spanAt(spans, end)).toBe(-1);
          // The prompt, then alternating assistant / tool spans matching the planted runs (adjacent runs of one kind merge).
          expect(spans[0]).toMatchObject({ role: 'prompt', source: 'masks', message: null });
          const kinds = [...r.runs.map((x) => x.tool), false].filter((t, i, a) => i === 0 || t !== a[i - 1]);
          expect(spans.slice(1).map((s) => s.role)).toEqual(kinds.map((t) => (t ? 'tool' : 'assistant')));
          const sums = turnSums(batch, b, spans);
          spans.forEach((s, k) => {
            expect(sums[k].tokens).toBe(s.end - s.start);
            if (s.role === 'tool' || s.role === 'prompt') expect(sums[k].loss_tokens).toBe(0);
            else expect(sums[k].loss_tokens).toBe(s.end - s.start);
          });
        });
        expect(hasTurns(batch)).toBe(batch.tool_mask !== undefined || rows.some((r) => r.runs.some((x) => x.tool)));
      }),
      { numRuns: 300 },
    );
  });

  it('sums Σ loss and Σ KL over the loss tokens, Σ |mismatch| over every completion token, and honour the effective mask', () => {
    const batch = batchOf([{ pads: 1, prompt: 2, runs: [{ tool: false, n: 2 }, { tool: true, n: 2 }, { tool: false, n: 1 }], tail: 1, viaToolMask: true }]);
    const spans = maskTurns(batch, 0);
    expect(spans.map((s) => [s.role, s.start, s.end])).toEqual([['prompt', 1, 3], ['assistant', 3, 5], ['tool', 5, 7], ['assistant', 7, 9]]);
    const one = () => 1;
    const sums = turnSums(batch, 0, spans, { loss: one, kl: () => 0.5, mismatch: (_, j) => (j % 2 ? -1 : 2), effective: (_, j) => (j === 5 ? 0 : 1) });
    expect(sums.map((s) => s.loss_tokens)).toEqual([0, 2, 0, 1]);
    expect(sums.map((s) => s.loss)).toEqual([0, 2, 0, 1]);
    expect(sums.map((s) => s.kl)).toEqual([0, 1, 0, 0.5]);
    expect(sums.map((s) => s.mismatch)).toEqual([0, 3, 3, 3]);
    // No arrays: the sums that need them are null.
    expect(turnSums(batch, 0, spans)[1]).toMatchObject({ loss: null, kl: null, mismatch: null });
  });

  it('a single-turn batch without tool_mask has no turns to show', () => {
    expect(hasTurns(batchOf([{ pads: 0, prompt: 3, runs: [{ tool: false, n: 3 }], tail: 2, viaToolMask: false }]))).toBe(false);
  });
});

describe('turns from the render (Qwen3)', () => {
  let qwen: Tokenizer;
  beforeAll(async () => {
    qwen = await loadTokenizerDir(QWEN3_DIR);
  });

  /** A batch of rows built from pieces (left-padded to one prompt width), with the conversation and tools. */
  function qwenBatch(rows: { pieces: Piece[]; messages: GrpoBatch['messages'] extends (infer M)[] | undefined ? M : never }[]): GrpoBatch {
    const built = rows.map((r) => storedRow(qwen, r.pieces));
    const P = Math.max(...built.map((r) => r.prompt.length));
    return {
      format: 'grpo-batch/v1', num_generations: rows.length, pad_token_id: 151643, eos_token_ids: [QWEN_EOS], tools: TOOLS,
      prompt_ids: built.map((r) => [...Array(P - r.prompt.length).fill(151643), ...r.prompt]),
      prompt_mask: built.map((r) => [...Array(P - r.prompt.length).fill(0), ...r.prompt.map(() => 1)]),
      completion_ids: built.map((r) => r.completion), completion_mask: built.map((r) => r.completion_mask), tool_mask: built.map((r) => r.tool_mask),
      messages: rows.map((r) => r.messages),
    };
  }

  it('a tool conversation: system / user / assistant / tool call / tool response spans where the pieces put them, tool out of the loss', () => {
    const { messages, pieces } = qwenToolConversation();
    const batch = qwenBatch([{ pieces, messages }]);
    const report = diagnose(batch, { tokenizer: qwen });
    const proven = report.turns?.[0];
    expect(proven && 'spans' in proven).toBe(true);
    const t = rowTurns(batch, 0, proven);
    expect(t.diffs).toEqual([]);
    expect(t.spans.every((s) => s.source === 'render')).toBe(true);
    // No system message: the tools' system block is rendered as part of the first user message's turn.
    expect(t.spans.map((s) => [s.message, s.role])).toEqual([[0, 'user'], [1, 'assistant'], [1, 'tool_call'], [1, 'assistant'], [2, 'tool'], [3, 'assistant']]);
    const len = (text: string) => qwen.encode(text).length;
    const Lp = batch.prompt_ids[0].length;
    const tool = t.spans.find((s) => s.role === 'tool')!;
    expect(tool.end - tool.start).toBe(len(pieces[3].text) - len('<|im_start|>assistant\n'));
    expect(tool.start).toBe(Lp + len(pieces[1].text) + len(pieces[2].text));
    const sums = turnSums(batch, 0, t.spans);
    expect(sums[t.spans.indexOf(tool)].loss_tokens).toBe(0);
    expect(sums.reduce((n, s) => n + s.tokens, 0)).toBe(Lp + batch.completion_ids[0].length);
  });

  it('a tool call the trainer re-rendered: the row still gets its turns, and the differing run is marked tool-call-retokenized', () => {
    const { messages, pieces } = qwenToolConversation();
    // The model wrote the call with no space after the colons; the parsed tool_calls render it with one.
    const odd = pieces.map((p, i) => (i === 2 ? { ...p, text: '<tool_call>\n{"name":"multiply","arguments":{"a":3,"b":4}}\n</tool_call><|im_end|>' } : p));
    const batch = qwenBatch([{ pieces, messages }, { pieces: odd, messages }]);
    const report = diagnose(batch, { tokenizer: qwen });
    const t = rowTurns(batch, 1, report.turns?.[1]);
    expect(t.spans.some((s) => s.role === 'tool_call')).toBe(true);
    expect(t.diffs.length).toBeGreaterThan(0);
    expect(t.diffs.map((d) => d.cause)).toContain('tool-call-retokenized');
    const d = t.diffs.find((x) => x.cause === 'tool-call-retokenized')!;
    const call = t.spans.find((s) => s.role === 'tool_call')!;
    expect(d.start).toBeGreaterThanOrEqual(call.start);
    expect(d.start).toBeLessThan(call.end);
    // Row 0 stays clean.
    expect(rowTurns(batch, 0, report.turns?.[0]).diffs).toEqual([]);
  });

  it('a row the proof could not use falls back to the masks and says why', () => {
    const batch = batchOf([{ pads: 0, prompt: 2, runs: [{ tool: false, n: 2 }, { tool: true, n: 1 }], tail: 0, viaToolMask: true }]);
    const t = rowTurns(batch, 0, { error: 'the conversation has no assistant turn' });
    expect(t.spans.every((s) => s.source === 'masks')).toBe(true);
    expect(t.note).toMatch(/no assistant turn/);
  });
});
