// Issue 15, a prompt rendered with two chat templates: the token alignment is a shortest edit script
// (fast-check against the LCS), and on the real Qwen3 tokenizer enable_thinking true vs false differ exactly
// in the "<think>\n\n</think>\n\n" tokens at the end, add_generation_prompt in the assistant header, and a
// pasted template without the system turn in exactly the system block — every other token aligned. The
// page's template sandbox (a worker that renders, killed at its deadline) gives the tokenizer's own text.
import fc from 'fast-check';
import { Template } from '@huggingface/jinja';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alignTokens, MAX_TOKEN_EDITS, type TokenOp } from '../../src/io/batch_diff.ts';
import { boundedRenderer, type BoundedRenderer } from '../../src/tokenize/bounded_node.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import { diffTemplates, type TemplateVariant } from '../../src/tokenize/template_diff.ts';
import { TemplateError, type Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { sandboxRenderer, type TemplateReply, type TemplateRequest, type TemplateWorkerLike } from '../../src/worker/template_sandbox.ts';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';

/** Length of the longest common subsequence (quadratic DP). */
function lcs(a: number[], b: number[]): number {
  const dp = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = 1; i <= a.length; i++) for (let j = 1; j <= b.length; j++) dp[i][j] = a[i - 1] === b[j - 1] ? dp[i - 1][j - 1] + 1 : Math.max(dp[i - 1][j], dp[i][j - 1]);
  return dp[a.length][b.length];
}

const sideOf = (ops: TokenOp[], k: 'a' | 'b') => ops.filter((o) => o[k] !== null).map((o) => o[k]!);

describe('alignTokens', () => {
  it('walks both rows in order, pairs only equal tokens, and keeps as many as the LCS', () => {
    const row = fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 14 });
    fc.assert(fc.property(row, row, fc.boolean(), (a, b, slide) => {
      const ops = alignTokens(a, b, slide ? (id) => id === 0 : undefined);
      expect(sideOf(ops, 'a')).toEqual(a.map((_, i) => i));
      expect(sideOf(ops, 'b')).toEqual(b.map((_, i) => i));
      const same = ops.filter((o) => o.op === 'same');
      for (const o of same) expect(a[o.a!]).toBe(b[o.b!]);
      expect(same.length).toBe(lcs(a, b));
    }), { numRuns: 1500 });
  });

  it('moves a one-sided run to start at a boundary token when an equal alignment allows it', () => {
    // a = 0 5 7 0 6, b = 0 6: deleting "0 5 7" or "5 7 0" are equal edits; the boundary 0 starts the first.
    const show = (ops: TokenOp[]) => ops.map((o) => `${o.op[0]}${o.a ?? '-'}${o.b ?? '-'}`).join(' ');
    expect(show(alignTokens([0, 5, 7, 0, 6], [0, 6], (id) => id === 0))).toBe('r0- r1- r2- s30 s41');
    expect(show(alignTokens([0, 6], [0, 5, 7, 0, 6], (id) => id === 0))).toBe('a-0 a-1 a-2 s03 s14');
  });

  it('refuses rows too different to align instead of using quadratic memory', () => {
    const a = Array.from({ length: MAX_TOKEN_EDITS + 10 }, (_, i) => i);
    expect(() => alignTokens(a, a.map((x) => -1 - x))).toThrow(RangeError);
    expect(alignTokens(a, a).every((o) => o.op === 'same')).toBe(true);
  });
});

let tok: Tokenizer;
let renderer: BoundedRenderer;
beforeAll(async () => {
  tok = await loadTokenizerDir(QWEN3_DIR);
  renderer = boundedRenderer(tok);
});
afterAll(async () => {
  await renderer?.close();
});

const CONVS = [
  [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'What is 2+2?' }],
  [{ role: 'user', content: 'Écris « bonjour » en japonais 🇯🇵' }],
];
const variant = (label: string, over: Partial<TemplateVariant> = {}): TemplateVariant => ({ label, chat_template: null, add_generation_prompt: true, template_kwargs: {}, ...over });

describe('two renderings with the real Qwen3 tokenizer', () => {
  it('enable_thinking true vs false: exactly the empty think block is added, at the end', async () => {
    const d = await diffTemplates(tok, CONVS, [variant('thinking', { template_kwargs: { enable_thinking: true } }), variant('no thinking', { template_kwargs: { enable_thinking: false } })], renderer);
    const think = tok.encode('<think>\n\n</think>\n\n');
    expect(think.length).toBeGreaterThan(2);
    for (const [i, row] of d.rows.entries()) {
      const plain = tok.encode(tok.applyChatTemplate(CONVS[i], { template_kwargs: { enable_thinking: true } }));
      expect(row.a.ids).toEqual(plain);
      expect(row.removed).toBe(0);
      expect(row.added).toBe(think.length);
      const added = row.ops.filter((o) => o.op === 'added').map((o) => row.b.ids[o.b!]);
      expect(added).toEqual(think);
      expect(tok.decode(added)).toBe('<think>\n\n</think>\n\n');
      expect(row.ops.slice(0, plain.length).every((o) => o.op === 'same')).toBe(true); // the think block follows the assistant header
      expect(tok.decode(row.b.ids)).toBe(tok.applyChatTemplate(CONVS[i], { template_kwargs: { enable_thinking: false } }));
      expect(row.b.texts.slice(-think.length)).toEqual(['<think>', '\n\n', '</think>', '\n\n'].slice(4 - think.length));
    }
    expect(d.summary).toEqual({ prompts: 2, prompts_changed: 2, removed: 0, added: 2 * think.length, same: d.rows[0].a.ids.length + d.rows[1].a.ids.length });
  });

  it('add_generation_prompt: the assistant header; the same variant twice: nothing', async () => {
    const d = await diffTemplates(tok, CONVS, [variant('prompt'), variant('no header', { add_generation_prompt: false })], renderer);
    const header = tok.encode('<|im_start|>assistant\n');
    for (const row of d.rows) expect(row.ops.filter((o) => o.op === 'removed').map((o) => row.a.ids[o.a!])).toEqual(header);
    const same = await diffTemplates(tok, CONVS, [variant('a'), variant('b')], renderer);
    expect(same.summary).toMatchObject({ prompts_changed: 0, removed: 0, added: 0 });
  });

  it('a pasted template that drops the system turn: exactly the system block is removed, the rest stays aligned', async () => {
    const pasted = "{%- for m in messages %}{%- if m.role != 'system' %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    const d = await diffTemplates(tok, CONVS.slice(0, 1), [variant('model'), variant('pasted', { chat_template: pasted })], renderer);
    const row = d.rows[0];
    const removed = row.ops.filter((o) => o.op === 'removed').map((o) => row.a.ids[o.a!]);
    expect(tok.decode(removed)).toBe('<|im_start|>system\nAnswer briefly.<|im_end|>\n');
    expect(row.added).toBe(0);
    expect(row.b.ids).toEqual(tok.encode('<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n'));
  });

  it('a template that raises is one line naming the variant and the prompt', async () => {
    const bad = "{{ raise_exception('no system prompts here') }}";
    const err = await diffTemplates(tok, CONVS, [variant('model'), variant('pasted', { chat_template: bad })], renderer).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TemplateError);
    expect((err as Error).message).toMatch(/^template "pasted", prompt 0: .*no system prompts here/);
    expect((err as Error).message).not.toContain('\n');
    // An empty pasted template is refused, not replaced by the tokenizer's own.
    await expect(diffTemplates(tok, CONVS, [variant('model'), variant('pasted', { chat_template: '  ' })], renderer)).rejects.toThrow(/^template "pasted": the pasted chat template is empty$/);
  });
});

describe('the page’s template sandbox', () => {
  /** A worker stand-in running the same jinja engine in-process; `hang` never answers. */
  const fake = (hang = false) => {
    const w: TemplateWorkerLike & { terminated: boolean } = {
      terminated: false,
      onmessage: null,
      onerror: null,
      postMessage(msg: TemplateRequest) {
        if (hang) return;
        const reply: TemplateReply = { id: msg.id, text: new Template(msg.template).render(msg.variables) };
        queueMicrotask(() => w.onmessage?.({ data: reply }));
      },
      terminate() {
        w.terminated = true;
      },
    };
    return w;
  };

  it('renders the tokenizer’s own text, and a render past its deadline stops the worker', async () => {
    const r = sandboxRenderer(tok, () => fake());
    const conv = CONVS[0];
    expect(await r.render(conv, { template_kwargs: { enable_thinking: false } })).toBe(tok.applyChatTemplate(conv, { template_kwargs: { enable_thinking: false } }));
    const workers: ReturnType<typeof fake>[] = [];
    const slow = sandboxRenderer(tok, () => (workers.push(fake(true)), workers.at(-1)!), 50);
    const err = await slow.render(conv).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TemplateError);
    expect((err as TemplateError).kind).toBe('bounds');
    expect(workers[0].terminated).toBe(true);
    await slow.render(conv).catch(() => undefined);
    expect(workers).toHaveLength(2); // a fresh worker after a stopped one
  });
});
