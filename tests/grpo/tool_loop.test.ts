// The tool-call rollout (src/grpo/tool_loop.ts) on the real Qwen3 tokenizer and template, with a scripted
// model (each turn's ids written as literal text): parsing as TRL's Qwen3 response schema does, the concat way
// (TRL since #5242: sampled ids kept, tool block = the suffix text, tool_mask 0 exactly there, log-probs 0.0
// there), and the rerender way (TRL before #5242) on seed 003's padded tool call: the call comes back in the
// template's canonical spelling, the mask built from the sampled length slides onto the tool block by the
// difference, and a call padded past the tool block's length leaves tool_mask longer than the completion
// (huggingface/trl#5145). Expected ids and counts are tokens of literal text, not the loop's own output.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import type { ChatMessage } from '../../src/io/batch.ts';
import { parseAssistantTurn, toolCallLoop, toolError, type PendingCall } from '../../src/grpo/tool_loop.ts';
import type { ToolLoopWay } from '../../src/grpo/tool_ways.ts';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';
import { QWEN_EOS, TOOLS } from '../helpers/conversations.ts';

let qwen: Tokenizer;
beforeAll(async () => {
  qwen = await loadTokenizerDir(QWEN3_DIR);
});

const EOT = '<|im_end|>';
const CANONICAL = '<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call>';
const COMPACT = '<tool_call>\n{"name":"multiply","arguments":{"a":3,"b":4}}\n</tool_call>';
const PADDED = (n: number) => `<tool_call>\n{\n${' '.repeat(n)}"name"   :   "multiply",\n${' '.repeat(n)}"arguments" : { "a" :  3, "b" :  4 }\n}\n</tool_call>`;
/** JSON whitespace Qwen3 cannot merge into one token ("\t \n" is three): a call many tokens longer than its canonical spelling. */
const TABBED = (() => {
  const w = '\t \n'.repeat(2);
  return `<tool_call>\n{${w}"name"${w}:${w}"multiply",${w}"arguments"${w}:${w}{${w}"a"${w}:${w}3,${w}"b"${w}:${w}4${w}}${w}}\n</tool_call>`;
})();
const TOOL_BLOCK = '\n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n<|im_start|>assistant\n';
const PROMPT: ChatMessage[] = [{ role: 'user', content: 'What is 3 * 4?' }];

/** One row through the loop: the first turn and the answer after the tool are scripted text. */
async function run(way: ToolLoopWay, firstTurn: string, answer = '12' + EOT, run = async (calls: readonly PendingCall[]) => calls.map((c) => String(Number(c.arguments.a) * Number(c.arguments.b))), max_completion_length = 512) {
  const render = { tools: TOOLS };
  const prompt_ids = qwen.renderChat(PROMPT, { ...render, add_generation_prompt: true }).ids;
  const first = qwen.encode(firstTurn);
  const inputs: number[][] = [];
  const rows = await toolCallLoop(
    { prompt_ids: [prompt_ids], prompt_messages: [PROMPT], completion_ids: [first], logps: [first.map(() => -0.5)], finish_reason: ['eos'] },
    async (seqs) => {
      inputs.push(...seqs);
      const ids = seqs.map(() => qwen.encode(answer));
      return { completion_ids: ids, logps: ids.map((r) => r.map(() => -0.25)), finish_reason: ids.map(() => 'eos' as const) };
    },
    { tokenizer: qwen, render, eos_token_id: QWEN_EOS, run },
    { way, max_tool_calling_iterations: 3, max_completion_length },
  );
  return { row: rows[0], prompt_ids, first, inputs };
}

describe('parseAssistantTurn (TRL parse_response, Qwen3 schema)', () => {
  it('reads canonical, compact and padded JSON calls alike, with content and reasoning apart', () => {
    for (const call of [CANONICAL, COMPACT, PADDED(8), TABBED]) {
      const t = parseAssistantTurn(`<think>\nmultiply\n</think>\n\nLet me call it.\n${call}${EOT}`, EOT);
      expect(t).toEqual({ role: 'assistant', content: 'Let me call it.', reasoning_content: 'multiply', tool_calls: [{ type: 'function', function: { name: 'multiply', arguments: { a: 3, b: 4 } } }] });
    }
  });

  it('a call that is not {name, arguments} JSON leaves the turn plain text (no tool runs)', () => {
    for (const bad of ['<tool_call>\n{"name": "multiply", "arguments": {"a": 3,}}\n</tool_call>', '<tool_call>\n{"name": 3, "arguments": {}}\n</tool_call>', '<tool_call>\n{"name": "m", "arguments": [1]}\n</tool_call>']) {
      const t = parseAssistantTurn(bad + EOT, EOT);
      expect(t.tool_calls).toBeUndefined();
      expect(t.content).toBe(bad);
    }
    expect(parseAssistantTurn('12' + EOT, EOT)).toEqual({ role: 'assistant', content: '12' });
  });

  it('formats a tool error as TRL str()s its {"error": …} dict', () => {
    expect(toolError("Tool nope not found.")).toBe("{'error': 'Tool nope not found.'}");
    expect(toolError("it's")).toBe("{'error': 'it\\'s'}");
  });
});

describe('toolCallLoop, concat (TRL since #5242)', () => {
  it('keeps the sampled ids, appends the tool block as the template writes it, masks exactly that block', async () => {
    const { row, prompt_ids, first, inputs } = await run('concat', COMPACT + EOT);
    const block = qwen.encode(TOOL_BLOCK);
    const answer = qwen.encode('12' + EOT);
    expect(inputs).toEqual([[...prompt_ids, ...first, ...block]]);
    expect(row.completion_ids).toEqual([...first, ...block, ...answer]);
    expect(row.tool_mask).toEqual([...first.map(() => 1), ...block.map(() => 0), ...answer.map(() => 1)]);
    expect(row.logps).toEqual([...first.map(() => -0.5), ...block.map(() => 0), ...answer.map(() => -0.25)]);
    expect(row.retokenized).toEqual([]);
    expect(row.mask_overflow).toBeNull();
    expect(row).toMatchObject({ tool_calls: 1, tool_failures: 0 });
    expect(row.messages).toEqual([
      ...PROMPT,
      { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'multiply', arguments: { a: 3, b: 4 } } }] },
      { role: 'tool', name: 'multiply', content: '12' },
      { role: 'assistant', content: '12' },
    ]);
  });

  it('the completion budget cuts the answer after the tool block: the row ends by length', async () => {
    const first = qwen.encode(COMPACT + EOT);
    const block = qwen.encode(TOOL_BLOCK);
    const answer = qwen.encode('12' + EOT);
    const full = await run('concat', COMPACT + EOT);
    expect(full.row.finish_reason).toBe('eos');
    const cut = await run('concat', COMPACT + EOT, '12' + EOT, undefined, first.length + block.length + 1);
    expect(cut.row.completion_ids).toEqual([...first, ...block, answer[0]]);
    expect(cut.row.finish_reason).toBe('length');
    // A tool result that would pass the budget is rolled back: the row keeps its first turn, no tool message.
    const over = await run('concat', COMPACT + EOT, '12' + EOT, undefined, first.length + block.length - 1);
    expect(over.row.completion_ids).toEqual(first);
    expect(over.row.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
  });

  it('a failing tool becomes TRL\'s error result, counted', async () => {
    const { row } = await run('concat', CANONICAL + EOT, '12' + EOT, async (calls) => calls.map(() => toolError('boom')));
    expect(row).toMatchObject({ tool_calls: 1, tool_failures: 1 });
    expect(row.messages[2]).toEqual({ role: 'tool', name: 'multiply', content: "{'error': 'boom'}" });
  });

  it('stops at max_tool_calling_iterations: a model that keeps calling gets that many tool blocks', async () => {
    const { row } = await run('concat', CANONICAL + EOT, CANONICAL + EOT);
    expect(row.tool_calls).toBe(3);
    expect(row.messages.filter((m) => m.role === 'tool')).toHaveLength(3);
    expect(row.tool_mask.length).toBe(row.completion_ids.length);
  });
});

describe('toolCallLoop, rerender (TRL before #5242)', () => {
  it('a canonical call re-renders to the same ids: nothing moves', async () => {
    const concat = await run('concat', CANONICAL + EOT);
    const rerender = await run('rerender', CANONICAL + EOT);
    expect(rerender.row.completion_ids).toEqual(concat.row.completion_ids);
    expect(rerender.row.tool_mask).toEqual(concat.row.tool_mask);
    expect(rerender.row.retokenized).toEqual([]);
  });

  it('a padded call comes back canonical and shorter: the mask slides onto the tool block by the difference', async () => {
    const { row, first } = await run('rerender', PADDED(8) + EOT);
    const canonical = qwen.encode(CANONICAL + EOT);
    const block = qwen.encode(TOOL_BLOCK);
    const d = first.length - canonical.length;
    expect(d).toBeGreaterThan(0);
    expect(d).toBeLessThan(block.length);
    expect(row.completion_ids).toEqual([...canonical, ...block, ...qwen.encode('12' + EOT)]);
    expect(row.tool_mask.length).toBe(row.completion_ids.length);
    // Ones over the first `first.length` positions: all of the canonical call and d tokens of the tool block.
    const onBlock = row.tool_mask.slice(canonical.length, canonical.length + block.length);
    expect(onBlock.filter((m) => m === 1)).toHaveLength(d);
    expect(row.retokenized).toHaveLength(1);
    expect(row.retokenized[0]).toMatchObject({ iteration: 0, sampled_tokens: first.length, rendered_tokens: canonical.length });
    expect(row.mask_overflow).toBeNull();
  });

  it('a compact call comes back longer: the call\'s own last tokens fall out of the mask', async () => {
    const { row, first } = await run('rerender', COMPACT + EOT);
    const canonical = qwen.encode(CANONICAL + EOT);
    expect(canonical.length).toBeGreaterThan(first.length);
    expect(row.tool_mask.slice(0, canonical.length).filter((m) => m === 0)).toHaveLength(canonical.length - first.length);
  });

  it('seed 003: a call padded past the tool block\'s length leaves tool_mask longer than completion_ids (huggingface/trl#5145)', async () => {
    const { row, first } = await run('rerender', TABBED + EOT);
    const canonical = qwen.encode(CANONICAL + EOT);
    const block = qwen.encode(TOOL_BLOCK);
    const answer = qwen.encode('12' + EOT);
    expect(first.length - canonical.length).toBeGreaterThan(block.length);
    // TRL: tool_mask = sampled ones + [0] * (negative) + answer ones; completion = canonical + block + answer.
    expect(row.tool_mask).toHaveLength(first.length + answer.length);
    expect(row.completion_ids).toHaveLength(canonical.length + block.length + answer.length);
    expect(row.mask_overflow).toEqual({ iteration: 0, mask: first.length + answer.length, completion: canonical.length + block.length + answer.length });
  });
});
