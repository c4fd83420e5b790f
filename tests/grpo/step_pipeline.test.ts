// The step pipeline started from prompts (render → sample → reward → advantages → assemble → … →
// re-evaluate) on a random tiny Qwen2 model with the default task's tokenizer, and reset() with undo.
// Checks that do not restate the implementation: the trainer's re-scoring of the sampled tokens equals
// the sampler's recorded log-probs (temperature 1, no warpers: the same distribution), the ratio is 1
// without old log-probs, a reward computed here by hand, group advantages summing to 0, the loss change
// of a small SGD step against its first-order prediction −‖Δθ‖² / (lr·clip_coef), and bitwise undo.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';
import type { StageData, StepSource } from '../../src/grpo/step_types.ts';
import { DEFAULT_PROMPTS } from '../../src/grpo/default_task.ts';
import { compileUserReward, scoreColumn, type JsRewardRunner, type RewardSpec } from '../../src/grpo/rewards.ts';
import { parseConfig } from '../../src/model/config.ts';
import { kvDecoder } from '../../src/model/generate.ts';
import { DEFAULT_SAMPLING } from '../../src/model/sampler.ts';
import { CausalLM } from '../../src/model/model.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { randomWeights } from '../fixtures/models.ts';
import { expectClose } from '../helpers/close.ts';
import { testGpu } from '../helpers/gpu.ts';
import { GOLDEN } from '../helpers/golden.ts';

const ROOT = resolve(__dirname, '..', '..');

/** Node's JS reward runner for tests: compiled in process, no time limit (the studio uses its sandbox worker). */
const runJs: JsRewardRunner = async (spec, samples) => scoreColumn(compileUserReward(spec.name, spec.source), samples);

const REWARDS: RewardSpec[] = [
  { kind: 'length', name: 'length', weight: 1, enabled: true, target_tokens: 3 },
  { kind: 'js', name: 'digits', weight: 0.5, enabled: true, source: '(s) => (s.completion.match(/[0-9]/g) ?? []).length', timeout_ms: 1000 },
];

async function setup() {
  const gpu = await testGpu();
  const tokenizer = await loadTokenizerDir(join(ROOT, 'public/models/tiny-adder'));
  const cfg = parseConfig({
    architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', vocab_size: tokenizer.vocab_size, hidden_size: 16, num_attention_heads: 2,
    num_key_value_heads: 1, num_hidden_layers: 2, intermediate_size: 24, rms_norm_eps: 1e-6, rope_theta: 1e6, max_position_embeddings: 128, tie_word_embeddings: true,
  });
  const policy = CausalLM.fromWeights(gpu, cfg, randomWeights(cfg, 5));
  const G = 3;
  const source: StepSource = {
    kind: 'prompts',
    prompts: DEFAULT_PROMPTS.slice(0, 2).map((p) => ({ messages: p.messages, answer: p.answer })),
    tokenizer,
    generation: { ...DEFAULT_SAMPLING, num_generations: G, max_new_tokens: 5, seed: 1234 },
    decoder: () => kvDecoder(policy),
    rewards: REWARDS,
    runJs,
  };
  // A small plain-SGD step, so the loss change is first order; β > 0 with no reference model: a frozen copy.
  const config = stepConfigFromBatch({ loss_type: 'grpo', beta: 0.04, optimizer: { name: 'sgd', lr: 1e-3 }, max_grad_norm: 1 }, 5);
  return { gpu, tokenizer, policy, source, config, G };
}

describe('step pipeline from prompts', () => {
  it('renders, samples, rewards, assembles and steps; the numbers agree with independent computations', async () => {
    const { gpu, tokenizer, policy, source, config, G } = await setup();
    const pipe = new StepPipeline(gpu, { policy, reference: null, config, source, undo: true });
    const d = <S extends keyof StageData>(id: S) => pipe.data(id) as StageData[S];
    const results = await pipe.runToEnd();
    expect(results.map((r) => r.id)).toEqual(['render', 'sample', 'reward', 'advantages', 'assemble', 'policy_forward', 'reference_forward', 'loss', 'backward', 'step', 're_evaluate']);
    expect(results.every((r) => !r.skipped && r.ms >= 0 && r.peakBytes >= r.gpuBytes)).toBe(true);

    const render = d('render');
    expect(render.prompt_texts[0]).toBe('<|im_start|>user\nWhat is 25 + 34?<|im_end|>\n<|im_start|>assistant\n');
    const sample = d('sample');
    const B = 2 * G;
    expect(sample.completion_ids).toHaveLength(B);
    const eos = tokenizer.eos_token_id!;
    sample.completion_ids.forEach((ids, b) => {
      expect(ids.length).toBeGreaterThan(0);
      expect(ids.length).toBeLessThanOrEqual(5);
      expect(sample.finish_reason[b]).toBe(ids.at(-1) === eos ? 'eos' : 'length');
    });

    // Rewards by hand: length 1 − |n − 3| / 3 (≥ 0), plus 0.5 × the number of digits in the decoded completion.
    const rewards = sample.completion_ids.map((ids) => Math.max(0, 1 - Math.abs(ids.length - 3) / 3) + 0.5 * (tokenizer.decode(ids).match(/[0-9]/g) ?? []).length);
    expectClose(d('reward').rewards, rewards, { rtol: 1e-12, atol: 1e-12, label: 'rewards' });
    const adv = d('advantages').advantages;
    for (let g = 0; g < 2; g++) expect(Math.abs(adv.slice(g * G, g * G + G).reduce((a, x) => a + x, 0))).toBeLessThan(1e-9);

    // The trainer's re-scoring of the sampled tokens is the sampler's distribution (temperature 1, no top-k/p),
    // computed once from the KV-cache decode on the CPU in float64 and once by a full GPU forward: rtol 1e-4, atol 1e-5 as the golden log-probs.
    const { padded } = d('assemble');
    const sampled = new Float64Array(padded.B * padded.C);
    sample.sampling_per_token_logps.forEach((row, b) => sampled.set(row, b * padded.C));
    const lp = d('policy_forward').per_token_logps;
    expectClose(lp, sampled, { rtol: 1e-4, atol: 1e-5, mask: padded.completion_mask, label: 'policy logps vs sampling logps' });

    // No old log-probs: the ratio is exactly 1; the frozen reference gives KL 0 everywhere.
    const loss = d('loss');
    padded.completion_mask.forEach((m, i) => m && expect(loss.importance_ratio[i]).toBe(1));
    expect(loss.per_token_kl!.every((x) => x === 0)).toBe(true);
    expect(d('reference_forward').reference).toBe('frozen-copy');
    // Token weights carry the chosen aggregation: Σ w·L is the loss.
    expectClose([loss.token_weight.reduce((s, w, i) => s + w * loss.per_token_loss[i], 0)], [loss.loss], { rtol: 1e-5, atol: 1e-8, label: 'Σ w·L' });

    // A small SGD step (no decay): Δθ = −lr·c·g, so to first order Δloss = g·Δθ = −‖Δθ‖² / (lr·c).
    const step = d('step');
    const predicted = -(step.update_norm ** 2) / (config.optimizer.lr * step.clip_coef);
    const actual = d('re_evaluate').loss_after - loss.loss;
    expect(actual).toBeLessThan(0);
    expect(Math.abs(actual - predicted) / Math.abs(predicted)).toBeLessThan(0.05);
    const delta = d('re_evaluate').delta_per_token_logps;
    expect(delta.some((x, i) => padded.completion_mask[i] && x !== 0)).toBe(true);

    // Sampling is a pure function of the seed and the weights (restored by reset): a second run draws the same completions.
    await pipe.reset();
    expect(pipe.nextStage).toBe('render');
    for (let i = 0; i < 2; i++) await pipe.next();
    expect(d('sample').completion_ids).toEqual(sample.completion_ids);
    pipe.destroy();
    policy.destroy();
  });
});

describe('reset with undo', () => {
  it('restores the weights bitwise and a second run reproduces the first', async () => {
    const gpu = await testGpu();
    const dir = join(GOLDEN, 'tiny-llama');
    const policy = await CausalLM.from_pretrained(new FolderSource(dir), gpu);
    const reference = await CausalLM.from_pretrained(new FolderSource(join(dir, 'ref')), gpu);
    const batch = parseBatch(readFileSync(join(dir, 'batch.json'), 'utf8'));
    const config = stepConfigFromBatch(batch.config, 6);
    const before = new Map(await Promise.all([...policy.params.keys()].map(async (n) => [n, await policy.readParam(n)] as const)));
    const pipe = new StepPipeline(gpu, { policy, reference, config, source: { kind: 'batch', batch }, undo: true });
    await pipe.runToEnd();
    const first = pipe.data('re_evaluate')!;
    const changed = await policy.readParam('model.layers.0.mlp.up_proj.weight');
    expect(changed).not.toEqual(before.get('model.layers.0.mlp.up_proj.weight'));
    await pipe.reset();
    for (const [n, w] of before) expect(await policy.readParam(n), n).toEqual(w);
    await pipe.runToEnd();
    expect(pipe.data('re_evaluate')!.post_per_token_logps).toEqual(first.post_per_token_logps);
    expect(pipe.data('re_evaluate')!.loss_after).toBe(first.loss_after);
    await pipe.reset();
    pipe.destroy();
    policy.destroy();
    reference.destroy();
  });
});

describe('advantages the step cannot take', () => {
  it('refuses per-token advantages that vary inside a sequence, naming sample and positions, instead of recomputing them from rewards', async () => {
    const gpu = await testGpu();
    const dir = join(GOLDEN, 'tiny-llama');
    const policy = await CausalLM.from_pretrained(new FolderSource(dir), gpu);
    const batch = parseBatch(readFileSync(join(dir, 'batch.json'), 'utf8'));
    // A critic's per-token advantages (as a verl GAE batch carries), with rewards present that GRPO could use.
    batch.per_token_advantages = batch.completion_ids.map((row, b) => row.map((_, t) => (b === 1 && t === 2 ? 0.5 : 0.25)));
    batch.rewards = batch.completion_ids.map((_, b) => b % 2);
    delete batch.advantages;
    const pipe = new StepPipeline(gpu, { policy, reference: null, config: stepConfigFromBatch(batch.config, 6), source: { kind: 'batch', batch } });
    await expect(pipe.runToEnd()).rejects.toThrow(/^per_token_advantages: sample 1 has 0\.25 at position 0 and 0\.5 at position 2; the step takes one advantage per sequence/);
    pipe.destroy();
    policy.destroy();
  });
});
