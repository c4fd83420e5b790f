// OpenRLHF's actor optimizer step (src/grpo/trainers/openrlhf_optimizer.ts): the learning rate of update k under
// transformers' schedules as OpenRLHF builds them (warmup ⌈max_steps · lr_warmup_ratio⌉, cosine_with_min_lr's
// floor), the numbers worked out in Python's float64 from transformers' optimization.py lambdas; the parameters
// get_optimizer_grouped_parameters leaves undecayed on each family's real names; and the step config an OpenRLHF
// batch gets: its own rows, never TRL's TrainingArguments.
import { describe, expect, it } from 'vitest';
import { openrlhfNoDecay } from '../../src/grpo/optimizer.ts';
import { OPENRLHF_SETTINGS, type OpenrlhfConfig } from '../../src/grpo/settings/openrlhf.ts';
import { resolveSettings } from '../../src/grpo/settings/resolve.ts';
import { openrlhfLrFactor, openrlhfOptimizer } from '../../src/grpo/trainers/openrlhf_optimizer.ts';
import { effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { paramSpecs, parseConfig } from '../../src/model/config.ts';

const cfg = (c: Record<string, unknown>) => resolveSettings<OpenrlhfConfig>(OPENRLHF_SETTINGS, c, 'config');

describe('learning rate of update k', () => {
  it('cosine_with_min_lr (the default): k / W over the warmup, then 0.1 + 0.9 · ½(1 + cos(π p))', () => {
    const c = cfg({});
    // max_steps 100, ratio 0.03: W = 3.
    expect(openrlhfLrFactor(c, 0, 100)).toBe(0);
    expect(openrlhfLrFactor(c, 1, 100)).toBe(1 / 3);
    expect(openrlhfLrFactor(c, 3, 100)).toBe(1);
    // Python: λ(50) = 0.5718529999515017, λ(99) = 0.10023599392951829.
    expect(openrlhfLrFactor(c, 50, 100)).toBeCloseTo(0.5718529999515017, 15);
    expect(openrlhfLrFactor(c, 99, 100)).toBeCloseTo(0.10023599392951829, 15);
    // ⌈200 · 0.07⌉ is 15 in float64 (200 · 0.07 = 14.000000000000002): update 14 is still in the warmup.
    expect(openrlhfLrFactor(cfg({ 'actor.lr_warmup_ratio': 0.07 }), 14, 200)).toBe(14 / 15);
    // A short run: ⌈10 · 0.03⌉ = 1 warmup step.
    expect(openrlhfLrFactor(c, 0, 10)).toBe(0);
    expect(openrlhfLrFactor(c, 1, 10)).toBe(1);
  });

  it('the other schedules: linear, cosine without a floor, constant_with_warmup, constant', () => {
    // Python: linear (100 − 50) / 97 = 0.5154639175257731; cosine ½(1 + cos(π · 47/97)) = 0.5242811110572242.
    expect(openrlhfLrFactor(cfg({ 'actor.lr_scheduler': 'linear' }), 50, 100)).toBeCloseTo(0.5154639175257731, 15);
    expect(openrlhfLrFactor(cfg({ 'actor.lr_scheduler': 'cosine' }), 50, 100)).toBeCloseTo(0.5242811110572242, 15);
    expect(openrlhfLrFactor(cfg({ 'actor.lr_scheduler': 'constant_with_warmup' }), 2, 100)).toBe(2 / 3);
    expect(openrlhfLrFactor(cfg({ 'actor.lr_scheduler': 'constant_with_warmup' }), 50, 100)).toBe(1);
    expect(openrlhfLrFactor(cfg({ 'actor.lr_scheduler': 'constant' }), 0, null)).toBe(1); // no warmup at all
  });

  it('the first update needs no max_steps (0 under any warmup, else 1); a later one does, named', () => {
    expect(openrlhfLrFactor(cfg({}), 0, null)).toBe(0);
    expect(openrlhfLrFactor(cfg({ 'actor.lr_warmup_ratio': 0 }), 0, null)).toBe(1);
    expect(() => openrlhfLrFactor(cfg({}), 1, null)).toThrow(/^run\.max_steps: actor\.lr_scheduler cosine_with_min_lr at run\.actor_optimizer_steps 1 needs the schedule's length/);
  });
});

describe("the optimizer of OpenRLHF's actor", () => {
  it("its defaults: DeepSpeed AdamW with betas (0.9, 0.95), OpenRLHF's decay groups, max_norm 1, lr 0 at the first update", () => {
    expect(openrlhfOptimizer({}, {})).toEqual({ optimizer: { name: 'adamw', lr: 0, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0, momentum: 0, no_decay: 'openrlhf' }, max_grad_norm: 1 });
  });

  it('reads every row, and the page continues after run.actor_optimizer_steps', () => {
    const config = { 'actor.adam.lr': 2e-6, 'actor.adam.betas': [0.8, 0.99], 'actor.adam.eps': 1e-6, 'actor.adam.weight_decay': 0.1, 'actor.lr_scheduler': 'constant_with_warmup', 'actor.lr_warmup_ratio': 0.1, 'actor.max_norm': 0.5 };
    // max_steps 40: W = 4; update 1 + 1 continued = 2 → 2/4.
    const o = openrlhfOptimizer(config, { actor_optimizer_steps: 1, max_steps: 40 }, 1);
    expect(o).toEqual({ optimizer: { name: 'adamw', lr: 2e-6 * 0.5, betas: [0.8, 0.99], eps: 1e-6, weight_decay: 0.1, momentum: 0, no_decay: 'openrlhf' }, max_grad_norm: 0.5 });
    expect(openrlhfOptimizer({ 'actor.max_norm': -1 }, {}).max_grad_norm).toBe(0); // DeepSpeed: ≤ 0 is no clipping
  });

  it('refuses what it does not reproduce, naming the field', () => {
    expect(() => openrlhfOptimizer({ 'actor.optim': 'muon' }, {})).toThrow(/^config\.actor\.optim: "muon" is not reproduced/);
    expect(() => openrlhfOptimizer({ 'actor.adam.betas': [0.9, 1] }, {})).toThrow(/^config\.actor\.adam\.betas: expected two numbers in \[0, 1\)/);
    expect(() => openrlhfOptimizer({}, { actor_optimizer_steps: 40, max_steps: 40 })).toThrow(/^run\.actor_optimizer_steps: update 40 of a schedule of run\.max_steps 40/);
    expect(() => openrlhfOptimizer({ 'actor.lr_scheduler': 'cosine_warmup_with_min_lr' }, {})).toThrow(/actor\.lr_scheduler/);
  });

  it("leaves undecayed the names holding bias / layer_norm.weight / layernorm.weight / norm.weight / ln_f.weight, on each family's real names", () => {
    const families: [string, Record<string, unknown>, string[]][] = [
      ['gpt2', { architectures: ['GPT2LMHeadModel'], model_type: 'gpt2', vocab_size: 50, n_embd: 16, n_layer: 1, n_head: 2, n_positions: 32 }, ['transformer.h.0.ln_1.bias', 'transformer.h.0.attn.c_attn.bias', 'transformer.h.0.attn.c_proj.bias', 'transformer.h.0.ln_2.bias', 'transformer.h.0.mlp.c_fc.bias', 'transformer.h.0.mlp.c_proj.bias', 'transformer.ln_f.weight', 'transformer.ln_f.bias']],
      ['qwen3', { architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', vocab_size: 50, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 8, tie_word_embeddings: true }, ['model.layers.0.input_layernorm.weight', 'model.layers.0.self_attn.q_norm.weight', 'model.layers.0.self_attn.k_norm.weight', 'model.layers.0.post_attention_layernorm.weight', 'model.norm.weight']],
    ];
    for (const [family, raw, expected] of families) {
      const names = paramSpecs(parseConfig(raw)).map((p) => p.name);
      expect(names.filter(openrlhfNoDecay).sort(), family).toEqual([...expected].sort());
    }
    // GPT-2's ln_1 / ln_2 weights hold none of the patterns: decayed, where transformers' Trainer exempts them.
    expect(openrlhfNoDecay('transformer.h.0.ln_1.weight')).toBe(false);
  });
});

describe('the step config an OpenRLHF batch gets', () => {
  it("its own rows; TRL's learning_rate / adam_* / max_grad_norm are no OpenRLHF setting and do not apply", () => {
    const at = (config: Record<string, unknown>, run: Record<string, unknown> = {}) => stepConfigOf(effectiveSettings('openrlhf', [fileLayer({ trainer: 'openrlhf', config, run }, 'o.json')]), 4, { refuse: false });
    const c = at({ learning_rate: 0.5, adam_beta2: 0.5, max_grad_norm: 7, 'actor.adam.lr': 1e-5, 'actor.lr_warmup_ratio': 0 });
    expect([c.optimizer.lr, c.optimizer.betas, c.max_grad_norm, c.optimizer.no_decay]).toEqual([1e-5, [0.9, 0.95], 1, 'openrlhf']);
    // The page's continued updates: the second update after the run's first two, of 10.
    expect(stepConfigOf(effectiveSettings('openrlhf', [fileLayer({ trainer: 'openrlhf', config: { 'actor.adam.lr': 1e-5 }, run: { actor_optimizer_steps: 2, max_steps: 10 } }, 'o.json')]), 4, { refuse: false, steps_done: 1 }).optimizer.lr).toBeCloseTo(1e-5 * (0.1 + 0.9 * 0.5 * (1 + Math.cos((Math.PI * 2) / 9))), 18);
    // A studio `optimizer` object still replaces the trainer's step.
    expect(at({ optimizer: { name: 'sgd', lr: 0.1 } }).optimizer.name).toBe('sgd');
  });
});
