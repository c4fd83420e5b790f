// Issue 20, "one batch, one answer": a verl batch steps with verl's actor optimizer (volcengine/verl b178a3c
// fsdp_workers.py _build_model_optimizer: torch.optim.AdamW over every actor parameter, lr · the warmup / cosine
// schedule of verl/utils/torch_functional.py; dp_actor.py clip_grad_norm_ at actor.grad_clip), not TRL's
// TrainingArguments rows — in the CLI (importBatch + stepSettingsOfFile) and on the page (pageSettings) alike.
import { describe, expect, it } from 'vitest';
import { stepSettingsOfFile } from '../../src/cli/args.ts';
import { noEdits, pageSettings } from '../../src/bridge/settings.ts';
import { effectiveSettings } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf, type StepConfig } from '../../src/grpo/step_config.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { importBatch } from '../../src/io/formats/index.ts';
import { writeSafeTensors } from '../../src/io/safetensors.ts';
import { f32, i32, nest } from '../helpers/dump_parts.ts';

const ACT = 'actor_rollout_ref.actor';


/** The driver's config fields the actor's batch sizes need (2 GPUs, rollout.n 2, micro-batch 1: verl's actor runs). */
const BASE: Record<string, unknown> = {
  [`${ACT}.strategy`]: 'fsdp', [`${ACT}.ulysses_sequence_parallel_size`]: 1, [`${ACT}.ppo_micro_batch_size`]: null, [`${ACT}.ppo_micro_batch_size_per_gpu`]: 1,
  'actor_rollout_ref.rollout.n': 2, 'trainer.nnodes': 1, 'trainer.n_gpus_per_node': 2, 'algorithm.adv_estimator': 'grpo',
};

/** A DataProto after compute_advantage as docs/import/verl.md's hook saves it, with verl's nested config. */
function verlDump(config: Record<string, unknown>, meta: Record<string, unknown> = {}): Uint8Array {
  const mask = [[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 0]];
  const prompts = [[0, 11, 12], [0, 21, 22], [0, 11, 12], [0, 21, 22]];
  const responses = [[40, 2, 0], [41, 42, 2], [43, 44, 2], [45, 2, 0]];
  const adv = [0.5, -0.5, -0.5, 0.5];
  return writeSafeTensors(
    {
      prompts: i32(prompts), responses: i32(responses), attention_mask: i32(prompts.map((p, b) => [...p.map((t) => (t ? 1 : 0)), ...mask[b]])), response_mask: i32(mask),
      advantages: f32(mask.map((m, b) => m.map((x) => x * adv[b]))), old_log_probs: f32(mask.map((m) => m.map((x) => -0.5 * x))),
    },
    { uid: JSON.stringify(['u1', 'u0', 'u1', 'u0']), pad_token_id: '0', eos_token_id: '2', config: JSON.stringify(nest({ ...BASE, ...config })), ...Object.fromEntries(Object.entries(meta).map(([k, v]) => [k, JSON.stringify(v)])) },
  );
}

const batchOf = (config: Record<string, unknown>, meta: Record<string, unknown> = {}): GrpoBatch => importBatch([{ name: 'v.safetensors', bytes: verlDump(config, meta) }]).batch;
const cli = (b: GrpoBatch): StepConfig => stepSettingsOfFile(b, 'v.safetensors').config;
const page = (b: GrpoBatch): StepConfig => stepConfigOf(pageSettings('verl', { kind: 'batch', batch: b, name: 'v.safetensors' }, noEdits()), 3);
const lrAt = (config: Record<string, unknown>, global_steps?: number) => cli(batchOf(config, global_steps === undefined ? {} : { meta_info: { global_steps } })).optimizer.lr;

describe("a verl batch steps with verl's actor optimizer", () => {
  it('defaults: AdamW lr 1e-6, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01 on every parameter, grad_clip 1', () => {
    const c = cli(batchOf({}));
    expect(c.optimizer).toEqual({ name: 'adamw', lr: 1e-6, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.01, momentum: 0, no_decay: 'none' });
    expect(c.max_grad_norm).toBe(1);
  });

  it("verl's nested optim.lr, betas, weight_decay and grad_clip are the step's, exactly", () => {
    const b = batchOf({ [`${ACT}.optim.lr`]: 3e-6, [`${ACT}.optim.betas`]: [0.9, 0.95], [`${ACT}.optim.weight_decay`]: 0, [`${ACT}.grad_clip`]: 0.5, [`${ACT}.optim.clip_grad`]: 1.0 });
    expect(b.config).toMatchObject({ lr: 3e-6, betas: [0.9, 0.95], 'optim.weight_decay': 0, grad_clip: 0.5 });
    const c = cli(b);
    expect(c.optimizer).toEqual({ name: 'adamw', lr: 3e-6, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0, momentum: 0, no_decay: 'none' });
    expect(c.max_grad_norm).toBe(0.5);
    // The page, on the batch's own settings, takes the same step.
    expect(page(b)).toEqual(c);
  });

  it("the engine worker clips at optim.clip_grad, the legacy one at grad_clip; a set deprecated optim.grad_clip replaces clip_grad", () => {
    const sizes = { [`${ACT}.grad_clip`]: 0.5, [`${ACT}.optim.clip_grad`]: 2 };
    expect(cli(batchOf(sizes)).max_grad_norm).toBe(0.5);
    const engine = batchOf({ ...sizes, 'trainer.use_legacy_worker_impl': 'disable' });
    expect(cli(engine).max_grad_norm).toBe(2);
    expect(page(engine).max_grad_norm).toBe(2);
    // OptimizerConfig.__post_init__: grad_clip (deprecated) set wins over clip_grad; null leaves clip_grad.
    expect(cli(batchOf({ ...sizes, 'trainer.use_legacy_worker_impl': 'disable', [`${ACT}.optim.grad_clip`]: 0.25 })).max_grad_norm).toBe(0.25);
    expect(cli(batchOf({ ...sizes, 'trainer.use_legacy_worker_impl': 'disable', [`${ACT}.optim.grad_clip`]: null })).max_grad_norm).toBe(2);
  });

  it("TRL's TrainingArguments rows are not verl's: learning_rate / max_grad_norm in a verl file do not reach its step", () => {
    const b = batchOf({});
    const c = stepConfigOf(effectiveSettings('verl', [{ origin: 'file', trainer: 'verl', config: { ...b.config, learning_rate: 1e-3, max_grad_norm: 0 }, run: b.run ?? {} }]), 3);
    expect([c.optimizer.lr, c.max_grad_norm]).toEqual([1e-6, 1]);
  });

  it('warmup ratio × total_training_steps, then cosine with min_lr_ratio: hand-worked factors at global_steps', () => {
    // T = 100, W = int(0.1 · 100) = 10, m = 0.1; s = global_steps − 1 (update_actor steps the scheduler after the update).
    const cfg = { [`${ACT}.optim.lr`]: 1e-5, [`${ACT}.optim.lr_warmup_steps_ratio`]: 0.1, [`${ACT}.optim.total_training_steps`]: 100, [`${ACT}.optim.lr_scheduler_type`]: 'cosine', [`${ACT}.optim.min_lr_ratio`]: 0.1 };
    const want: [number | undefined, number][] = [
      [undefined, 0], // the first step: λ(0) = 0 / 10
      [1, 0],
      [6, 0.5], // s = 5: 5 / 10
      [11, 1], // s = 10: p = 0, cos 0 = 1 → 0.45 · 1 + 0.55
      [56, 0.55], // s = 55: p = 45 / 90 = 0.5, cos(π / 2) = 0 → 0.55
      [101, 0.1], // s = 100: p = 1, cos π = −1 → 0.1 (= the floor)
    ];
    for (const [g, f] of want) expect([g, lrAt(cfg, g)]).toEqual([g, expect.closeTo(1e-5 * f, 18)]);
    // The page's continued updates advance the position: one update after global_steps 6 runs at s = 6.
    const b = batchOf(cfg, { meta_info: { global_steps: 6 } });
    expect(b.run?.global_steps).toBe(6);
    expect(stepConfigOf(pageSettings('verl', { kind: 'batch', batch: b, name: 'v' }, noEdits()), 3, { steps_done: 1 }).optimizer.lr).toBeCloseTo(1e-5 * 0.6, 18);
    expect(page(b)).toEqual(cli(b));
  });

  it("the warmup is verl's int(ratio · T), not transformers' ceil; constant after it; num_cycles", () => {
    // W = int(0.15 · 10) = 1: the second step is already at λ = 1 (transformers' ⌈1.5⌉ = 2 would give 0.5).
    expect(lrAt({ [`${ACT}.optim.lr`]: 1e-5, [`${ACT}.optim.lr_warmup_steps_ratio`]: 0.15, [`${ACT}.optim.total_training_steps`]: 10 }, 2)).toBe(1e-5);
    // lr_warmup_steps ≥ 0 wins over the ratio: W = 4, s = 2 → 0.5.
    expect(lrAt({ [`${ACT}.optim.lr`]: 1e-5, [`${ACT}.optim.lr_warmup_steps`]: 4, [`${ACT}.optim.lr_warmup_steps_ratio`]: 0.5, [`${ACT}.optim.total_training_steps`]: 10 }, 3)).toBeCloseTo(0.5e-5, 18);
    // cosine, no warmup, num_cycles 1, T = 8: s = 2 → p = 0.25, cos(π / 2) = 0 → 0.5; s = 4 → cos π → 0.
    const cos = { [`${ACT}.optim.lr`]: 1e-5, [`${ACT}.optim.total_training_steps`]: 8, [`${ACT}.optim.lr_scheduler_type`]: 'cosine', [`${ACT}.optim.num_cycles`]: 1 };
    expect(lrAt(cos, 3)).toBeCloseTo(0.5e-5, 18);
    expect(lrAt(cos, 5)).toBeCloseTo(0, 18);
  });

  it('a schedule or optimizer the studio does not reproduce is refused naming the field', () => {
    expect(() => cli(batchOf({ [`${ACT}.optim.warmup_style`]: 'cosine' }))).toThrow(/config\.warmup_style/);
    expect(() => cli(batchOf({ [`${ACT}.optim.lr_scheduler_type`]: 'linear' }))).toThrow(/optim\.lr_scheduler_type/);
    expect(() => cli(batchOf({ [`${ACT}.optim.lr_warmup_steps_ratio`]: 0.1 }))).toThrow(/config\.total_training_steps: needed for lr_warmup_steps_ratio/);
    expect(() => cli(batchOf({ [`${ACT}.optim.lr_scheduler_type`]: 'cosine' }, { meta_info: { global_steps: 3 } }))).toThrow(/config\.total_training_steps: .*cosine/);
    expect(() => cli(batchOf({ [`${ACT}.optim.optimizer`]: 'AdamW8bit' }))).toThrow(/config\.optim\.optimizer/);
    expect(() => cli(batchOf({ [`${ACT}.optim.optimizer_impl`]: 'bitsandbytes.optim' }))).toThrow(/config\.optimizer_impl/);
    expect(() => cli(batchOf({ [`${ACT}.grad_clip`]: 0 }))).toThrow(/grad_clip/);
    expect(() => batchOf({ [`${ACT}.optim.override_optimizer_config`]: { eps: 1e-6 } })).toThrow(/override_optimizer_config/);
  });
});
