// The trainer's settings in the studio worker (src/worker/trainer_view.ts through src/worker/runner.ts): the loss
// stage's trainer view on a real update of a tiny random Qwen2 — TRL at the studio's settings gives the
// studio loss; a tool batch's tool tokens leave the effective mask with factor "tool"; a vLLM batch in
// token_mask mode drops exactly the tokens whose exp(logp − sampling) leaves [clip_min, clip_max], with
// factor "importance sampling"; verl's settings errors are named and the backward refuses with them; another
// trainer's or a non-default TRL setting's loss is the step's own (its gradient is the trainer's:
// tests/grpo/step_trainer_gradient.test.ts). Expected values are recomputed here from the update's own arrays.
import { describe, expect, it } from 'vitest';
import { createStepRunner } from '../../src/worker/runner.ts';
import { pageSettingsWith, smallSettings } from '../helpers/small_settings.ts';
import { STAGES, type StagePayloads, type StepSettings, type StepStart } from '../../src/bridge/protocol.ts';
import { settingOf } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { MASK_FACTORS } from '../../src/grpo/trainers/effective_mask.ts';
import { TRL_LOSS_TYPES } from '../../src/kernels/types.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { droppedFolder } from '../helpers/dropped_folder.ts';
import { testGpu } from '../helpers/gpu.ts';

const factor = (name: (typeof MASK_FACTORS)[number]) => MASK_FACTORS.indexOf(name);

describe('trainer view of the step', () => {
  it('follows the preset on the same log-probs, with its masks, and the step takes its loss', async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
    const settings = smallSettings(3, 5);
    const lossType = settingOf(settings.settings, 'config', 'loss_type').value as string;

    /** Runs stages up to and including `last`; returns their payloads. */
    const runTo = async (last: (typeof STAGES)[number], s: StepSettings, start?: StepStart) => {
      await runner.reset();
      const out: Partial<StagePayloads> = {};
      for (const stage of STAGES.slice(0, STAGES.indexOf(last) + 1)) (out as Record<string, unknown>)[stage] = (await runner.runStage(stage, s, stage === 'render' ? start : undefined)).data;
      return out as StagePayloads;
    };

    // TRL at the studio's own settings: the trainer loss is the studio loss, the table's own column too.
    const first = await runTo('loss', settings);
    const view = first.loss.trainer!;
    expect(view.error).toBeNull();
    expect(view.trainer).toBe('trl');
    expect(view.config.loss_type).toBe(lossType);
    expect(first.loss.objective, 'TRL at the studio settings: the studio loss forms the step').toBeNull();
    expect(Math.abs(view.terms!.loss - first.loss.loss)).toBeLessThanOrEqual(1e-5 * Math.abs(first.loss.loss) + 1e-7);
    expect(view.table.map((c) => c.label)).toEqual([...TRL_LOSS_TYPES]);
    expect(view.table.find((c) => c.label === lossType)!.loss).toBeCloseTo(view.terms!.loss, 6);
    const { B, C } = first.assemble.padded;
    const M = first.assemble.padded.completion_mask;
    for (let i = 0; i < B * C; i++) expect(view.terms!.effective_loss_mask[i]).toBe(M[i]);
    // A what-if under another TRL loss type follows that objective on the same log-probs: the loss table's value.
    const w = await runner.whatIf(pageSettingsWith({ config: { loss_type: 'cispo' } }, 'trl', settings.sampling));
    expect(w.settings.config.loss_type).toBe('cispo');
    expect(w.trainer.current!.loss).toBe(view.terms!.loss);
    expect(w.trainer.whatif!.loss).toBeCloseTo(view.table.find((c) => c.label === 'cispo')!.loss!, 6);
    expect(w.trainer.whatif!.loss).not.toBeCloseTo(view.terms!.loss, 6);
    // Advantage settings the studio does not recompute (GDPO's normalize_then_sum) keep the update's, and say so.
    const gdpo = await runner.whatIf(pageSettingsWith({ config: { multi_objective_aggregation: 'normalize_then_sum' } }, 'trl', settings.sampling));
    expect(gdpo.notes.join('\n')).toMatch(/^advantages are the update's: TRL multi_objective_aggregation = "normalize_then_sum"/m);
    expect(Array.from(gdpo.whatif.advantages)).toEqual(Array.from(gdpo.current.advantages));
    // TRL's per-token gradient at the studio's settings is the studio loss's own ∂loss/∂logp (other kernels).
    const studioDlogp = w.current.terms.dlogp;
    const gmax = studioDlogp.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    expect(gmax).toBeGreaterThan(0);
    for (let i = 0; i < B * C; i++) if (M[i]) expect(Math.abs(view.terms!.dlogp![i] - studioDlogp[i]), `dlogp[${i}]`).toBeLessThanOrEqual(1e-5 * gmax);
    expect(await runner.runStage('backward', settings)).toMatchObject({ id: 'backward' });

    // Another trainer: its loss is shown and is the step's (or its settings error, naming the field, and the backward refuses).
    const verl: StepSettings = { ...settings, settings: pageSettingsWith({}, 'verl', settings.sampling) };
    const v1 = await runTo('loss', verl);
    expect(v1.loss.trainer!.error).toMatch(/ppo_micro_batch_size_per_gpu/);
    expect(v1.loss.objective_error).toBe(v1.loss.trainer!.error);
    expect(v1.loss.loss).toBeNaN();
    await expect(runner.runStage('backward', verl)).rejects.toThrow(/ppo_micro_batch_size_per_gpu/);
    verl.settings = pageSettingsWith({ config: { ppo_mini_batch_size: B, ppo_micro_batch_size_per_gpu: B, rollout_is: null } }, 'verl', settings.sampling);
    const v2 = await runTo('loss', verl);
    // On-policy vanilla PPO (ratio 1), token-mean, scale 1, no rollout IS weights: Σ −A·M / Σ M.
    let num = 0;
    let den = 0;
    for (let i = 0; i < B * C; i++) [num, den] = [num - v2.advantages.advantages[Math.floor(i / C)] * M[i], den + M[i]];
    expect(v2.loss.trainer!.error).toBeNull();
    expect(v2.loss.trainer!.terms!.loss).toBeCloseTo(num / den, 6);
    expect(v2.loss.trainer!.table).toHaveLength(32);
    expect(v2.loss.objective).toMatchObject({ trainer: 'verl' });
    expect(v2.loss.loss).toBeCloseTo(num / den, 6);
    // The what-if's self-check compares the studio loss with the stage's studio aggregation, not the trainer's loss.
    const wv = await runner.whatIf(verl.settings);
    const verlStudioType = stepConfigOf(verl.settings, C).loss.loss_type;
    expect(wv.check).toBeLessThanOrEqual(1e-5 * Math.abs(v2.loss.studio_losses[verlStudioType]) + 1e-7);
    expect(wv.trainer.current!.loss).toBe(v2.loss.trainer!.terms!.loss);
    expect(wv.trainer.whatif!.loss).toBeCloseTo(v2.loss.trainer!.terms!.loss, 6);
    expect(await runner.runStage('backward', verl)).toMatchObject({ id: 'backward' });

    // A TRL setting the studio loss does not apply: the step follows TRL's objective with it.
    const cispo: StepSettings = { ...settings, settings: pageSettingsWith({ config: { loss_type: 'cispo' } }, 'trl', settings.sampling) };
    const c1 = await runTo('loss', cispo);
    expect(c1.loss.trainer!.config.loss_type).toBe('cispo');
    expect(c1.loss.trainer!.terms!.loss).toBeCloseTo(c1.loss.trainer!.table.find((c) => c.label === 'cispo')!.loss!, 6);
    expect(c1.loss.loss).toBeCloseTo(c1.loss.trainer!.terms!.loss, 6);
    expect(c1.loss.objective).toMatchObject({ trainer: 'trl', config: { loss_type: 'cispo' } });
    expect(await runner.runStage('backward', cispo)).toMatchObject({ id: 'backward' });

    // mask_truncated_completions: rows whose last token is neither EOS nor pad leave the loss, named "truncation";
    // the others are untouched.
    const trunc: StepSettings = { ...settings, settings: pageSettingsWith({ config: { mask_truncated_completions: true } }, 'trl', settings.sampling) };
    const tr = (await runTo('loss', trunc)).loss.trainer!.terms!;
    const ends = [...first.assemble.batch.eos_token_ids, first.assemble.batch.pad_token_id];
    const truncatedRows = first.assemble.batch.completion_ids.map((r) => r.length === 0 || !ends.includes(r[r.length - 1]));
    expect(truncatedRows.some(Boolean) && !truncatedRows.every(Boolean), 'the random model truncates some rows, not all').toBe(true);
    for (let i = 0; i < B * C; i++) expect(MASK_FACTORS[tr.removed_by[i]], `token ${i}`).toBe(!M[i] ? 'completion' : truncatedRows[Math.floor(i / C)] ? 'truncation' : 'kept');
    expect(await runner.runStage('backward', trunc)).toMatchObject({ id: 'backward' });

    // A tool batch and a vLLM-corrected batch, imported: the same completions with a tool span and sampling log-probs.
    const batch: GrpoBatch = structuredClone(first.assemble.batch);
    const logp = first.policy_forward.per_token_logps;
    batch.tool_mask = batch.completion_ids.map((r, b) => r.map((_, t) => (b === 1 && t >= 1 && t <= 2 ? 0 : 1)));
    // Sampling log-probs 2 above the trainer's on every third token: exp(logp − sampling) = e^−2 < 0.5 there.
    const off = (t: number) => (t % 3 === 0 ? 2 : 0);
    batch.sampling_per_token_logps = batch.completion_ids.map((r, b) => r.map((_, t) => logp[b * C + t] + off(t)));
    batch.old_per_token_logps = undefined;
    const vllm: StepSettings = { ...settings, settings: pageSettingsWith({ config: { use_vllm: true, vllm_importance_sampling_mode: 'token_mask', vllm_importance_sampling_clip_min: 0.5, vllm_importance_sampling_clip_max: 3 } }, 'trl', settings.sampling) };
    const imp = await runTo('loss', vllm, { kind: 'batch', batch });
    const t = imp.loss.trainer!.terms!;
    for (let b = 0; b < B; b++) {
      for (let p = 0; p < C; p++) {
        const i = b * C + p;
        const want = !M[i] ? 'completion' : batch.tool_mask[b][p] === 0 ? 'tool' : off(p) ? 'importance sampling' : 'kept';
        expect(MASK_FACTORS[t.removed_by[i]], `sample ${b} position ${p}`).toBe(want);
        expect(t.effective_loss_mask[i]).toBe(want === 'kept' ? 1 : 0);
        if (want === 'importance sampling') expect(t.importance_sampling_ratio![i]).toBe(0);
      }
    }
    expect(t.removed_by.some((f) => f === factor('tool'))).toBe(true);
    expect(t.removed_by.some((f) => f === factor('importance sampling'))).toBe(true);
    expect(imp.loss.loss).toBeCloseTo(t.loss, 6);
    expect(await runner.runStage('backward', vllm)).toMatchObject({ id: 'backward' });
    runner.dispose();
  }, 300_000);
});
