// Benchmark suite `step`: one full GRPO update through the step pipeline (src/grpo/step.ts) — policy
// forward with saved activations, reference forward, loss to dlogp, chunked-head backward, gradient
// norms, clipped AdamW, re-evaluation — on every golden tiny model with its own batch and reference, and
// on a SmolLM2-135M-shaped Llama with random weights (a second random model as reference) at batch
// 8 × 256 (128 prompt + 128 completion tokens; --quick: 2 × 32 and a 2048-token vocabulary, for software
// adapters). Per stage: wall ms of the second run (the first compiles pipelines; its optimizer carries over, as to the page's next update) and the peak bytes our
// GPU buffers held; per model: the peak against the plan of a later update (src/model/plan.ts with `carried`:
// `grpo-studio plan`'s one update plus the optimizer's moments alive from its first stage, as the page's next
// update holds them) with the reference checkpoint held beside the policy. Per stage also the GPU work of that second run:
// dispatches, compute passes, bind-group cache hit rate, KiB read back, CPU ms spent encoding and ms spent
// awaiting the GPU (wall ms minus wait ms is the CPU's share: recording, encoding and the stage's own work), its
// dispatches times the probe's cost of a dependent dispatch (`dispatch floor ms`: bench/peak.ts), and
// the FLOPs and bytes its dispatches declare over its wall ms as fractions of the FMA and copy probes (a stage's
// hardware FLOPs utilisation: the SmolLM2 and checkpointed LoRA cases recompute each layer's forward in the
// backward, and those FLOPs count; the optimizer's rate is its bytes). Last, the
// optimizer alone over the SmolLM2-shaped parameters (every one trains): one clipped AdamW step whose
// gradient norms, clip coefficient and update go in one submit (Optimizer.step), second of two runs. Then
// a LoRA update over a Qwen2.5-0.5B-shaped bf16 base at 8 × 512, its peak against the plan of that update, with
// gradient checkpointing (the CLI's --checkpointing) and without (the page's default: faster, more memory).
// For both large cases, the policy's forward recorded into one submit against streamed in pieces (streamAB).
// The two large cases and the warm run are exported (smolStepCase, loraStepCase, warmStep): the `profile`
// suite (bench/profile.ts) profiles exactly these steps.
import { join, resolve, dirname } from 'node:path';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { statsSince, zeroStats, type Gpu, type GpuStats } from '../src/gpu/context.ts';
import { Optimizer } from '../src/grpo/optimizer.ts';
import { StepPipeline } from '../src/grpo/step.ts';
import type { StageResult } from '../src/grpo/step_types.ts';
import { stepConfigFromBatch } from '../src/grpo/step_config.ts';
import { parseBatch, type GrpoBatch } from '../src/io/batch.ts';
import { padBatch } from '../src/grpo/batch.ts';
import { score_completions } from '../src/model/score.ts';
import { countParams, numel, parseConfig, type ModelConfig } from '../src/model/config.ts';
import { DEFAULT_LIMITS } from '../src/model/memory.ts';
import { planStep } from '../src/model/plan.ts';
import { initLoraWeights, newLoraOptionsFromText } from '../src/model/lora.ts';
import { LoraAdapter } from '../src/model/lora_adapter.ts';
import { CausalLM } from '../src/model/model.ts';
import { FolderSource } from '../src/model/source_node.ts';
import { smolLM2, weights } from './model.ts';
import { rates, type BenchOptions, type Peak, type Row } from './types.ts';

const GOLDEN = resolve(dirname(fileURLToPath(import.meta.url)), '../tests/golden/models');
const CONFIGS = resolve(dirname(fileURLToPath(import.meta.url)), '../tests/fixtures/configs');
const TINY = ['tiny-gpt2', 'tiny-llama', 'tiny-qwen2', 'tiny-qwen3', 'tiny-llama-bf16'];
const MiB = 2 ** 20;

/** A synthetic batch: G = 2, every prompt P tokens and every completion C tokens (truncated: no EOS), TRL's default loss with β = 0.04. */
function syntheticBatch(V: number, B: number, P: number, C: number): GrpoBatch {
  // Ids in [1, V − 2]: 0 pads, V − 1 is the EOS no completion reaches (a batch without an EOS id is refused).
  const row = (b: number, n: number, salt: number) => Array.from({ length: n }, (_, t) => 1 + ((7 * (b * 131 + t) + salt) % (V - 2)));
  return {
    format: 'grpo-batch/v1',
    num_generations: 2,
    pad_token_id: 0,
    eos_token_ids: [V - 1],
    prompt_ids: Array.from({ length: B }, (_, b) => row(Math.floor(b / 2), P, 3)),
    completion_ids: Array.from({ length: B }, (_, b) => row(b, C, 5)),
    completion_mask: Array.from({ length: B }, () => new Array(C).fill(1)),
    advantages: Array.from({ length: B }, (_, b) => (b % 2 ? -0.7 : 0.7)),
    config: { loss_type: 'grpo', beta: 0.04, epsilon: 0.2, epsilon_high: 0.28, optimizer: { name: 'adamw', lr: 1e-6, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0 }, max_grad_norm: 1 },
  };
}

/** A model pair and its batch; `destroy()` frees what the builder made. */
export interface StepCase {
  name: string;
  policy: CausalLM;
  reference: CausalLM;
  batch: GrpoBatch;
  /** The reference's bytes held beside the policy, for the plan (0: the adapter-off view of the policy's own base). */
  heldReferenceBytes: number;
  destroy(): void;
}

/** Hooks into the measured (second) run of warmStep: `start` before its first stage, `stage` after each. */
export interface StepHooks {
  start?(): void;
  stage?(r: StageResult): Promise<void>;
}

/**
 * One update of `c` run twice (the first creates the pipelines and touches every buffer); the second run's
 * stage results. The optimizer is carried from the first run to the second, as the page carries it to its
 * next update: the measured step is step 2 of a run, with its moments and their bind groups in place, not
 * the first step's allocation of zeroed moments (bench/first_update.ts times the page's first update).
 */
export async function warmStep(gpu: Gpu, c: Pick<StepCase, 'policy' | 'reference' | 'batch'>, hooks: StepHooks = {}): Promise<StageResult[]> {
  const { policy, reference, batch } = c;
  const C = Math.max(...batch.completion_ids.map((r) => r.length));
  const config = stepConfigFromBatch(batch.config, C);
  const optimizer = new Optimizer(gpu, policy.trainableParams.values(), config.optimizer);
  const pipe = new StepPipeline(gpu, { policy, reference, config, source: { kind: 'batch', batch }, optimizer });
  try {
    await pipe.runToEnd(); // warmup: pipeline creation, first touch of every buffer
    await pipe.reset();
    hooks.start?.();
    while (!pipe.done) {
      const r = await pipe.next();
      await hooks.stage?.(r);
    }
    return pipe.results;
  } finally {
    pipe.destroy();
    optimizer.destroy();
  }
}

async function measure(gpu: Gpu, probe: Peak | null | undefined, name: string, policy: CausalLM, reference: CausalLM, batch: GrpoBatch, held_reference_bytes = reference.weightBytes): Promise<Row[]> {
  const C = Math.max(...batch.completion_ids.map((r) => r.length));
  const P = Math.max(...batch.prompt_ids.map((r) => r.length));
  const B = batch.completion_ids.length;
  const results = await warmStep(gpu, { policy, reference, batch });

  const cfg: ModelConfig = policy.config;
  // The step's plan with the reference checkpoint held beside the policy (its weights and, during its
  // forward, its workspace), as src/model/plan.ts plans the page's update.
  const adapter = policy.adapter;
  const planned = planStep(cfg, {
    B, T: P + C, prompt: P, adapter: adapter?.config.r ?? null, checkpointing: policy.checkpointing,
    dtype: [...policy.params.values()].some((p) => p.dtype === 'bf16') ? 'bf16' : 'f32', limits: DEFAULT_LIMITS, held_reference_bytes, carried: true,
  }).total_bytes;
  const peak = Math.max(...results.map((r) => r.peakBytes));
  const common = { model: name, params: countParams(cfg), trainable: [...policy.trainableParams.values()].reduce((n, p) => n + numel(p.shape), 0), B, P, C };
  const ran = results.filter((r) => !r.skipped);
  const rows: Row[] = ran.map((r) => ({ ...common, stage: r.id, ms: r.ms, 'peak MiB': r.peakBytes / MiB, ...work(r.gpuStats, r.ms, probe) }));
  const total = rows.reduce((s, r) => s + (r.ms as number), 0);
  const sum = zeroStats();
  for (const r of ran) for (const k of Object.keys(sum) as (keyof GpuStats)[]) sum[k] += r.gpuStats[k];
  rows.push({
    ...common,
    stage: 'total',
    ms: total,
    ...work(sum, total, probe),
    'peak MiB': peak / MiB,
    'plan MiB': planned / MiB,
    'peak/plan': peak / planned,
  });
  return rows;
}

/** A stage's GPU work, and the rate of what its dispatches declared (FLOPs, bytes) over its wall ms beside the probe's. */
const work = (s: GpuStats, ms: number, probe: Peak | null | undefined): Row => ({
  dispatches: s.dispatches,
  passes: s.computePasses,
  submits: s.submits,
  readbacks: s.readbacks,
  'bg hit %': s.bindGroupHits + s.bindGroupMisses ? (100 * s.bindGroupHits) / (s.bindGroupHits + s.bindGroupMisses) : null,
  'read KiB': s.bytesRead / 1024,
  'encode ms': s.encodeMs,
  'wait ms': s.waitMs,
  // The wall time the dispatches alone would take at the probe's cost of a dependent dispatch.
  'dispatch floor ms': probe ? (s.dispatches * probe.dispatch_us) / 1e3 : null,
  ...rates(s, ms, probe),
});

/** One clipped AdamW step over every parameter of `policy` on the gradients its last backward left (max_grad_norm 1): grad norms + clip + update in one submit. */
async function optimizerAlone(gpu: Gpu, probe: Peak | null | undefined, name: string, policy: CausalLM): Promise<Row> {
  const params = [...policy.params.values()];
  const grads = policy.grads;
  if (!grads) throw new Error('optimizer bench: the policy has no gradients (run a step first)');
  const opt = new Optimizer(gpu, params, { name: 'adamw', lr: 1e-6, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.01, momentum: 0 });
  await opt.step(grads, 1); // warmup: pipelines, state allocation
  const before = { ...gpu.stats };
  gpu.resetPeak();
  const t0 = performance.now();
  await opt.step(grads, 1);
  const ms = performance.now() - t0;
  const row: Row = { model: name, params: countParams(policy.config), stage: 'adamw alone (norm+clip+update)', ms, 'peak MiB': gpu.peakBytes / MiB, ...work(statsSince(gpu.stats, before), ms, probe) };
  opt.destroy();
  return row;
}

/**
 * The policy's scoring forward recorded into one submit against streamed in pieces (RecorderOptions.stream, as
 * the step's forward and backward record): alternating, five of each after one warm-up, the median wall ms.
 * Streaming pays where recording and encoding take long beside the GPU's work: the GPU starts on the first
 * layers while the CPU still records the last.
 */
async function streamAB(gpu: Gpu, probe: Peak | null | undefined, name: string, policy: CausalLM, batch: GrpoBatch): Promise<Row[]> {
  const padded = padBatch(batch);
  const once = async (stream: boolean) => {
    const before = { ...gpu.stats };
    const t0 = performance.now();
    const rec = gpu.recorder('policy_forward', { stream });
    const s = score_completions(rec, policy, padded);
    try {
      await rec.finish();
      await gpu.readF32(s.per_token_logps, padded.B * padded.C);
      return { ms: performance.now() - t0, stats: statsSince(gpu.stats, before) };
    } finally {
      s.destroy();
    }
  };
  await once(false);
  await once(true);
  const runs: Record<'one' | 'streamed', { ms: number; stats: GpuStats }[]> = { one: [], streamed: [] };
  for (let i = 0; i < 5; i++) for (const stream of [false, true]) runs[stream ? 'streamed' : 'one'].push(await once(stream));
  return (['one', 'streamed'] as const).map((k) => {
    const sorted = runs[k].sort((a, b) => a.ms - b.ms);
    const mid = sorted[2];
    return { model: name, stage: `policy forward, ${k === 'one' ? 'one submit' : 'streamed'} (median of 5)`, ms: mid.ms, ...work(mid.stats, mid.ms, probe) };
  });
}

export async function run(gpu: Gpu, opts: BenchOptions): Promise<Row[]> {
  const rows: Row[] = [];
  for (const m of TINY) {
    const dir = join(GOLDEN, m);
    const policy = await CausalLM.from_pretrained(new FolderSource(dir), gpu);
    const reference = await CausalLM.from_pretrained(new FolderSource(join(dir, 'ref')), gpu);
    rows.push(...(await measure(gpu, opts.peak, m, policy, reference, parseBatch(readFileSync(join(dir, 'batch.json'), 'utf8')))));
    policy.destroy();
    reference.destroy();
  }
  const smol = smolStepCase(gpu, opts.quick);
  const { name, policy, reference } = smol;
  try {
    rows.push(...(await measure(gpu, opts.peak, name, policy, reference, smol.batch, smol.heldReferenceBytes)));
    rows.push(...(await streamAB(gpu, opts.peak, name, policy, smol.batch)));
    reference.destroy();
    policy.releaseWorkspace();
    rows.push(await optimizerAlone(gpu, opts.peak, name, policy));
  } finally {
    smol.destroy();
  }
  const lora = loraStepCase(gpu, opts.quick);
  try {
    rows.push(...(await measure(gpu, opts.peak, lora.name, lora.policy, lora.reference, lora.batch, lora.heldReferenceBytes)));
    rows.push(...(await streamAB(gpu, opts.peak, lora.name, lora.policy, lora.batch)));
    // The page's default: the backward keeps the forward's activations instead of recomputing each layer.
    lora.policy.releaseWorkspace();
    lora.policy.checkpointing = false;
    rows.push(...(await measure(gpu, opts.peak, `${lora.name}, no checkpointing`, lora.policy, lora.reference, lora.batch, lora.heldReferenceBytes)));
  } finally {
    lora.destroy();
  }
  return rows;
}

/**
 * A SmolLM2-135M-shaped Llama with random weights and a second copy of them as reference, batch 8 × 256 (128 prompt +
 * 128 completion tokens, V 49152; --quick: 2 × 32, V 2048).
 */
export function smolStepCase(gpu: Gpu, quick: boolean): StepCase {
  const cfg = smolLM2(quick ? 2048 : 49152);
  const [B, P, C] = quick ? [2, 16, 16] : [8, 128, 128];
  const w = weights(cfg);
  const policy = CausalLM.fromWeights(gpu, cfg, w);
  const reference = CausalLM.fromWeights(gpu, cfg, w);
  return {
    name: `SmolLM2-135M-shaped (V ${cfg.vocab_size})`,
    policy,
    reference,
    batch: syntheticBatch(cfg.vocab_size, B, P, C),
    heldReferenceBytes: reference.weightBytes,
    destroy: () => {
      reference.destroy(); // destroying twice is harmless: a buffer's destroy() is idempotent
      policy.destroy();
    },
  };
}

/** Qwen2.5-0.5B's config.json (tests/fixtures/configs, as `grpo-studio plan` and the plan suite read it); --quick: 2 layers, V 2048. */
function qwen25(quick: boolean): ModelConfig {
  const raw = JSON.parse(readFileSync(join(CONFIGS, 'Qwen2.5-0.5B.json'), 'utf8'));
  return parseConfig(quick ? { ...raw, num_hidden_layers: 2, vocab_size: 2048 } : raw);
}

/**
 * A LoRA update over a frozen base as the page loads one: a Qwen2.5-0.5B-shaped model with random weights packed bf16
 * (the base as a BF16 checkpoint loads), the create form's adapter (r 16, α 32, all linear layers, B = 0), the
 * adapter-off view as reference (no second checkpoint held), batch 8 × 512 (256 prompt + 256 completion tokens;
 * --quick: 2 × 32); gradient checkpointing on, as the CLI's --checkpointing and the page's box (its default is
 * off: the `step` suite times that too; the `profile` suite this case).
 */
export function loraStepCase(gpu: Gpu, quick: boolean): StepCase {
  const cfg = qwen25(quick);
  const [B, P, C] = quick ? [2, 16, 16] : [8, 256, 256];
  const base = CausalLM.fromWeights(gpu, cfg, weights(cfg), 'checkpoint');
  const adapter = LoraAdapter.fromWeights(gpu, initLoraWeights(cfg, newLoraOptionsFromText('r=16,lora_alpha=32,target_modules=all-linear', 'bench'), null));
  const policy = base.withAdapter(adapter);
  policy.checkpointing = true;
  const reference = base.withAdapter(null);
  return {
    name: `Qwen2.5-0.5B-shaped LoRA r16 bf16 base (V ${cfg.vocab_size})`,
    policy,
    reference,
    batch: syntheticBatch(cfg.vocab_size, B, P, C),
    heldReferenceBytes: 0,
    destroy: () => {
      reference.destroy();
      policy.destroy();
      adapter.destroy();
      base.destroy();
    },
  };
}
