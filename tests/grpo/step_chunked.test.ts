// The step pipeline with the LM head in small row chunks (CausalLM.logitsChunkRows = 5: src/model/head.ts)
// against the same step with one chunk holding every scored row (what the device's limits give these tiny
// vocabularies), on every golden tiny model (full fine-tuning) and every golden LoRA case: per-token
// log-probs and entropy of every row (what the page shows), loss, every trainable gradient, grad norm and
// post-step log-probs agree to float32 summation-order differences, and no buffer of the chunked step
// holds more than 5 rows of logits.
//
// Tolerances: the two runs compute the same float32 sums in a different order (the head GEMM tiled over 5
// rows instead of all of them; dW_head accumulated over chunks instead of in one GEMM over the rows).
// Reordering a float32 sum of n terms moves it by at most ~2·n·ε·Σ|terms| (ε = 2⁻²⁴ ≈ 6e-8); with n up to
// a few hundred (hidden width, scored rows) and Σ|terms| within a small factor of the result's scale, that
// is ≲ 1e-5 of the largest value, so per-token values, the norm and each gradient are compared at rtol
// 1e-5 with atol 1e-5 × the largest |value| of the array (the loss, a sum of terms of either sign, with
// atol 1e-5 × its largest per-token term). Post-step log-probs go through AdamW,
// whose first step is lr·g/(|g| + eps): a relative change δ of g moves the update by ≲ lr·δ, so they
// agree to the same order.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { Gpu } from '../../src/gpu/context.ts';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';
import type { StageData } from '../../src/grpo/step_types.ts';
import { parseBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { loadLoraAdapter } from '../../src/model/lora.ts';
import { LoraAdapter } from '../../src/model/lora_adapter.ts';
import { CausalLM } from '../../src/model/model.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN, GOLDEN_MODELS, GOLDEN_ROOT } from '../helpers/golden.ts';
import { testGpu } from '../helpers/gpu.ts';

const LORA_CASES = ['llama-gqa-all-proj-r4', 'qwen2-qv-r2-rslora', 'qwen3-all-linear-r3', 'gpt2-cattn-cproj-r2'];
const absMax = (a: ArrayLike<number>) => Array.from(a).reduce((s, x) => Math.max(s, Math.abs(x)), 0);

interface Run {
  data: { [S in keyof StageData]?: StageData[S] };
  grads: Map<string, Float32Array>;
  logitsBytes: number; // the biggest buffer with "logits" in its label allocated during the step
}

/** One full update through the pipeline with `chunkRows` rows per logits chunk (null: the device's choice). */
async function step(gpu: Gpu, policy: CausalLM, reference: CausalLM | null, batch: GrpoBatch, chunkRows: number | null): Promise<Run> {
  policy.logitsChunkRows = chunkRows;
  if (reference) reference.logitsChunkRows = chunkRows;
  const config = stepConfigFromBatch(batch.config, Math.max(...batch.completion_ids.map((r) => r.length)));
  const created = vi.spyOn(gpu, 'createBuffer');
  const pipe = new StepPipeline(gpu, { policy, reference, config, source: { kind: 'batch', batch } });
  await pipe.runToEnd();
  const logitsBytes = Math.max(...created.mock.calls.filter(([label]) => /logits/.test(label)).map(([, bytes]) => bytes));
  created.mockRestore();
  const data = Object.fromEntries(pipe.results.map((r) => [r.id, r.data]));
  const grads = new Map<string, Float32Array>();
  for (const [name, g] of policy.trainableGrads!) grads.set(name, await gpu.readF32(g, g.size / 4));
  pipe.destroy();
  return { data, grads, logitsBytes };
}

function compare(label: string, one: Run, chunked: Run, rows: number): void {
  let worst = 0;
  const close = (got: ArrayLike<number>, want: ArrayLike<number>, what: string, scale = absMax(want)) => {
    worst = Math.max(worst, expectClose(got, want, { rtol: 1e-5, atol: 1e-5 * scale, label: `${label} ${what}` }).worst);
  };
  const a = one.data;
  const b = chunked.data;
  // Every row's per-token values, as the page shows them.
  expect(b.policy_forward!.per_token_logps.length).toBe(rows);
  close(b.policy_forward!.per_token_logps, a.policy_forward!.per_token_logps, 'per_token_logps');
  close(b.policy_forward!.per_token_entropy, a.policy_forward!.per_token_entropy, 'per_token_entropy');
  close(b.loss!.per_token_loss, a.loss!.per_token_loss, 'per_token_loss');
  // The loss sums per-token losses of either sign (advantages ±): its error scales with the terms, not the sum.
  close([b.loss!.loss], [a.loss!.loss], 'loss', absMax(a.loss!.per_token_loss));
  close([b.backward!.grad_norm], [a.backward!.grad_norm], 'grad_norm');
  expect([...chunked.grads.keys()]).toEqual([...one.grads.keys()]);
  for (const [name, g] of one.grads) close(chunked.grads.get(name)!, g, `grad.${name}`);
  close(b.re_evaluate!.post_per_token_logps, a.re_evaluate!.post_per_token_logps, 'post_per_token_logps');
  // The step did move the log-probs (a no-op step would agree trivially).
  expect(absMax(a.re_evaluate!.delta_per_token_logps)).toBeGreaterThan(1e-4);
  console.log(`${label}: worst fraction of tolerance ${worst.toExponential(2)}`);
}

describe.each(GOLDEN_MODELS)('%s', (m) => {
  it('a step with 5-row logits chunks equals the one-chunk step (full fine-tuning)', async () => {
    const gpu = await testGpu();
    const batch = parseBatch(readFileSync(join(GOLDEN, m, 'batch.json'), 'utf8'));
    const runs: Run[] = [];
    for (const chunkRows of [null, 5]) {
      // Fresh weights per run: the first step changes them.
      const policy = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, m)), gpu);
      const reference = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, m, 'ref')), gpu);
      runs.push(await step(gpu, policy, reference, batch, chunkRows));
      policy.destroy();
      reference.destroy();
    }
    const policy = await CausalLM.from_pretrained(new FolderSource(join(GOLDEN, m)), gpu);
    const rows = runs[0].data.policy_forward!.per_token_logps.length;
    const V = policy.config.vocab_size;
    policy.destroy();
    // The device's choice for a tiny vocabulary is one chunk of every row; the forced one is 5 rows.
    expect(runs[0].logitsBytes).toBe(rows * V * 4);
    expect(runs[1].logitsBytes).toBe(5 * V * 4);
    compare(m, runs[0], runs[1], rows);
  });
});

describe.each(LORA_CASES)('%s', (c) => {
  it('a LoRA step with 5-row logits chunks equals the one-chunk step (adapter gradients; the head stays frozen)', async () => {
    const gpu = await testGpu();
    const dir = join(GOLDEN_ROOT, 'lora', c);
    const batch = parseBatch(readFileSync(join(dir, 'batch.json'), 'utf8'));
    const runs: Run[] = [];
    for (const chunkRows of [null, 5]) {
      const model = await CausalLM.from_pretrained(new FolderSource(join(dir, 'model')), gpu);
      const adapter = LoraAdapter.fromWeights(gpu, await loadLoraAdapter(new FolderSource(join(dir, 'adapter')), model.config));
      model.adapter = adapter;
      const reference = model.withAdapter(null);
      runs.push(await step(gpu, model, reference, batch, chunkRows));
      reference.destroy();
      model.destroy();
      adapter.destroy();
    }
    expect([...runs[0].grads.keys()].every((k) => /lora_[AB]/.test(k))).toBe(true);
    compare(c, runs[0], runs[1], runs[0].data.policy_forward!.per_token_logps.length);
  });
});
