// position-ids-shift: a model with learned absolute positions (GPT-2 family) scored with arange position
// ids under left padding sees every left-padded row shifted by its pad count — different log-probs than
// at generation, where HF generate uses cumsum(attention_mask) − 1. RoPE models are unaffected (relative).
import type { Rule } from '../types.ts';
import { listSamples, maxOf, msg } from '../util.ts';

/** HF model types whose position embeddings are absolute (a learned table indexed by position id). */
export const ABSOLUTE_POSITION_MODELS = new Set(['gpt2', 'gpt_bigcode', 'gpt_neo', 'opt', 'biogpt', 'xglm', 'bert', 'roberta']);

export const positionIdsShift: Rule = {
  id: 'position-ids-shift',
  title: 'Absolute positions shifted by left padding',
  severity: 'warning',
  description: 'An absolute-position model (GPT-2 family) is scored with arange position ids while prompts are left-padded, so positions differ from generation by the pad count.',
  seed: 'golden tiny-gpt2 (arange_position_ids: what TRL\'s forward gets); 002 (left-padding boundary bugs)',
  check(ctx) {
    const modelType = ctx.options.model_type ?? ctx.batch.config?.model_type;
    const mode = ctx.options.position_ids ?? ctx.batch.config?.position_ids;
    if (!modelType) return 'model_type unknown (set config.model_type)';
    if (!ABSOLUTE_POSITION_MODELS.has(modelType) || mode !== 'arange') return [];
    const lengths = ctx.batch.prompt_ids.map((row, b) => (ctx.batch.prompt_mask ? ctx.batch.prompt_mask[b].reduce((s, m) => s + m, 0) : row.length));
    const P = maxOf(ctx.batch.prompt_ids.map((r) => r.length));
    const shifted = lengths.map((n, b) => (n < P ? b : -1)).filter((b) => b >= 0);
    if (shifted.length === 0) return [];
    return [{
      rule: this.id,
      severity: 'warning',
      message: msg`${modelType} has absolute position embeddings and the batch uses arange position ids: ${shifted.length} left-padded row(s) are shifted (samples ${listSamples(shifted)})`,
      hint: 'Pass position_ids = cumsum(attention_mask) − 1 (pads set to 1) in the scoring forward, as HF generate does; TRL passes none, which is arange.',
    }];
  },
};
