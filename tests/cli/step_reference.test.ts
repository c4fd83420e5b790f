// `grpo-studio step` on a batch that carries its trainer's own reference log-probs (TRL's ref_per_token_logps,
// verl's ref_log_prob, OpenRLHF's base_action_log_probs): the loss reads them, as it reads old_per_token_logps,
// whatever reference is loaded. With the golden reference's log-probs (PyTorch float64, expected.json) written
// into the batch, the step WITHOUT --ref-model gives the golden loss, KL and gradient norm (which without them
// needs --ref-model: a frozen copy of the policy would be its own reference, KL 0). A reference model loaded too
// is only scored against them (`reference_check`). An OpenRLHF dump's KL term is its own setting (algo.kl.use_loss),
// never TRL's β: the step reads its base_action_log_probs whether or not a `beta` key or a reference model is there.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.ts';
import type { StepCliResult } from '../../src/cli/step.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN } from '../helpers/golden.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';
import { editSafetensors } from '../helpers/safetensors_edit.ts';

const dir = join(GOLDEN, 'tiny-qwen2');
const read = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;
const want = read<{ ref_per_token_logps: number[][]; per_token_kl: number[][]; loss: number; grad_norm: number }>(join(dir, 'expected.json'));
const batch = read<{ completion_mask: number[][]; config: Record<string, unknown> }>(join(dir, 'batch.json'));
const mask = batch.completion_mask.flat();

/** The golden batch with `ref` as its own reference log-probs (none: null) and `extra` over its fields; its path. */
function write(ref: number[][] | null, extra: Record<string, unknown> = {}): string {
  const tmp = mkdtempSync(join(tmpdir(), 'step-ref-'));
  writeFileSync(join(tmp, 'batch.json'), JSON.stringify({ ...batch, ...(ref ? { ref_per_token_logps: ref } : {}), ...extra }));
  return join(tmp, 'batch.json');
}

async function step(ref: number[][], args: string[] = []): Promise<StepCliResult> {
  const path = write(ref);
  const tmp = join(path, '..');
  expect(await main(['step', '--model', dir, '--batch', path, '--out', join(tmp, 'r.json'), ...args])).toBe(0);
  return read<StepCliResult>(join(tmp, 'r.json'));
}

describe("the batch's ref_per_token_logps are the reference", () => {
  it('without --ref-model: the golden KL, loss and grad norm of the golden reference (not the frozen copy\'s KL 0)', async () => {
    expect(batch.config.beta).toBeGreaterThan(0);
    const got = await step(want.ref_per_token_logps);
    expect(got.reference).toBe("the batch's ref_per_token_logps");
    expect(got.reference_check).toBeNull();
    expect(got.ref_per_token_logps).toEqual(want.ref_per_token_logps.map((r) => r.map(Math.fround)));
    expectClose(got.per_token_kl!.flat(), want.per_token_kl.flat(), { rtol: 1e-4, atol: 1e-5, mask, label: 'per_token_kl' });
    expectClose([got.loss, got.grad_norm], [want.loss, want.grad_norm], { rtol: 1e-4, atol: 1e-6, label: 'loss, grad_norm' });
  });

  it('a reference model loaded too is scored against them: the golden reference agrees, a shifted copy is 0.25 off', async () => {
    const same = await step(want.ref_per_token_logps, ['--ref-model', join(dir, 'ref')]);
    expect(same.reference_check).toMatchObject({ model: 'model ref', tokens: mask.filter((m) => m === 1).length });
    expect(same.reference_check!.max_abs_diff).toBeLessThan(1e-4);
    const shifted = await step(want.ref_per_token_logps.map((r) => r.map((x) => x - 0.25)), ['--ref-model', join(dir, 'ref')]);
    expect(Math.abs(shifted.reference_check!.max_abs_diff - 0.25)).toBeLessThan(1e-4);
    expect(shifted.reference).toMatch(/^the batch's ref_per_token_logps \(model ref: max \|Δ\| 0\.25\d* over \d+ loss tokens\)$/);
    // The loss reads the batch's (shifted) values, not the model's.
    expectClose(shifted.ref_per_token_logps!.flat(), want.ref_per_token_logps.flat().map((x) => x - 0.25), { rtol: 0, atol: 1e-6, label: 'ref logps' });
  });
});

describe("TRL's sync_ref_model past ref_model_sync_steps", () => {
  // TRL's reference has been mixed with the policy by global_step 12: the model as loaded is not it, the batch's own are.
  const sync = { config: { ...batch.config, sync_ref_model: true, ref_model_sync_steps: 10 }, run: { global_step: 12 } };
  it("refused without the batch's own reference log-probs (one line naming the setting), stepped with them", async () => {
    await expectRefusal(['step', '--model', dir, '--batch', write(null, sync), '--ref-model', join(dir, 'ref')], /: config\.sync_ref_model: with global_step 12 ≥ ref_model_sync_steps 10: TRL's reference has been mixed with the policy 1 time\(s\)/);
    const path = write(want.ref_per_token_logps, sync);
    const out = join(path, '..', 'r.json');
    expect(await main(['step', '--model', dir, '--batch', path, '--out', out])).toBe(0);
    expect(read<StepCliResult>(out).reference).toBe("the batch's ref_per_token_logps");
  });
});

describe("an OpenRLHF dump's KL term (algo.kl.use_loss), not TRL's β, decides the reference", () => {
  const model = join(GOLDEN, 'tiny-llama');
  const fixture = new Uint8Array(readFileSync('tests/fixtures/formats/openrlhf-experience.safetensors'));
  /** The fixture with `config` in its metadata, stepped (with `args`): the result. */
  async function stepWith(config: Record<string, unknown>, args: string[] = []): Promise<StepCliResult> {
    const tmp = mkdtempSync(join(tmpdir(), 'step-okl-'));
    writeFileSync(join(tmp, 'b.safetensors'), editSafetensors(fixture, { config: JSON.stringify(config) }));
    expect(await main(['step', '--model', model, '--batch', join(tmp, 'b.safetensors'), '--out', join(tmp, 'r.json'), ...args])).toBe(0);
    return read<StepCliResult>(join(tmp, 'r.json'));
  }
  it("reads the dump's base_action_log_probs with or without a `beta` key (OpenRLHF reads none) or a reference model", async () => {
    const kl = { 'algo.kl.use_loss': true, 'algo.kl.init_coef': 0.05 };
    const runs = [await stepWith(kl), await stepWith({ ...kl, beta: 0.05 }), await stepWith(kl, ['--ref-model', model])];
    for (const r of runs) expect(r.reference).toMatch(/^the batch's ref_per_token_logps/);
    for (const r of runs.slice(1)) expectClose([r.loss, r.grad_norm], [runs[0].loss, runs[0].grad_norm], { rtol: 1e-6, atol: 0, label: 'loss, grad_norm' });
    // The KL term moves the loss: the same dump without it is another number.
    const off = await stepWith({ 'algo.kl.use_loss': false });
    expect(Math.abs(off.loss - runs[0].loss)).toBeGreaterThan(1e-4);
    // Without it, a stray TRL `beta` (no row of OpenRLHF's: listed as not read) loads no reference and moves nothing.
    const stray = await stepWith({ 'algo.kl.use_loss': false, beta: 0.3 });
    expect(stray.reference).toEqual(off.reference);
    expect(off.reference).toBeNull();
    expect([stray.loss, stray.grad_norm]).toEqual([off.loss, off.grad_norm]);
  });
});
