// verl's and OpenRLHF's settings tables and the objectives' refusals: an unknown or invalid config field, a
// setting the trainer itself rejects or cannot reproduce, and a missing input are SettingsErrors naming the
// field — never a silently different number. The docs list every setting of both tables.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readTrainerCase, TRAINER_GOLDEN } from '../helpers/trainer_case.ts';
import { twinBackend } from '../helpers/ppo_twin.ts';
import { verlObjective } from '../../src/grpo/trainers/verl.ts';
import { openrlhfObjective } from '../../src/grpo/trainers/openrlhf.ts';
import { resolveSettings } from '../../src/grpo/settings/resolve.ts';
import { VERL_RUN, VERL_SETTINGS } from '../../src/grpo/settings/verl.ts';
import { OPENRLHF_RUN, OPENRLHF_SETTINGS } from '../../src/grpo/settings/openrlhf.ts';
import { SettingsError } from '../../src/grpo/settings/types.ts';
import type { TrainerLossCase } from '../../src/grpo/trainers/types.ts';

const verlCase = (n: string) => readTrainerCase(path.join(TRAINER_GOLDEN, 'verl', `case_${n}.safetensors`)).c;
const orlCase = (n: string) => readTrainerCase(path.join(TRAINER_GOLDEN, 'openrlhf', `case_${n}.safetensors`)).c;
const withConfig = (c: TrainerLossCase, patch: Record<string, unknown>): TrainerLossCase => ({ ...c, config: { ...c.config, ...patch } });

async function rejects(p: Promise<unknown>, field: RegExp): Promise<void> {
  const e = await p.then(() => null, (x: unknown) => x);
  expect(e, 'expected a SettingsError').toBeInstanceOf(SettingsError);
  expect((e as Error).message).toMatch(field);
}

describe('settings tables', () => {
  it('fill defaults and check types, ranges and allowed values, naming the field', () => {
    const v = resolveSettings(VERL_SETTINGS, { loss_mode: 'gspo' }, 'config');
    expect(v.loss_mode).toBe('gspo');
    expect(v.clip_ratio_c).toBe(3);
    expect(v.rollout_is).toBe('sequence');
    expect(() => resolveSettings(VERL_SETTINGS, { clip_ratio_c: 1 }, 'config')).toThrow(/config\.clip_ratio_c: 1 is out of range/);
    expect(() => resolveSettings(VERL_SETTINGS, { loss_agg_mode: 'mean' }, 'config')).toThrow(/config\.loss_agg_mode: expected one of/);
    expect(() => resolveSettings(VERL_SETTINGS, { clip_ratio: '0.2' }, 'config')).toThrow(/config\.clip_ratio: expected a finite number/);
    expect(() => resolveSettings(VERL_SETTINGS, { clip_ratio_hi: 0.3 }, 'config')).toThrow(/config\.clip_ratio_hi: not a verl setting/);
    expect(() => resolveSettings(OPENRLHF_RUN, { num_processes: 1.5 }, 'run')).toThrow(/run\.num_processes: expected an integer/);
    expect(() => resolveSettings(OPENRLHF_SETTINGS, { 'actor.dual_clip': null }, 'config')).not.toThrow();
  });

  it('are listed, every field, in docs/trainers', () => {
    for (const [doc, tables] of [['verl.md', [VERL_SETTINGS, VERL_RUN]], ['openrlhf.md', [OPENRLHF_SETTINGS, OPENRLHF_RUN]]] as const) {
      const text = readFileSync(path.resolve(__dirname, '..', '..', 'docs', 'trainers', doc), 'utf8');
      for (const t of tables) for (const s of t) expect(text, `${doc} lists ${s.name}`).toContain(`\`${s.name}\``);
    }
  });
});

describe('verl objective refusals', () => {
  it('rejects the "+" KL types verl itself raises on', async () => {
    await rejects(verlObjective(twinBackend(verlCase('00')), withConfig(verlCase('00'), { kl_loss_type: 'k3+' }), { backward: false }), /config\.kl_loss_type/);
  });
  it('refuses a clip_cov draw verl makes with torch.randperm', async () => {
    // case 08 has 5 candidates for 6 slots; a ratio of 0.05 leaves 1 slot for them.
    await rejects(verlObjective(twinBackend(verlCase('08')), withConfig(verlCase('08'), { clip_cov_ratio: 0.05 }), { backward: false }), /config\.clip_cov_ratio: 5 clip_cov candidates for 1 slots/);
  });
  it('needs the inputs its settings read', async () => {
    const c = verlCase('00');
    await rejects(verlObjective(twinBackend(c), { ...c, ref_per_token_logps: null }, { backward: false }), /ref_per_token_logps: required \(use_kl_loss\)/);
    await rejects(verlObjective(twinBackend(c), withConfig(c, { bypass_mode: true }), { backward: false }), /sampling_per_token_logps .*bypass_mode/);
  });
  it('rejects an invalid rejection-sampling option naming it', async () => {
    const c = verlCase('05');
    await rejects(verlObjective(twinBackend(c), withConfig(c, { rollout_rs: 'token_k4' }), { backward: false }), /config\.rollout_rs: unknown option token_k4/);
    await rejects(verlObjective(twinBackend(c), withConfig(c, { rollout_rs_threshold: '0.6_1.6,2' }), { backward: false }), /config\.rollout_rs_threshold/);
  });
});

describe('OpenRLHF objective refusals', () => {
  it('refuses entropy_coef ≠ 0 with temperature ≠ 1 (OpenRLHF fails in backward)', async () => {
    const c = withConfig(orlCase('02'), { 'rollout.temperature': 0.9 });
    await rejects(openrlhfObjective(twinBackend(c), c, { backward: false }), /config\.actor\.entropy_coef/);
  });
  it('checks eps_clip_low_high and loss_batch_info', async () => {
    const c = orlCase('00');
    await rejects(openrlhfObjective(twinBackend(c), withConfig(c, { 'actor.eps_clip_low_high': [0.2] }), { backward: false }), /config\.actor\.eps_clip_low_high: expected \[low, high\]/);
    await rejects(openrlhfObjective(twinBackend(c), { ...c, run: { ...c.run, loss_batch_info: { dp_size: 1, batch_num_tokens: 0, global_batch_size: 4 } } }, { backward: false }), /run\.loss_batch_info\.batch_num_tokens/);
  });
  it('derives loss_batch_info from the window as _optimizer_step_loss_norm does', async () => {
    // case 01: 2 ranks × 2 accumulation steps; its stored loss_batch_info is (20 + 58) / 2 tokens, (4 + 12) / 2 samples.
    const c = orlCase('01');
    const given = await openrlhfObjective(twinBackend(c), c, { backward: false });
    const { loss_batch_info: _, ...window } = c.run;
    const derived = await openrlhfObjective(twinBackend(c), { ...c, run: window }, { backward: false });
    expect(derived.loss).toBeCloseTo(given.loss, 12);
    expect(c.run.loss_batch_info).toEqual({ batch_num_tokens: 39, dp_size: 2, global_batch_size: 8 });
  });
});
