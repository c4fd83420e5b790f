// `grpo-studio step --adapter` on the golden LoRA cases (tests/golden/lora, README "CLI contract"): the real
// binary writes R.json matching expected.json and, with --save-adapter, a PEFT folder matching
// expected_adapter/ under the README's rule (1e-6 + 1e-6·|expected| + U, U the first AdamW update's
// sensitivity to the gradient tolerance). In process: --ref-adapter (reference = frozen copy of the loaded
// adapter: KL 0 before the step) and bad adapters (one line, exit 2).
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { parseSafeTensors, toF32 } from '../../src/io/safetensors.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';
import { expectClose } from '../helpers/close.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';
import { expectSavedAdapter } from '../helpers/lora_saved.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';

const ROOT = resolve(__dirname, '..', '..');
const LORA = join(GOLDEN_ROOT, 'lora');
const CASES = ['llama-gqa-all-proj-r4', 'qwen2-qv-r2-rslora', 'qwen3-all-linear-r3', 'gpt2-cattn-cproj-r2'];
const run = promisify(execFile);
const tmpDir = () => mkdtempSync(join(tmpdir(), 'lora-cli-'));
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

type Expected = Pick<StepCliResult, 'per_token_logps' | 'ref_per_token_logps' | 'per_token_kl' | 'post_step_per_token_logps' | 'loss' | 'grad_norm'>;

describe.each(CASES)('grpo-studio step --adapter %s', (c) => {
  it('matches expected.json, and --save-adapter writes expected_adapter/ (README rule with U)', async () => {
    const dir = join(LORA, c);
    const out = join(tmpDir(), 'R.json');
    const saved = join(tmpDir(), 'adapter');
    const args = ['step', '--model', join(dir, 'model'), '--adapter', join(dir, 'adapter'), '--batch', join(dir, 'batch.json'), '--out', out, '--save-adapter', saved];
    await run(process.execPath, [join(ROOT, 'bin/grpo-studio.mjs'), ...args], { cwd: ROOT });
    const got = read<StepCliResult>(out);
    const want = read<Expected>(join(dir, 'expected.json'));
    const mask = read<{ completion_mask: number[][] }>(join(dir, 'batch.json')).completion_mask.flat();
    expect(got.reference).toBe('base without adapter'); // TRL with peft_config: the adapter disabled
    for (const k of ['per_token_logps', 'ref_per_token_logps', 'per_token_kl'] as const) {
      expect(got[k]!.map((r) => r.length), k).toEqual(want[k]!.map((r) => r.length));
      expectClose(got[k]!.flat(), want[k]!.flat(), { rtol: 1e-4, atol: 1e-5, mask, label: `${c} ${k}` });
    }
    expectClose(got.post_step_per_token_logps.flat(), want.post_step_per_token_logps.flat(), { rtol: 1e-3, atol: 0.002, mask, label: `${c} post_step_per_token_logps` });
    expectClose([got.loss], [want.loss], { rtol: 1e-4, atol: 1e-6, label: `${c} loss` });
    expectClose([got.grad_norm], [want.grad_norm], { rtol: 1e-4, atol: 1e-6, label: `${c} grad_norm` });

    const file = (f: string) => new Uint8Array(readFileSync(join(saved, f)));
    expectSavedAdapter(dir, { 'adapter_model.safetensors': file('adapter_model.safetensors'), 'adapter_config.json': file('adapter_config.json') }, c);
  });
});

describe('grpo-studio step --adapter, in process', () => {
  const c = 'qwen2-qv-r2-rslora';
  const dir = join(LORA, c);
  const base = ['step', '--model', join(dir, 'model'), '--batch', join(dir, 'batch.json')];

  it('--ref-adapter: the reference is the loaded adapter, frozen (KL 0 before the step), and the step still trains the adapter', async () => {
    const out = join(tmpDir(), 'R.json');
    expect(await main([...base, '--adapter', join(dir, 'adapter'), '--ref-adapter', '--out', out])).toBe(0);
    const got = read<StepCliResult>(out);
    const want = read<Expected>(join(dir, 'expected.json'));
    expect(got.reference).toBe('frozen copy of the loaded adapter');
    expect(got.ref_per_token_logps).toEqual(got.per_token_logps);
    expect(Math.max(...got.per_token_kl!.flat().map(Math.abs))).toBe(0);
    expectClose(got.per_token_logps.flat(), want.per_token_logps.flat(), { rtol: 1e-4, atol: 1e-5, label: 'policy log-probs unchanged' });
    expect(got.grad_norm).toBeGreaterThan(0);
  });

  const adapterWith = (edit: (cfg: Record<string, unknown>) => void): string => {
    const d = tmpDir();
    cpSync(join(dir, 'adapter'), d, { recursive: true });
    const cfg = read<Record<string, unknown>>(join(d, 'adapter_config.json'));
    edit(cfg);
    writeFileSync(join(d, 'adapter_config.json'), JSON.stringify(cfg));
    return d;
  };

  it.each([
    ['a module the file lacks', (c: Record<string, unknown>) => (c.target_modules = ['q_proj', 'v_proj', 'k_proj']), /missing "base_model\.model\.model\.layers\.0\.self_attn\.k_proj\.lora_A\.weight"/],
    ['a tensor no target selects', (c: Record<string, unknown>) => (c.target_modules = ['q_proj']), /v_proj\.lora_A\.weight" and 3 more are not LoRA tensors of a module target_modules \["q_proj"\] selects/],
    ['a rank that disagrees with the tensors', (c: Record<string, unknown>) => (c.r = 3), /has shape \[2,32\], expected \[3,32\] \(r = 3\)/],
    ['DoRA', (c: Record<string, unknown>) => (c.use_dora = true), /"use_dora" = true: DoRA is not supported/],
    ['dropout', (c: Record<string, unknown>) => (c.lora_dropout = 0.05), /"lora_dropout" = 0\.05: dropout/],
    ['another PEFT method', (c: Record<string, unknown>) => (c.peft_type = 'IA3'), /peft_type "IA3" is not supported/],
  ])('refuses %s: one line naming it, exit 2', async (_what, edit, message) => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main([...base, '--adapter', adapterWith(edit), '--out', join(tmpDir(), 'R.json')])).toBe(2);
      expect(err).toHaveBeenCalledTimes(1);
      expect(String(err.mock.calls[0][0])).toMatch(message);
    } finally {
      err.mockRestore();
    }
  });

  // Issue 21, plumbing: NaN / ±Inf in the adapter's weights reached the step (exit 3); now the adapter file and
  // tensor are named, as the base checkpoint's are (loader.ts firstNonFinite, shared).
  it.each([
    ['NaN', Number.NaN, /adapter_model\.safetensors: tensor "base_model\.model\.model\.layers\.0\.self_attn\.v_proj\.lora_B\.weight" holds NaN at flat index 5: an adapter with NaN or infinite weights cannot be used$/],
    ['-Infinity', -Infinity, /adapter_model\.safetensors: tensor "base_model\.model\.model\.layers\.0\.self_attn\.v_proj\.lora_B\.weight" holds -Infinity at flat index 5: an adapter/],
  ])('refuses an adapter with a %s weight: one line naming the file and tensor, exit 2', async (_what, value, message) => {
    const d = tmpDir();
    cpSync(join(dir, 'adapter'), d, { recursive: true });
    const path = join(d, 'adapter_model.safetensors');
    const bytes = new Uint8Array(readFileSync(path));
    const key = 'base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight';
    const st = parseSafeTensors(bytes, path);
    const data = Float32Array.from(toF32(st, key));
    data[5] = value;
    writeFileSync(path, editSafetensors(bytes, {}, { [key]: { dtype: 'F32', shape: st.tensors.get(key)!.shape, data: new Uint8Array(data.buffer) } }));
    await expectRefusal([...base, '--adapter', d, '--out', join(tmpDir(), 'R.json')], message);
  });

  it('--save-adapter without --adapter is a usage error', async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main([...base, '--save-adapter', tmpDir()])).toBe(2);
      expect(String(err.mock.calls[0][0])).toMatch(/--save-adapter needs --adapter DIR/);
    } finally {
      err.mockRestore();
    }
  });
});
