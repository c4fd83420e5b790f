// TRL's optimizer step (src/grpo/trainers/trl_optimizer.ts): the learning rate of the step after
// run.global_step completed ones under transformers' schedules, worked out by hand from
// huggingface/transformers src/transformers/optimization.py (_get_*_schedule_with_warmup_lr_lambda) and
// TrainingArguments.get_warmup_steps; the parameters Trainer.get_decay_parameter_names leaves undecayed, on
// the real parameter names of every family; errors that name the missing or unsupported field.
import { describe, expect, it } from 'vitest';
import { hfNoDecay } from '../../src/grpo/optimizer.ts';
import { parseTrlConfig, parseTrlRun } from '../../src/grpo/settings/trl.ts';
import { trlLrFactor, trlOptimizer } from '../../src/grpo/trainers/trl_optimizer.ts';
import { trlOptimizerApplies, trlOptimizerOf } from '../../src/grpo/step_config.ts';
import { paramSpecs, parseConfig, type ModelConfig } from '../../src/model/config.ts';

const factor = (config: Record<string, unknown>, run: Record<string, unknown>) => trlLrFactor(parseTrlConfig(config).values, parseTrlRun(run).values);

describe('learning rate schedule', () => {
  it('linear: up over the warmup, then down to 0 at max_steps', () => {
    const c = { lr_scheduler_type: 'linear', warmup_steps: 10 };
    // current_step / max(1, W) below W; max(0, (T − s) / max(1, T − W)) after.
    expect(factor(c, { global_step: 0, max_steps: 110 })).toBe(0);
    expect(factor(c, { global_step: 5, max_steps: 110 })).toBe(0.5);
    expect(factor(c, { global_step: 10, max_steps: 110 })).toBe(1);
    expect(factor(c, { global_step: 60, max_steps: 110 })).toBe(0.5);
    expect(factor(c, { global_step: 110, max_steps: 110 })).toBe(0);
    expect(factor(c, { global_step: 200, max_steps: 110 })).toBe(0);
  });

  it('cosine: num_cycles from lr_scheduler_kwargs (a full cycle is back at 1 at the end)', () => {
    const c = { lr_scheduler_type: 'cosine', lr_scheduler_kwargs: { num_cycles: 1 } };
    // 0.5·(1 + cos(π·num_cycles·2·progress)): progress 1/4 → 0.5, 1 → 1.
    expect(factor(c, { global_step: 25, max_steps: 100 })).toBeCloseTo(0.5, 15);
    expect(factor(c, { global_step: 100, max_steps: 100 })).toBeCloseTo(1, 15);
  });

  it('cosine: half a cosine from 1 to 0 after the warmup', () => {
    const c = { lr_scheduler_type: 'cosine', warmup_steps: 4 };
    expect(factor(c, { global_step: 1, max_steps: 104 })).toBe(0.25);
    expect(factor(c, { global_step: 54, max_steps: 104 })).toBeCloseTo(0.5, 15); // progress 1/2: (1 + cos(π/2)) / 2
    expect(factor(c, { global_step: 29, max_steps: 104 })).toBeCloseTo((1 + Math.SQRT1_2) / 2, 15); // progress 1/4
    expect(factor(c, { global_step: 104, max_steps: 104 })).toBeCloseTo(0, 15);
  });

  it('constant ignores any warmup; constant_with_warmup warms up then holds', () => {
    expect(factor({ lr_scheduler_type: 'constant', warmup_steps: 50 }, { global_step: 3 })).toBe(1);
    expect(factor({ lr_scheduler_type: 'constant', warmup_ratio: 0.1 }, { global_step: 3 })).toBe(1); // no run length needed
    expect(factor({ lr_scheduler_type: 'constant_with_warmup', warmup_steps: 8 }, { global_step: 2 })).toBe(0.25);
    expect(factor({ lr_scheduler_type: 'constant_with_warmup', warmup_steps: 8 }, { global_step: 9000 })).toBe(1);
  });

  it('takes a warmup ratio as ⌈T · ratio⌉ steps (warmup_ratio, or warmup_steps in (0, 1))', () => {
    // T = 95, ratio 0.1 → ⌈9.5⌉ = 10 warmup steps: step 5 is at 5/10.
    expect(factor({ lr_scheduler_type: 'linear', warmup_ratio: 0.1 }, { global_step: 5, max_steps: 95 })).toBe(0.5);
    expect(factor({ lr_scheduler_type: 'linear', warmup_steps: 0.1 }, { global_step: 5, max_steps: 95 })).toBe(0.5);
    // warmup_steps ≥ 1 wins over warmup_ratio.
    expect(factor({ lr_scheduler_type: 'linear', warmup_steps: 4, warmup_ratio: 0.5 }, { global_step: 2, max_steps: 95 })).toBe(0.5);
  });

  it('is the first step without run.global_step, and refuses to guess the run length', () => {
    expect(factor({}, {})).toBe(1); // TRL's default: linear, no warmup, step 0
    expect(() => factor({}, { global_step: 7 })).toThrow(/run\.max_steps: lr_scheduler_type linear at run\.global_step 7 needs the run's length/);
    expect(() => factor({ warmup_ratio: 0.1 }, {})).toThrow(/run\.max_steps: needed for a warmup given as a ratio \(warmup_ratio 0\.1\)/);
  });
});

describe("TRL's AdamW", () => {
  it('reads TrainingArguments names: learning_rate at the schedule, adam betas / epsilon, weight decay off biases and norms', () => {
    const o = trlOptimizer(parseTrlConfig({ learning_rate: 3e-6, adam_beta1: 0.8, adam_beta2: 0.95, adam_epsilon: 1e-6, weight_decay: 0.1 }).values, parseTrlRun({ global_step: 25, max_steps: 100 }).values);
    expect(o).toEqual({ name: 'adamw', lr: 3e-6 * 0.75, betas: [0.8, 0.95], eps: 1e-6, weight_decay: 0.1, momentum: 0, no_decay: 'biases_and_norms' });
    // GRPOConfig's defaults: 1e-6, torch's betas and epsilon, no decay.
    expect(trlOptimizerOf({}, {})).toEqual({ name: 'adamw', lr: 1e-6, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0, momentum: 0, no_decay: 'biases_and_norms' });
  });

  it('refuses optimizers it does not reproduce and betas of 1, naming the field', () => {
    expect(() => trlOptimizerOf({ optim: 'adamw_8bit' }, {})).toThrow(/^config\.optim: expected one of adamw_torch, adamw_torch_fused, sgd, got "adamw_8bit"/);
    expect(() => trlOptimizerOf({ lr_scheduler_type: 'cosine_with_min_lr' }, {})).toThrow(/^config\.lr_scheduler_type: expected one of linear, cosine, constant, constant_with_warmup, got "cosine_with_min_lr"/);
    expect(() => trlOptimizerOf({ lr_scheduler_type: 'cosine', lr_scheduler_kwargs: { min_lr: 1e-7 } }, {})).toThrow(/^config\.lr_scheduler_kwargs: min_lr for cosine is not reproduced/);
    // The loss and the advantages of such a dump do not depend on them: the TRL config still parses.
    expect(parseTrlConfig({ optim: 'paged_adamw_8bit', lr_scheduler_type: 'cosine_with_min_lr', warmup_ratio: null, lr_scheduler_kwargs: { min_lr: 1e-7 } }).values.optim).toBe('paged_adamw_8bit');
    expect(() => trlOptimizerOf({ adam_beta2: 1 }, {})).toThrow(/config\.adam_beta2: expected a number in \[0, 1\)/);
  });

  it('leaves biases and every norm weight undecayed, on the parameter names of each family', () => {
    const families: [string, Record<string, unknown>][] = [
      ['qwen3', { architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', vocab_size: 50, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 8, tie_word_embeddings: true }],
      ['qwen2 (q/k/v biases)', { architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', vocab_size: 50, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1, tie_word_embeddings: false }],
      ['llama', { architectures: ['LlamaForCausalLM'], model_type: 'llama', vocab_size: 50, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 2 }],
      ['gpt2', { architectures: ['GPT2LMHeadModel'], model_type: 'gpt2', vocab_size: 50, n_embd: 16, n_layer: 2, n_head: 2, n_positions: 32 }],
    ];
    for (const [family, raw] of families) {
      const cfg: ModelConfig = parseConfig(raw);
      const specs = paramSpecs(cfg);
      // Independently of the name patterns: the norm groups, q_norm / k_norm and any bias.
      const expected = specs.filter((p) => /norms$|^norm$/.test(p.group) || /(q|k)_norm|bias$/.test(p.name)).map((p) => p.name);
      expect(specs.filter((p) => hfNoDecay(p.name)).map((p) => p.name), family).toEqual(expected);
      expect(expected.length, family).toBeGreaterThan(0);
      expect(specs.some((p) => !hfNoDecay(p.name)), family).toBe(true);
    }
  });
});

describe('which optimizer step a TRL batch takes', () => {
  it("TRL's trainer's when the batch names TrainingArguments' optimizer / schedule or TrainerState, and has no studio optimizer", () => {
    expect(trlOptimizerApplies({}, {})).toBe(false);
    // learning_rate, betas and weight_decay are every AdamW's values: the studio's AdamW takes them.
    expect(trlOptimizerApplies({ learning_rate: 1e-6, weight_decay: 0.1 }, {})).toBe(false);
    expect(trlOptimizerApplies({ lr_scheduler_type: 'linear' }, {})).toBe(true);
    expect(trlOptimizerApplies({ optim: 'adamw_torch' }, {})).toBe(true);
    expect(trlOptimizerApplies({}, { global_step: 3 })).toBe(true);
    expect(trlOptimizerApplies({}, { global_step: null })).toBe(false);
    expect(trlOptimizerApplies({ optimizer: { name: 'adamw', lr: 0.01 }, lr_scheduler_type: 'cosine' }, { global_step: 3 })).toBe(false);
  });
});
