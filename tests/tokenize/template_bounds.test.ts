// Issue 13, bounded work: a chat template is code from the checkpoint. Rendered in a bounded worker it
// gives exactly the in-thread text; a template with a huge loop or a growing string stops at the deadline
// or the heap limit with a TemplateError, and `grpo-studio doctor --tokenizer` exits 2 with one line
// instead of exhausting the heap after a minute.
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { boundedRenderer, TemplateError } from '../../src/tokenize/bounded_node.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';

const ROOT = resolve(__dirname, '..', '..');
const LOOP = '{% for i in range(1000000000) %}{{ i }}{% endfor %}';
const GROW = "{% set ns = namespace(s=[]) %}{% for i in range(100000000) %}{% set ns.s = ns.s + ['xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'] %}{% endfor %}{{ ns.s | length }}";

describe('bounded chat-template rendering', () => {
  it('renders exactly what the tokenizer renders in-thread', async () => {
    const tok = await loadTokenizerDir(QWEN3_DIR);
    const r = boundedRenderer(tok);
    try {
      const conv = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'What is 2+2? ü 中' }];
      for (const add_generation_prompt of [true, false]) {
        expect(await r.render(conv, { add_generation_prompt, template_kwargs: { enable_thinking: false } })).toBe(tok.applyChatTemplate(conv, { add_generation_prompt, template_kwargs: { enable_thinking: false } }));
      }
    } finally {
      await r.close();
    }
  }, 30_000);

  it('a huge loop stops at the deadline; a growing list stops at the deadline or the heap limit', async () => {
    const tok = await loadTokenizerDir(QWEN3_DIR);
    for (const chat_template of [LOOP, GROW]) {
      const r = boundedRenderer(tok, { timeoutMs: 1500, maxHeapMb: 64 });
      const err = await r.render([{ role: 'user', content: 'x' }], { chat_template }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TemplateError);
      expect((err as TemplateError).kind).toBe('bounds');
      expect((err as Error).message).toMatch(/did not finish within 1500 ms|more than 64 MB/);
      await r.close();
    }
  }, 60_000);

  it('grpo-studio doctor --tokenizer with a looping template: exit 2, one line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tok-loop-'));
    cpSync(QWEN3_DIR, dir, { recursive: true });
    const cfgPath = join(dir, 'tokenizer_config.json');
    writeFileSync(cfgPath, JSON.stringify({ ...JSON.parse(readFileSync(cfgPath, 'utf8')), chat_template: LOOP }));
    // A batch of Qwen3 ids: the tokenizer fits it, so the Doctor would render with its template.
    const err = await promisify(execFile)(process.execPath, [join(ROOT, 'bin/grpo-studio.mjs'), 'doctor', join(ROOT, 'tests/fixtures/batches/retokenization-mismatch.json'), '--tokenizer', dir], { cwd: ROOT, env: { ...process.env } }).catch((e: { code: number; stderr: string }) => e);
    expect((err as { code: number }).code).toBe(2);
    expect((err as { stderr: string }).stderr.trim()).toMatch(/^grpo-studio doctor: --tokenizer \S+: rendering a one-message probe: the chat template (did not finish within 5000 ms|needed more than 256 MB of memory)$/);
  }, 60_000);

  // Issue 21, plumbing: `report --tokenizer` ran the same template in-thread (V8 fatal error); it now takes
  // the Doctor's bounded preflight (boundTemplate in src/cli/doctor.ts).
  it('grpo-studio report --tokenizer with a looping template: exit 2, one line, nothing written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tok-loop-'));
    cpSync(QWEN3_DIR, dir, { recursive: true });
    const cfgPath = join(dir, 'tokenizer_config.json');
    writeFileSync(cfgPath, JSON.stringify({ ...JSON.parse(readFileSync(cfgPath, 'utf8')), chat_template: LOOP }));
    const out = join(dir, 'report.html');
    const err = await promisify(execFile)(process.execPath, [join(ROOT, 'bin/grpo-studio.mjs'), 'report', join(ROOT, 'tests/fixtures/batches/retokenization-mismatch.json'), '--tokenizer', dir, '--out', out], { cwd: ROOT, env: { ...process.env } }).catch((e: { code: number; stderr: string }) => e);
    expect((err as { code: number }).code).toBe(2);
    expect((err as { stderr: string }).stderr.trim()).toMatch(/^grpo-studio report: --tokenizer \S+: rendering a one-message probe: the chat template (did not finish within 5000 ms|needed more than 256 MB of memory)$/);
    expect(existsSync(out)).toBe(false);
  }, 60_000);
});
