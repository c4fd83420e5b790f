// A saved PEFT adapter folder against a golden LoRA case's expected_adapter/ under the README's rule
// (tests/golden/README.md "LoRA adapters"): the input's keys, shapes and F32; adapter_config.json's fields
// unchanged; each element within 1e-6 + 1e-6·|expected| + U, U how far the first AdamW update moves when
// its clipped gradient moves by the gradient tolerance. Shared by the CLI and the page's runner tests.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { parseSafeTensors, shapeOf, toF64 } from '../../src/io/safetensors.ts';

const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;
const st = (bytes: Uint8Array) => parseSafeTensors(bytes);

/** `files`: the saved folder's adapter_model.safetensors and adapter_config.json bytes; `dir`: the golden case. */
export function expectSavedAdapter(dir: string, files: { 'adapter_model.safetensors': Uint8Array; 'adapter_config.json': Uint8Array }, label: string): void {
  const input = st(readFileSync(join(dir, 'adapter', 'adapter_model.safetensors')));
  const out = st(files['adapter_model.safetensors']);
  expect([...out.tensors.keys()].sort()).toEqual([...input.tensors.keys()].sort());
  const cfgIn = read<Record<string, unknown>>(join(dir, 'adapter', 'adapter_config.json'));
  const cfgOut = JSON.parse(new TextDecoder().decode(files['adapter_config.json'])) as Record<string, unknown>;
  for (const f of ['peft_type', 'r', 'lora_alpha', 'use_rslora', 'target_modules', 'fan_in_fan_out']) expect(cfgOut[f], f).toEqual(cfgIn[f]);
  const golden = st(readFileSync(join(dir, 'golden.safetensors')));
  const expected = st(readFileSync(join(dir, 'expected_adapter', 'adapter_model.safetensors')));
  const coef = toF64(golden, 'grad_clip_coef')[0];
  const { lr, eps } = read<{ config: { optimizer: { lr: number; eps: number } } }>(join(dir, 'batch.json')).config.optimizer;
  const update = (g: number) => (lr * g) / (Math.abs(g) + eps); // AdamW's first step: m̂ = g, v̂ = g²
  for (const [k, info] of out.tensors) {
    expect(info.dtype, k).toBe('F32');
    expect(info.shape, k).toEqual(shapeOf(input, k));
    const g = toF64(golden, `grad.${k}`).map((x) => x * coef);
    const gmax = g.reduce((s, x) => Math.max(s, Math.abs(x)), 0);
    const exp = toF64(expected, k);
    const a = toF64(out, k);
    for (let i = 0; i < exp.length; i++) {
      const tolG = 1e-4 * Math.abs(g[i]) + 1e-5 * gmax;
      const U = Math.max(Math.abs(update(g[i] + tolG) - update(g[i])), Math.abs(update(g[i] - tolG) - update(g[i])));
      const tol = 1e-6 + 1e-6 * Math.abs(exp[i]) + U;
      if (Math.abs(a[i] - exp[i]) > tol) expect.fail(`${label} ${k}[${i}]: saved ${a[i]}, expected ${exp[i]} (tolerance ${tol})`);
    }
  }
}
