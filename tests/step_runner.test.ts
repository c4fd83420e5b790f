// The studio worker's StepRunner (src/worker/runner.ts, the protocol of src/worker/protocol.ts) in Node: a
// dropped folder (File objects) with a random tiny Qwen2 and the default task's tokenizer, every stage in
// order with the studio's default settings, payload shapes, stage order enforcement, and reset() undoing
// the step (a second run scores exactly as the first), and the same update started from the assembled
// batch as if imported (render / sample / reward skipped, identical log-probs).
import { describe, expect, it } from 'vitest';
import { createStepRunner } from '../src/worker/runner.ts';
import { DEFAULT_SETTINGS } from '../src/store/settings.ts';
import { STAGES, type StagePayloads, type StepSettings } from '../src/worker/protocol.ts';
import { droppedFolder } from './helpers/dropped_folder.ts';
import { testGpu } from './helpers/gpu.ts';

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
    expect(info.tokenizer.eos_token_ids).toHaveLength(1);
    expect(info.memory_plan.totals.train).toBeGreaterThan(0);
    expect(progress.some((l) => l.startsWith('policy weights'))).toBe(true);

    const settings: StepSettings = structuredClone({ ...DEFAULT_SETTINGS, prompts: DEFAULT_SETTINGS.prompts.slice(0, 2) });
    settings.sampling = { ...settings.sampling, num_generations: 3, max_new_tokens: 4 };
    // A random model earns no task reward; a length reward makes the advantages (and so the gradient) non-zero.
    settings.rewards = [...settings.rewards, { kind: 'length', name: 'length', weight: 1, enabled: true, target_tokens: 2 }];
    await expect(runner.runStage('loss', settings)).rejects.toThrow(/the next stage is "render"/);

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
    expect(first.assemble.token_texts.completion.map((r) => r.length)).toEqual(first.sample.completion_ids.map((r) => r.length));
    for (const a of [first.policy_forward.per_token_logps, first.policy_forward.per_token_entropy, first.reference_forward.ref_per_token_logps, first.loss.per_token_loss, first.loss.token_weight, first.re_evaluate.post_per_token_logps]) {
      expect(isGrid(a)).toBe(true);
    }
    // The configured aggregation recomputed in float64 from the per-token loss and the mask (TRL's
    // definitions), and the loss's split into policy and β·KL terms.
    const M = first.assemble.padded.completion_mask;
    const want = trlAggregate(settings.loss.loss_type, first.loss.per_token_loss, M, B, C, settings.loss.max_completion_length);
    expect(Math.abs(first.loss.loss - want.loss)).toBeLessThanOrEqual(1e-5 * (want.scale + 1e-6));
    for (let i = 0; i < B * C; i++) expect(Math.abs(first.loss.token_weight[i] - want.weight[i]), `token_weight[${i}]`).toBeLessThanOrEqual(1e-6 * want.weight[i]);
    expect(first.loss.policy_term + first.loss.kl_term).toBeCloseTo(first.loss.loss, 6);
    expect(Object.keys(first.backward.group_grad_norms).sort()).toEqual(['embedding', 'layers.0.attention', 'layers.0.mlp', 'layers.0.norms', 'layers.1.attention', 'layers.1.mlp', 'layers.1.norms', 'norm']);
    expect(Object.values(first.step.group_update_norms).every((u) => u > 0)).toBe(true);
    expect(first.assemble.report.findings.filter((f) => f.severity === 'error')).toEqual([]); // the Doctor checked the assembled batch
    await expect(runner.runStage('render', settings)).resolves.toMatchObject({ id: 'render' }); // a new run starts at render

    // reset() restores the loaded weights: the same seed samples the same completions and scores them identically.
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
});
