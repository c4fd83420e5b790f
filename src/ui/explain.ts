// The page's explanations in one place: every aggregation's formula with the trainer code it follows,
// and the grid / inspector terms a first-time reader stumbles on. Tooltips and the report read these,
// so a formula is written once. M = completion_mask, L = per_token_loss, n_b = Σ_t M[b, t], N = Σ M,
// B = rows, B' = rows with n_b > 0, T = padded completion width, L_max = max_completion_length.
import type { LossType } from '../kernels/types.ts';

export const AGGREGATION_HELP: Record<LossType, { formula: string; source: string }> = {
  grpo: { formula: '(1/B) Σ_b (Σ_t L·M / n_b)', source: 'TRL loss_type="grpo" (huggingface/trl trl/trainer/grpo_trainer.py _compute_loss)' },
  bnpo: { formula: 'Σ L·M / N (this micro-batch)', source: 'TRL loss_type="bnpo" (trl/trainer/grpo_trainer.py)' },
  dr_grpo: { formula: 'Σ L·M / (B · L_max)', source: 'TRL loss_type="dr_grpo", Dr. GRPO (trl/trainer/grpo_trainer.py)' },
  dapo: { formula: 'Σ L·M / num_items_in_batch (tokens of the whole generation batch; default N)', source: 'TRL loss_type="dapo" (trl/trainer/grpo_trainer.py)' },
  'token-mean': { formula: 'Σ L·M / N', source: 'verl loss_agg_mode="token-mean" (volcengine/verl verl/trainer/ppo/core_algos.py agg_loss)' },
  'seq-mean-token-sum': { formula: "(1/B') Σ_b Σ_t L·M", source: 'verl loss_agg_mode="seq-mean-token-sum" (core_algos.py agg_loss)' },
  'seq-mean-token-mean': { formula: "(1/B') Σ_b (Σ_t L·M / n_b)", source: 'verl loss_agg_mode="seq-mean-token-mean" (core_algos.py agg_loss)' },
  'seq-mean-token-sum-norm': { formula: 'Σ L·M / loss_scale_factor (default T, the padded width)', source: 'verl loss_agg_mode="seq-mean-token-sum-norm" (core_algos.py agg_loss)' },
};

export const aggregationTitle = (a: LossType): string => `${a}: ${AGGREGATION_HELP[a].formula}\n${AGGREGATION_HELP[a].source}`;

export const TERM_HELP = {
  position: 'position: the column in prompt ⧺ completion as the trainer concatenates them (left-padded prompts, right-padded completions)',
  position_id: 'position id: what the model embeds (RoPE / learned positions): with position_ids from the attention mask, padding does not count, so it can differ from the column',
  weight: '∂loss/∂per_token_loss under the aggregation the run used: what this token contributes to the gradient per unit of its loss',
  masked: 'Σm = Σ_t completion_mask: the tokens of this row the loss counts',
} as const;
