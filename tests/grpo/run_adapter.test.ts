// src/grpo/run_adapter.ts: whether a step on the adapter it is given (or on none) is the update of the run the batch's
// settings describe. A LoRA run (OpenRLHF ds.lora.rank > 0, verl lora_rank > 0 or lora_adapter_path) stepped
// full-parameter, or on an adapter of another r / lora_alpha / rslora / set of modules, is refused naming the run's
// setting and what to give; LoRA dropout (random in the trainer's train-mode forward) and a 4-bit base are refused;
// a created adapter and an adapter on a full-parameter run are accepted with a note. The modules are PEFT's: all-linear
// is every linear layer but the output layer (tiny-qwen2: 2 layers × 7).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAdapterNotes, type StepAdapter } from '../../src/grpo/run_adapter.ts';
import { parseConfig } from '../../src/model/config.ts';
import { isTargeted, linearModules } from '../../src/model/lora.ts';
import { GOLDEN } from '../helpers/golden.ts';

const model = parseConfig(JSON.parse(readFileSync(join(GOLDEN, 'tiny-qwen2', 'config.json'), 'utf8')));

/** An adapter of r / lora_alpha over the linear modules `target` selects (PEFT's matching). */
function adapter(r: number, lora_alpha: number, target: string | string[] = 'all-linear', use_rslora = false): StepAdapter {
  const names = new Set(linearModules(model).filter((m) => isTargeted(target, m.name)).map((m) => m.name));
  return { config: { r, lora_alpha, use_rslora }, has: (m) => names.has(m) };
}

const orl = (config: Record<string, unknown>) => ({ trainer: 'openrlhf' as const, config });
const verl = (config: Record<string, unknown>) => ({ trainer: 'verl' as const, config });

describe('runAdapterNotes: OpenRLHF', () => {
  const lora = { 'ds.lora.rank': 8, 'ds.lora.alpha': 16 };

  it('a LoRA run without an adapter is refused, naming ds.lora.rank and what to give', () => {
    expect(() => runAdapterNotes(orl(lora), null, model)).toThrow(/^config\.ds\.lora\.rank: 8: the run trained a LoRA adapter on a frozen base \(ds\.lora\.rank = 8, ds\.lora\.alpha = 16\), not every parameter; .*--adapter DIR.*\[OpenRLHF\/OpenRLHF openrlhf\/models\/actor\.py/);
  });

  it("the run's r, alpha and modules: accepted; created here: a note that lora_A is not the run's", () => {
    expect(runAdapterNotes(orl(lora), adapter(8, 16), model)).toEqual([]);
    expect(runAdapterNotes(orl({ ...lora, 'ds.lora.target_modules': ['q_proj', 'v_proj'] }), adapter(8, 16, ['q_proj', 'v_proj']), model)).toEqual([]);
    expect(runAdapterNotes(orl(lora), adapter(8, 16), model, { created: true })).toEqual([expect.stringMatching(/created here \(lora_A from the studio's seed/)]);
  });

  it.each([
    ['another r', adapter(4, 16), /^config\.ds\.lora\.rank: the run's adapter has ds\.lora\.rank = 8, ds\.lora\.alpha = 16 \(scaling 2, no rslora\), the step's adapter r = 4, lora_alpha = 16 \(scaling 4\)/],
    ['another lora_alpha', adapter(8, 8), /^config\.ds\.lora\.alpha: .*the step's adapter r = 8, lora_alpha = 8 \(scaling 1\)/],
    ['rslora', adapter(8, 16, 'all-linear', true), /^config\.ds\.lora\.alpha: .*use_rslora = true \(scaling 5\.65/],
    ['fewer modules', adapter(8, 16, ['q_proj']), /^config\.ds\.lora\.target_modules: "all-linear" adapts 14 module\(s\) of this model, the step's adapter 2: the run's, not the adapter's: model\.layers\.0\.self_attn\.k_proj/],
  ])('an adapter with %s than the run is refused naming both', (_what, a, message) => {
    expect(() => runAdapterNotes(orl(lora), a, model)).toThrow(message);
  });

  it("LoRA dropout is refused as the trainer's train-mode dropout is; a 4-bit base always", () => {
    expect(() => runAdapterNotes(orl({ ...lora, 'ds.lora.dropout': 0.1 }), adapter(8, 16), model)).toThrow(/^config\.ds\.lora\.dropout: 0\.1: OpenRLHF's actor computes its loss in train mode .*drops each adapted layer's input at random/);
    expect(() => runAdapterNotes(orl({ 'ds.load_in_4bit': true }), null, model)).toThrow(/^config\.ds\.load_in_4bit: true: the run's base weights were quantized to 4-bit/);
  });

  it('a full-parameter run: no adapter is its update; an adapter is accepted with a note', () => {
    expect(runAdapterNotes(orl({}), null, model)).toEqual([]);
    expect(runAdapterNotes(orl({ 'ds.lora.rank': 0 }), adapter(8, 16), model)).toEqual([expect.stringMatching(/^config\.ds\.lora\.rank = 0: the run trained every parameter/)]);
  });
});

describe('runAdapterNotes: verl and TRL', () => {
  it('verl lora_rank > 0 without an adapter, or another r, is refused naming lora_rank', () => {
    expect(() => runAdapterNotes(verl({ lora_rank: 16, lora_alpha: 32 }), null, model)).toThrow(/^config\.lora_rank: 16: the run trained a LoRA adapter .*\[volcengine\/verl verl\/workers\/fsdp_workers\.py/);
    expect(() => runAdapterNotes(verl({ lora_rank: 16, lora_alpha: 32 }), adapter(8, 32), model)).toThrow(/^config\.lora_rank: the run's adapter has lora_rank = 16, lora_alpha = 32/);
    expect(runAdapterNotes(verl({ lora_rank: 16, lora_alpha: 32 }), adapter(16, 32), model)).toEqual([]);
  });

  it("verl's exclude_modules leave modules out; a lora_adapter_path run needs an adapter", () => {
    const run = verl({ lora_rank: 8, lora_alpha: 16, exclude_modules: ['o_proj'] });
    expect(() => runAdapterNotes(run, adapter(8, 16), model)).toThrow(/^config\.target_modules: "all-linear" \(exclude_modules \["o_proj"\]\) adapts 12 module\(s\) of this model, the step's adapter 14: the adapter's, not the run's: model\.layers\.0\.self_attn\.o_proj/);
    expect(runAdapterNotes(run, adapter(8, 16, ['q_proj', 'k_proj', 'v_proj', 'gate_proj', 'up_proj', 'down_proj']), model)).toEqual([]);
    expect(() => runAdapterNotes(verl({ lora_adapter_path: '/ckpt/lora_adapter' }), null, model)).toThrow(/^config\.lora_adapter_path: "\/ckpt\/lora_adapter": the run trained a LoRA adapter/);
  });

  it('TRL holds no adapter setting: any adapter, or none', () => {
    expect(runAdapterNotes({ trainer: 'trl', config: {} }, null, model)).toEqual([]);
    expect(runAdapterNotes({ trainer: 'trl', config: {} }, adapter(4, 8), model)).toEqual([]);
  });
});
