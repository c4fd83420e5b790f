// The step memory plan (src/model/plan.ts, `grpo-studio plan`): components against sizes worked out here
// from the architecture (PEFT's well-known trainable count for Qwen2.5-0.5B all-linear r = 16: 8,798,208),
// the plan against the peak the step pipeline actually allocates (gpu.peakBytes) on a real-width LoRA and
// full-fine-tuning step (within 5%), and the CLI verb (text, --json, bad arguments).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { Optimizer } from '../../src/grpo/optimizer.ts';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { numel, paramSpecs, parseConfig } from '../../src/model/config.ts';
import { linearModules, parseLoraConfig } from '../../src/model/lora.ts';
import { LoraAdapter } from '../../src/model/lora_adapter.ts';
import { DEFAULT_LIMITS } from '../../src/model/memory.ts';
import { CausalLM } from '../../src/model/model.ts';
import { planStep, type PlanOptions } from '../../src/model/plan.ts';
import { Rng } from '../../src/model/rng.ts';
import { testGpu } from '../helpers/gpu.ts';
import { randomWeights } from '../fixtures/models.ts';

const CONFIGS = join(__dirname, '..', 'fixtures/configs');
const config = (name: string) => JSON.parse(readFileSync(join(CONFIGS, `${name}.json`), 'utf8'));

/**
 * A SmolLM2-shaped Llama narrowed to what the software adapter steps in seconds (the plan's share of small buffers —
 * uniforms, per-token arrays — is biggest at small sizes, so this is the hard case) and a 4 × (12 + 20) batch.
 */
function narrowedCase(seed: number) {
  const cfg = parseConfig({ ...config('SmolLM2-135M'), hidden_size: 192, intermediate_size: 512, num_attention_heads: 6, num_key_value_heads: 2, vocab_size: 4096, num_hidden_layers: 3, torch_dtype: 'float32' });
  const [B, P, C] = [4, 12, 20];
  const rng = new Rng(seed);
  const batch = {
    format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [2],
    prompt_ids: Array.from({ length: B }, () => Array.from({ length: P }, () => rng.int(3, cfg.vocab_size - 1))),
    completion_ids: Array.from({ length: B }, () => Array.from({ length: C }, () => rng.int(3, cfg.vocab_size - 1))),
    completion_mask: Array.from({ length: B }, () => new Array(C).fill(1)),
    advantages: [1, -1, 0.5, -0.5],
    config: { beta: 0.04, optimizer: { name: 'adamw', lr: 1e-3 } },
  } as unknown as GrpoBatch;
  return { cfg, B, P, C, rng, batch };
}

describe('step memory plan', () => {
  it('Qwen2.5-0.5B, LoRA r = 16 on all linear layers, 8 × 512: components from the architecture', () => {
    const cfg = parseConfig(config('Qwen2.5-0.5B'));
    const o: PlanOptions = { B: 8, T: 512, prompt: 256, adapter: 16, checkpointing: true, dtype: 'bf16', limits: DEFAULT_LIMITS };
    const p = planStep(cfg, o);
    expect(p.params).toBe(494032768);
    expect(p.trainable_params).toBe(8798208); // what PEFT's print_trainable_parameters reports
    const [V, C, L] = [151936, 896, 24];
    const norms = L * 2 * C + C;
    const biases = L * (896 + 2 * 128);
    // Norms and biases f32, every 2-D weight (the tied embedding included) bf16, the adapter f32.
    expect(p.bytes.weights).toBe((p.params - norms - biases) * 2 + (norms + biases) * 4 + 8798208 * 4);
    expect(p.bytes.optimizer).toBe(2 * 8798208 * 4);
    expect(p.bytes.grads).toBe((8798208 + norms) * 4);
    expect(p.rows).toBe(8 * 256);
    // The backward's head chunk: 220 rows (220 × V × 4 ≤ 128 MiB, one storage binding) of logits, hidden
    // rows and their gradient (2C), and ids / mask / lse (2) / dlogp per row.
    const R = 220;
    expect(R * V * 4).toBeLessThanOrEqual(128 * 2 ** 20);
    expect((R + 1) * V * 4).toBeGreaterThan(128 * 2 ** 20);
    expect(p.bytes.logits_chunk).toBe(R * (V + 2 * C + 5) * 4);
    // Checkpointing keeps L layer inputs (N, C) instead of L full activation sets.
    const full = planStep(cfg, { ...o, checkpointing: false });
    expect(full.bytes.activations - p.bytes.activations).toBeGreaterThan((L - 1) * 8 * 512 * (4864 * 3) * 4);
    // The peak is the larger of the reference forward (with the gradient scratch an earlier update left) and the
    // backward + step + re-evaluation (the reference's workspace is freed between): the backward's head chunk, then (once it is freed) the
    // optimizer's moments and a scoring chunk (logits, hidden rows, ids / mask / logp / lse (2) / entropy
    // per row); the step takes ‖Δθ‖ without a copy of θ_old.
    const b = p.bytes;
    const scoring = R * (V + C + 6) * 4;
    const atStep = b.weights + b.activations + b.grads + b.scratch + Math.max(b.logits_chunk, b.optimizer + scoring);
    expect(p.total_bytes).toBe(Math.max(b.weights + b.activations + b.grads + b.scratch + b.reference, atStep));
    expect(p.peak).toBe('reference forward'); // the adapter-off view's workspace beside the gradient scratch
    // Moments carried from an earlier update are alive from the first stage on: beside the reference's workspace and the backward's chunk.
    const c = planStep(cfg, { ...o, carried: true });
    const base = b.weights + b.activations + b.grads + b.scratch;
    expect(c.bytes).toEqual(b);
    expect(c.total_bytes).toBe(Math.max(base + b.reference + b.optimizer, base + Math.max(b.logits_chunk + b.optimizer, b.optimizer + scoring)));
    // The 2048 × 151936 f32 logits (1.16 GiB) would exceed WebGPU's default maxBufferSize; one chunk fits a binding.
    expect(p.buffers.map((x) => x.name)).not.toContain('logits chunk (R, V)');
    // The frozen bf16 embedding (V, C) is 259.7 MiB: just past the default maxBufferSize (256 MiB).
    // Fused attention keeps no (B, Hq, T, T) probabilities, so there is nothing of that size to flag.
    expect(p.buffers).toEqual([{ name: 'embedding (V, C)', bytes: V * C * 2, status: 'does not fit' }]);
  });

  // carried: the second update steps with the first one's optimizer (a run of updates, as the `step` bench measures it).
  for (const [lora, checkpointing, carried] of [[true, false, false], [false, false, false], [true, true, false], [false, true, false], [true, false, true]]) {
    it.sequential(`matches the pipeline's tracked peak within 5%: ${lora ? 'LoRA r = 8' : 'full fine-tuning'}${checkpointing ? ', checkpointing' : ''}${carried ? ', moments carried to the second update' : ''}, narrowed SmolLM2 shape, 3 layers`, async () => {
      const gpu = await testGpu();
      const { cfg, B, P, C, rng, batch } = narrowedCase(2);
      const before = gpu.allocatedBytes;
      gpu.resetPeak();
      const policy = CausalLM.fromWeights(gpu, cfg, randomWeights(cfg, 1));
      const adapter = lora
        ? LoraAdapter.fromWeights(gpu, { config: parseLoraConfig({ peft_type: 'LORA', r: 8, lora_alpha: 16, target_modules: 'all-linear' }), modules: linearModules(cfg).map((m) => ({ ...m, A: rng.f32(8 * m.in, 0.05), B: rng.f32(m.out * 8, 0.05) })) })
        : null;
      policy.adapter = adapter;
      policy.checkpointing = checkpointing;
      const reference = adapter ? policy.withAdapter(null) : null;
      const config = stepConfigFromBatch(batch.config, C);
      const optimizer = carried ? new Optimizer(gpu, policy.trainableParams.values(), config.optimizer) : undefined;
      const pipe = new StepPipeline(gpu, { policy, reference, config, source: { kind: 'batch', batch }, optimizer });
      // LoRA: two updates, the second starting with what the first left allocated (the backward's gradient scratch).
      // A full fine-tune without a reference model cannot run again (its frozen-copy reference changed with the step).
      let peak = 0;
      for (let update = 0; update < (reference ? 2 : 1); update++) {
        if (update) await pipe.reset();
        while (!pipe.done) peak = Math.max(peak, (await pipe.next()).peakBytes - before);
      }
      const plan = planStep(cfg, { B, T: P + C, prompt: P, adapter: lora ? 8 : null, checkpointing, dtype: 'f32', limits: DEFAULT_LIMITS, carried });
      console.log(`plan ${plan.total_bytes} vs tracked peak ${peak} (${(plan.total_bytes / peak).toFixed(4)})`);
      expect(Math.abs(plan.total_bytes - peak) / peak).toBeLessThan(0.05);
      if (carried) {
        // The carried moments sit under the reference forward's peak: the plan of a first update misses exactly
        // them, and is further from what the second update held.
        const first = planStep(cfg, { B, T: P + C, prompt: P, adapter: 8, checkpointing, dtype: 'f32', limits: DEFAULT_LIMITS });
        expect(plan.peak).toBe('reference forward');
        expect(plan.total_bytes - first.total_bytes).toBe(plan.bytes.optimizer);
        expect(Math.abs(plan.total_bytes - peak)).toBeLessThan(Math.abs(first.total_bytes - peak));
      }
      optimizer?.destroy();
      pipe.destroy();
      reference?.destroy();
      policy.destroy();
      adapter?.destroy();
    });
  }

  it.sequential("matches the tracked peak of the page's second update of a full fine-tune within 5%: moments carried, weights and moments copied for undo, a frozen copy as reference", async () => {
    const gpu = await testGpu();
    const { cfg, B, P, C, batch } = narrowedCase(3);
    const weights = randomWeights(cfg, 1);
    const before = gpu.allocatedBytes; // what earlier tests left allocated
    const policy = CausalLM.fromWeights(gpu, cfg, weights);
    const frozen = CausalLM.fromWeights(gpu, cfg, weights); // the page's frozen copy of the loaded weights
    const step = stepConfigFromBatch(batch.config, C);
    const optimizer = new Optimizer(gpu, policy.trainableParams.values(), step.optimizer);
    // As the studio worker runs updates (src/worker/runner.ts): one pipeline per update, the optimizer carried.
    const update = () => new StepPipeline(gpu, { policy, reference: frozen, config: step, source: { kind: 'batch', batch }, undo: true, optimizer });
    const first = update();
    await first.runToEnd();
    first.destroy();
    const second = update();
    gpu.resetPeak(); // the second update's peak: from what the first left allocated
    let peak = 0;
    while (!second.done) peak = Math.max(peak, (await second.next()).peakBytes - before);
    const plan = planStep(cfg, { B, T: P + C, prompt: P, adapter: null, checkpointing: false, dtype: 'f32', limits: DEFAULT_LIMITS, held_reference_bytes: frozen.weightBytes, undo: true });
    console.log(`page second update: plan ${plan.total_bytes} vs tracked peak ${peak} (${(plan.total_bytes / peak).toFixed(4)})`);
    expect(Math.abs(plan.total_bytes - peak) / peak).toBeLessThan(0.05);
    second.destroy();
    optimizer.destroy();
    frozen.destroy();
    policy.destroy();
  });

  it('grpo-studio plan: text, --json (total_bytes = the planned peak), bad arguments', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const model = join(CONFIGS, 'Llama-3.2-1B.json');
      expect(await main(['plan', '--model', model, '--batch', '8x512', '--adapter', '16', '--checkpointing', '--limits', 'default'])).toBe(0);
      const text = String(log.mock.calls[0][0]);
      for (const part of ['weights', 'grads', 'optimizer', 'activations', 'logits_chunk', 'reference', 'scratch', 'total', 'does not fit']) expect(text).toContain(part);
      expect(await main(['plan', '--model', model, '--batch', '8x512', '--prompt', '300', '--json'])).toBe(0);
      const j = JSON.parse(String(log.mock.calls[1][0]));
      const cfg = parseConfig(config('Llama-3.2-1B'));
      expect(j.total_bytes).toBe(planStep(cfg, { B: 8, T: 512, prompt: 300, adapter: null, checkpointing: false, scoreOnly: false, dtype: 'bf16', limits: DEFAULT_LIMITS }).total_bytes);
      expect(j.params).toBe(paramSpecs(cfg).reduce((s, p) => s + numel(p.shape), 0));
      expect(await main(['plan', '--model', model, '--batch', '8by512'])).toBe(2);
      expect(String(err.mock.calls[0][0])).toMatch(/--batch: expected rows x tokens like 8x512, got "8by512"/);
      expect(await main(['plan', '--model', model, '--batch', '8x512', '--prompt', '512'])).toBe(2);
      expect(String(err.mock.calls[1][0])).toMatch(/--prompt 512 leaves no completion tokens/);
    } finally {
      log.mockRestore();
      err.mockRestore();
    }
  });
  it('grpo-studio plan checks buffers against the adapter in use, WebGPU defaults only with --limits default (issue 24)', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const model = join(CONFIGS, 'Qwen2.5-0.5B.json');
      // A LoRA base is frozen in bf16: the embedding is 151936 × 896 × 2 = 272,269,312 bytes (0.254 GiB),
      // past WebGPU's default maxBufferSize of 256 MiB = 268,435,456 bytes.
      const embedding = 151936 * 896 * 2;
      const run = async (...extra: string[]) => {
        log.mockClear();
        expect(await main(['plan', '--model', model, '--batch', '2x48', '--adapter', '16', '--json', ...extra])).toBe(0);
        return JSON.parse(String(log.mock.calls[0][0])) as { limits: { maxBufferSize: number }; limits_from: string; buffers: { name: string; status: string }[] };
      };
      const defaults = await run('--limits', 'default');
      expect(defaults.limits.maxBufferSize).toBe(256 * 2 ** 20);
      expect(defaults.buffers).toContainEqual({ name: 'embedding (V, C)', bytes: embedding, status: 'does not fit' });
      const gpu = await testGpu();
      const adapter = await run();
      expect(adapter.limits_from).toMatch(/^adapter /);
      expect(adapter.limits.maxBufferSize).toBe(gpu.limits.maxBufferSize);
      const status = adapter.buffers.find((b) => b.name === 'embedding (V, C)')?.status;
      expect(status).toBe(embedding > gpu.limits.maxBufferSize ? 'does not fit' : embedding > gpu.limits.maxStorageBufferBindingSize ? 'windowed' : undefined);
      expect(await main(['plan', '--model', model, '--batch', '2x48', '--limits', 'huge'])).toBe(2);
    } finally {
      log.mockRestore();
    }
  });
});
