// The studio worker's StepRunner (src/worker/runner.ts, the protocol of src/bridge/protocol.ts) in Node: a
// dropped folder (File objects) with a random tiny Qwen2 and the default task's tokenizer, every stage in
// order with the studio's default settings, payload shapes, stage order enforcement, and reset() undoing
// the step (a second run scores exactly as the first), and the same update started from the assembled
// batch as if imported (render / sample / reward skipped, identical log-probs). Successive updates
// continue from the stepped weights against the frozen copy of the loaded ones (issue 15). Gradient
// checkpointing changes the plan and the backward's work, never a number.
import { describe, expect, it } from 'vitest';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { createStepRunner } from '../../src/worker/runner.ts';
import { smallSettings } from '../helpers/small_settings.ts';
import { settingOf } from '../../src/grpo/settings/effective.ts';
import { STAGES, type StagePayloads, type StepSettings, type StepStart } from '../../src/bridge/protocol.ts';
import { droppedFolder } from '../helpers/dropped_folder.ts';
import { testGpu } from '../helpers/gpu.ts';
import { RULES } from '../../src/doctor/rules.ts';

/** The Doctor's rules that read the tokenizer, from the registry. */
const TOKENIZER_RULES = RULES.filter((r) => r.needsTokenizer).map((r) => r.id);

/**
 * TRL's loss aggregations (huggingface/trl trl/trainer/grpo_trainer.py _compute_loss) over a (B, C) per-token
 * loss: the loss, each token's weight ∂loss/∂L, and the same aggregation of |L| (the rounding scale).
 */
function trlAggregate(type: string, L: Float32Array, M: Int32Array, B: number, C: number, maxLen: number): { loss: number; weight: Float64Array; scale: number } {
  const n = Array.from({ length: B }, (_, b) => M.subarray(b * C, (b + 1) * C).reduce((s, m) => s + m, 0));
  const N = n.reduce((s, x) => s + x, 0);
  const rowWeight = (b: number): number => {
    switch (type) {
      case 'grpo':
        return 1 / (B * Math.max(1, n[b]));
      case 'bnpo':
      case 'dapo': // num_items_in_batch unset: the batch's own token count
        return 1 / Math.max(1, N);
      case 'dr_grpo':
        return 1 / (B * maxLen);
      default:
        throw new Error(`no independent aggregation for ${type}`);
    }
  };
  const weight = new Float64Array(B * C);
  let loss = 0;
  let scale = 0;
  for (let i = 0; i < B * C; i++) {
    weight[i] = M[i] ? rowWeight(Math.floor(i / C)) : 0;
    loss += weight[i] * L[i];
    scale += weight[i] * Math.abs(L[i]);
  }
  return { loss, weight, scale };
}

describe('StepRunner', () => {
  it('loads a dropped folder, runs every stage in order and undoes the step on reset', async () => {
    const runner = createStepRunner(await testGpu());
    const progress: string[] = [];
    const info = await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, (p) => progress.push(p.label));
    expect(info.model_type).toBe('qwen2');
    expect(info.tokenizer!.eos_token_ids).toHaveLength(1);
    // The plan holds the frozen copy (as much as the f32 weights) and the undo copies of every trainable weight and
    // of its two AdamW moments.
    const plan = info.memory_plan.plan;
    expect(plan.bytes.reference_weights).toBe(plan.bytes.weights);
    expect(plan.bytes.undo).toBe(12 * plan.trainable_params);
    expect(plan.total_bytes).toBeGreaterThan(plan.bytes.weights + plan.bytes.reference_weights + plan.bytes.grads + plan.bytes.optimizer);
    expect(progress.some((l) => l.startsWith('policy weights'))).toBe(true);

    const settings = smallSettings(3, 4);
    await expect(runner.runStage('loss', settings)).rejects.toThrow(/the next stage is "render"/);
    // An import's Doctor can leave the tokenizer's rules (decode → encode of every row) for later, saying so.
    const own: GrpoBatch = { format: 'grpo-batch/v1', num_generations: 1, pad_token_id: info.tokenizer!.pad_token_id!, eos_token_ids: [info.tokenizer!.eos_token_ids[0]], prompt_ids: [[5, 6]], completion_ids: [[7, info.tokenizer!.eos_token_ids[0]]], completion_mask: [[1, 1]] };
    const quick = runner.inspect(own, { deferTokenizerRules: true });
    expect(quick.deferred).toBe(true);
    // One text per distinct id, each that id decoded alone.
    expect(quick.token_texts?.by_id).toEqual({ 5: expect.any(String), 6: expect.any(String), 7: expect.any(String), [own.completion_ids[0][1]]: '<|im_end|>' });
    expect(quick.report.skipped.filter((k) => /running after the import/.test(k.reason)).map((k) => k.rule).sort()).toEqual([...TOKENIZER_RULES].sort());
    const whole = runner.inspect(own);
    expect(whole.deferred).toBe(false);
    expect(whole.report.skipped.some((k) => /running after the import/.test(k.reason))).toBe(false);
    // A batch padded with ordinary text is another model's: the loaded tokenizer neither checks nor names its tokens.
    const foreign = runner.inspect({ ...own, pad_token_id: 5 }, { deferTokenizerRules: true });
    expect(foreign.token_texts).toBeUndefined();
    expect(foreign.report.skipped.filter((k) => /^the loaded model's tokenizer \(tiny\) does not fit this batch: pad_token_id 5 /.test(k.reason)).map((k) => k.rule).sort()).toEqual([...TOKENIZER_RULES, 'token-out-of-vocabulary'].sort());
    // The plan before the step is for this prompt set: 2 prompts × G 3 rows of the longest rendering + 4 tokens.
    const planned = runner.plan(settings);
    expect(planned.options).toMatchObject({ B: 6, T: planned.options.prompt + 4, adapter: null });
    expect(planned.options.prompt).toBeGreaterThan(0);
    expect(planned.plan.rows).toBe(6 * 4);
    expect(runner.plan({ ...settings, sampling: { ...settings.sampling, num_generations: 6 } }).plan.bytes.activations).toBe(2 * planned.plan.bytes.activations);

    const run = async () => {
      const out: Partial<StagePayloads> = {};
      for (const stage of STAGES) {
        const r = await runner.runStage(stage, settings);
        expect(r.id).toBe(stage);
        expect(r.peakBytes).toBeGreaterThanOrEqual(r.gpuBytes);
        (out as Record<string, unknown>)[stage] = r.data;
      }
      return out as StagePayloads;
    };
    const first = await run();
    const B = 6;
    const C = first.assemble.padded.C;
    expect(first.assemble.padded.B).toBe(B);
    const isGrid = (a: Float32Array | null) => a?.length === B * C;
    expect(first.render.prompt_texts).toHaveLength(2);
    expect(first.sample.completion_ids).toHaveLength(B);
    expect(first.reward.names).toEqual(['correctness', 'format', 'length']);
    // A text for every id the assembled batch holds (prompt and completion), nothing else.
    const held = new Set([...first.assemble.batch.prompt_ids.flat(), ...first.assemble.batch.completion_ids.flat()]);
    expect(Object.keys(first.assemble.token_texts!.by_id).map(Number).sort((a, b) => a - b)).toEqual([...held].sort((a, b) => a - b));
    for (const a of [first.policy_forward.per_token_logps, first.policy_forward.per_token_entropy, first.reference_forward.ref_per_token_logps, first.loss.per_token_loss, first.loss.token_weight, first.re_evaluate.post_per_token_logps]) {
      expect(isGrid(a)).toBe(true);
    }
    // The configured aggregation recomputed in float64 from the per-token loss and the mask (TRL's
    // definitions), and the loss's split into policy and β·KL terms.
    const M = first.assemble.padded.completion_mask;
    const ran = (name: string) => settingOf(settings.settings, 'config', name).value;
    const want = trlAggregate(ran('loss_type') as string, first.loss.per_token_loss, M, B, C, (ran('max_completion_length') as number | null) ?? C);
    expect(Math.abs(first.loss.loss - want.loss)).toBeLessThanOrEqual(1e-5 * (want.scale + 1e-6));
    for (let i = 0; i < B * C; i++) expect(Math.abs(first.loss.token_weight[i] - want.weight[i]), `token_weight[${i}]`).toBeLessThanOrEqual(1e-6 * want.weight[i]);
    expect(first.loss.policy_term + first.loss.kl_term).toBeCloseTo(first.loss.loss, 6);
    expect(Object.keys(first.backward.group_grad_norms).sort()).toEqual(['embedding', 'layers.0.attention', 'layers.0.mlp', 'layers.0.norms', 'layers.1.attention', 'layers.1.mlp', 'layers.1.norms', 'norm']);
    expect(Object.values(first.step.group_update_norms).every((u) => u > 0)).toBe(true);
    expect(first.assemble.report.findings.filter((f) => f.severity === 'error')).toEqual([]); // the Doctor checked the assembled batch
    // A new run starts at render; with weights 'loaded' it starts from the weights as loaded (the default
    // continues from the stepped ones: the next test).
    await expect(runner.runStage('render', { ...settings, weights: 'loaded' })).resolves.toMatchObject({ id: 'render' });

    // reset() drops it: the same seed samples the same completions and scores them identically.
    await runner.reset();
    const second = await run();
    expect(second.sample.completion_ids).toEqual(first.sample.completion_ids);
    expect(second.policy_forward.per_token_logps).toEqual(first.policy_forward.per_token_logps);
    expect(second.re_evaluate.loss_after).toBe(first.re_evaluate.loss_after);

    // The same batch imported (as from a Python trainer): render / sample / reward are skipped and the
    // update scores it exactly as the prompt run did (reset restored the weights).
    await runner.reset();
    const batch = structuredClone(first.assemble.batch);
    const skipped: string[] = [];
    let replay: StagePayloads['policy_forward'] | null = null;
    for (const stage of STAGES) {
      const r = await runner.runStage(stage, settings, stage === 'render' ? { kind: 'batch', batch } : undefined);
      if (r.skipped) skipped.push(stage);
      if (r.id === 'policy_forward') replay = r.data as StagePayloads['policy_forward'];
    }
    expect(skipped).toEqual(['render', 'sample', 'reward']);
    expect(replay!.per_token_logps).toEqual(first.policy_forward.per_token_logps);
    runner.dispose();
  });

  it('continues from the stepped weights (and optimizer state) against the frozen copy of the loaded ones; reset undoes only the last step; "loaded" restarts', async () => {
    const runner = createStepRunner(await testGpu());
    await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
    const settings = smallSettings(3, 4);
    expect(settingOf(settings.settings, 'config', 'beta').value).toBeGreaterThan(0);
    const run = async (s: StepSettings, start?: StepStart) => {
      const out: Partial<StagePayloads> = {};
      for (const stage of STAGES) (out as Record<string, unknown>)[stage] = (await runner.runStage(stage, s, stage === 'render' ? start : undefined)).data;
      return out as StagePayloads;
    };
    const first = await run(settings);
    const M = first.assemble.padded.completion_mask;
    const maxKl = (kl: Float32Array | null) => kl!.reduce((m, x, i) => (M[i] ? Math.max(m, x) : m), 0);
    expect(first.reference_forward.reference_label).toBe('frozen-copy of the loaded weights');
    expect(maxKl(first.loss.per_token_kl)).toBe(0); // the copy equals the policy before the first step
    // The same batch again, from the stepped weights (the default): the policy scores it as the first
    // update's re-evaluation did and the reference as the first update's policy did, so KL > 0 before the step.
    const start: StepStart = { kind: 'batch', batch: structuredClone(first.assemble.batch) };
    const second = await run(settings, start);
    expect(second.policy_forward.per_token_logps).toEqual(first.re_evaluate.post_per_token_logps);
    expect(second.reference_forward.ref_per_token_logps).toEqual(first.policy_forward.per_token_logps);
    expect(second.loss.per_token_kl).toEqual(first.re_evaluate.post_per_token_kl);
    expect(maxKl(second.loss.per_token_kl)).toBeGreaterThan(0);
    expect(second.loss.kl_term).toBeGreaterThan(0);
    // The optimizer carries over, as a trainer's next step: AdamW step 2 from the first step's moments.
    expect([first.step.step, second.step.step]).toEqual([1, 2]);
    // Undo returns to the weights before that step (the first update's stepped ones), not to the loaded ones.
    await runner.reset();
    const third = await run(settings, start);
    expect(third.policy_forward.per_token_logps).toEqual(second.policy_forward.per_token_logps);
    expect(third.loss.per_token_kl).toEqual(second.loss.per_token_kl);
    // ... and the optimizer's moments and step count with them: the same step again.
    expect(third.step.step).toBe(2);
    expect(third.step.update_norm).toBe(second.step.update_norm);
    // "restart from loaded weights": the first update's numbers again, KL 0 before the step.
    const fourth = await run({ ...settings, weights: 'loaded' }, start);
    expect(fourth.policy_forward.per_token_logps).toEqual(first.policy_forward.per_token_logps);
    expect(maxKl(fourth.loss.per_token_kl)).toBe(0);
    expect(fourth.loss.loss).toBe(first.loss.loss);
    expect(fourth.step.step).toBe(1); // a fresh optimizer
    expect(fourth.step.update_norm).toBe(first.step.update_norm);
    runner.dispose();
  });

  it('gradient checkpointing: a smaller plan, the same update bit for bit with the backward recomputing each layer, kept for the next model loaded', async () => {
    const runner = createStepRunner(await testGpu());
    await expect(runner.setCheckpointing(true)).rejects.toThrow(/load a model first/);
    const folder = { kind: 'local' as const, name: 'tiny', files: droppedFolder() };
    const info = await runner.load(folder, () => {});
    expect(info.memory_plan.options.checkpointing).toBe(false); // the refused call chose nothing
    const settings = smallSettings(3, 4);
    const run = async (start?: StepStart) => {
      const out: Partial<StagePayloads> = {};
      const dispatches: Record<string, number> = {};
      for (const stage of STAGES) {
        const r = await runner.runStage(stage, settings, stage === 'render' ? start : undefined);
        (out as Record<string, unknown>)[stage] = r.data;
        dispatches[stage] = r.gpuStats?.dispatches ?? NaN; // NaN (no counters) fails the comparison below
      }
      return { out: out as StagePayloads, dispatches };
    };
    // One update from the prompt set gives the batch; each run below starts from it and the loaded weights (reset undoes).
    const start: StepStart = { kind: 'batch', batch: structuredClone((await run()).out.assemble.batch) };
    await runner.reset();
    const kept = await run(start);
    await runner.reset();
    const on = await runner.setCheckpointing(true);
    expect(on.memory_plan.options.checkpointing).toBe(true);
    expect(on.memory_plan.plan.bytes.activations).toBeLessThan(info.memory_plan.plan.bytes.activations);
    const ckpt = await run(start);
    // The backward's grad norms (per group) come straight from the recomputed gradients.
    for (const stage of ['policy_forward', 'reference_forward', 'loss', 'backward', 'step', 're_evaluate'] as const) expect(ckpt.out[stage], stage).toEqual(kept.out[stage]);
    expect(ckpt.out.backward.grad_norm).toBeGreaterThan(0);
    expect(ckpt.out.step.step).toBe(1);
    expect(ckpt.dispatches.backward).toBeGreaterThan(kept.dispatches.backward); // the layers' forwards again
    // The choice outlives the model: the next one loaded takes it, until it is turned off.
    expect((await runner.load(folder, () => {})).memory_plan.options.checkpointing).toBe(true);
    expect((await runner.setCheckpointing(false)).memory_plan.options.checkpointing).toBe(false);
    runner.dispose();
  });

  it('takes a second checkpoint as reference: named, counted in the memory plan, scoring as that model does on its own', async () => {
    const runner = createStepRunner(await testGpu());
    const loaded = await runner.load({ kind: 'local', name: 'tiny', files: droppedFolder() }, () => {});
    expect(loaded.reference).toBeNull();
    expect(loaded.memory_plan.plan.bytes.reference_weights).toBe(loaded.memory_plan.plan.bytes.weights); // the frozen copy, f32
    await expect(runner.loadReference({ kind: 'local', name: 'wide', files: droppedFolder('wide', 9, 8) }, () => {})).rejects.toThrow(/wide: the reference's vocabulary \(\d+ tokens\) differs from the policy's/);
    const labels: string[] = [];
    const info = await runner.loadReference({ kind: 'local', name: 'tiny-ref', files: droppedFolder('tiny-ref', 10) }, (p) => labels.push(p.label));
    expect(labels.some((l) => l.startsWith('reference weights'))).toBe(true);
    expect(info.reference).toMatchObject({ name: 'tiny-ref', model_type: 'qwen2', num_parameters: loaded.num_parameters, bytes: loaded.memory_plan.plan.bytes.weights });
    expect(info.memory_plan.plan.bytes.reference_weights).toBe(2 * loaded.memory_plan.plan.bytes.weights);
    expect(info.memory_plan.plan.total_bytes - loaded.memory_plan.plan.total_bytes).toBe(info.reference!.bytes);

    const settings = smallSettings(3, 4, false);
    const run = async (r: typeof runner, start?: StepStart) => {
      const out: Partial<StagePayloads> = {};
      for (const stage of STAGES) (out as Record<string, unknown>)[stage] = (await r.runStage(stage, settings, stage === 'render' ? start : undefined)).data;
      return out as StagePayloads;
    };
    const withRef = await run(runner);
    expect(withRef.reference_forward.reference).toBe('model');
    expect(withRef.reference_forward.reference_label).toBe('model tiny-ref');
    expect(withRef.loss.mean_kl).toBeGreaterThan(0); // another model: KL > 0 on the first update
    // The same batch scored by tiny-ref loaded as the policy of another runner (its first update: KL 0, reference = itself).
    const other = createStepRunner(await testGpu());
    await other.load({ kind: 'local', name: 'tiny-ref', files: droppedFolder('tiny-ref', 10) }, () => {});
    const alone = await run(other, { kind: 'batch', batch: structuredClone(withRef.assemble.batch) });
    expect(withRef.reference_forward.ref_per_token_logps).toEqual(alone.policy_forward.per_token_logps);
    other.dispose();

    // Dropping it: back to the frozen copy of the loaded weights (the update continues from the stepped ones).
    const back = await runner.loadReference(null, () => {});
    expect(back.reference).toBeNull();
    expect(back.memory_plan.plan.bytes.reference_weights).toBe(loaded.memory_plan.plan.bytes.weights);
    const again = await run(runner);
    expect(again.reference_forward.reference_label).toBe('frozen-copy of the loaded weights');
    runner.dispose();
  });
});
