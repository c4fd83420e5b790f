// The trainer objectives on log-probs the studio's forward already scored: what the step's loss stage, the
// what-if and the loss table show for the chosen trainer preset. Same kernels as `grpo-studio loss` (TRL's
// trl_loss_forward; verl's and OpenRLHF's ppo_loss_forward through withScoredBackend), only the gather from
// logits is replaced by the forward's per-token log-probs and entropies.
import type { Gpu } from '../../gpu/context.ts';
import { SubmitGroup, type Seat } from '../../gpu/submit_group.ts';
import { TRL_LOSS_TYPES } from '../../kernels/types.ts';
import { OPENRLHF_SETTINGS } from '../settings/openrlhf.ts';
import { specOf } from '../settings/table.ts';
import type { TrainerId } from '../settings/types.ts';
import { VERL_AGG_MODES, VERL_LOSS_MODES } from '../settings/verl.ts';
import { openrlhfObjective } from './openrlhf.ts';
import { withScoredBackend } from './ppo_run.ts';
import { trlLossFromLogps } from './trl.ts';
import type { ScoredLogps, TrainerInputs, TrainerLossOutputs } from './types.ts';
import { verlObjective } from './verl.ts';

/** The trainer's objective (forward only) on scored log-probs; with `seat`, its kernels join a shared submit and readback. */
export function trainerLossFromLogps(gpu: Gpu, c: TrainerInputs, scored: ScoredLogps, seat?: Seat): Promise<TrainerLossOutputs> {
  switch (c.trainer) {
    case 'trl':
      return trlLossFromLogps(gpu, c, scored, seat);
    case 'verl':
      return withScoredBackend(gpu, c, scored, 'config.temperature', (be) => verlObjective(be, c, { backward: false }), seat);
    case 'openrlhf':
      return withScoredBackend(gpu, c, scored, 'config.rollout.temperature', (be) => openrlhfObjective(be, c, { backward: false }), seat);
  }
}

/** One column of the loss table: a loss type of the trainer, as the config fields it sets, with its formula. */
export interface LossColumn {
  label: string;
  patch: Record<string, unknown>;
  formula: string;
}

/** Each loss type's formula in one line (the tooltip of its column); sources as in docs/trainers/*.md. */
const FORMULAS: Record<string, string> = {
  grpo: 'L = −min(min(r, δ)·A, clip(r, 1 − ε, 1 + ε_high)·A); mean_b(Σ_t L·M / n_b) / gas (trl grpo_trainer.py _compute_loss)',
  bnpo: 'Σ L·M / Σ M of the micro-batch / gas',
  dr_grpo: 'Σ L·M / (B · max_completion_length · gas)',
  dapo: 'Σ L·M / (num_items_in_batch / num_processes)',
  cispo: 'L = −min(r, ε_high).detach()·A·logp; Σ L·M / (num_items_in_batch / num_processes)',
  sapo: 'L = −σ(τ(r − 1))·4/τ·A (τ by the sign of A); mean_b(Σ_t L·M / n_b) / gas',
  luspo: 'mean over B·T of L·n_b (padding included) / gas',
  vespo: 'L = −φ·A·logp, φ = exp(λ + k·log w − λ·w) detached; Σ L·M / (num_items_in_batch / num_processes)',
  vanilla: 'dual-clip PPO: max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high)), A < 0: min(·, −A·clip_ratio_c) (verl core_algos.py)',
  gspo: 'sequence ratio exp(mean_t(logp − old)) per token, clipped (verl: seq-mean-token-mean; OpenRLHF: per-sample mean)',
  gpg: 'L = −A·logp (no ratio)',
  clip_cov: 'vanilla with the gradient cut on tokens whose (A − Ā)(logp − l̄) lies in (clip_cov_lb, clip_cov_ub)',
  kl_cov: '−A·r + ppo_kl_coef·|logp − old| on the top kl_cov_ratio covariance tokens',
  geo_mean: 'L_b = −A·exp(mean_t clip(logp − old)) per sequence (GMPO geometric-mean ratio)',
  ppo: 'OpenRLHF PolicyLoss: −min(r·A, clip(r, 1 − ε_low, 1 + ε_high)·A), dual clip when set; token-mean',
};
const VERL_AGG: Record<string, string> = {
  'token-mean': 'Σ L·M / Σ M',
  'seq-mean-token-sum': 'mean_b Σ_t L·M',
  'seq-mean-token-mean': 'mean_b (Σ_t L·M / Σ_t M)',
  'seq-mean-token-sum-norm': 'Σ L·M / loss_scale_factor (default T)',
};

/** Every loss type of `trainer` (verl: every policy_loss mode × loss_agg_mode). */
export function lossColumns(trainer: TrainerId): LossColumn[] {
  switch (trainer) {
    case 'trl':
      return TRL_LOSS_TYPES.map((t) => ({ label: t, patch: { loss_type: t }, formula: FORMULAS[t] }));
    case 'verl':
      return VERL_LOSS_MODES.flatMap((m) => VERL_AGG_MODES.map((a) => ({ label: `${m} · ${a}`, patch: { loss_mode: m, loss_agg_mode: a }, formula: `${FORMULAS[m]}; ${a}: ${VERL_AGG[a]}` })));
    case 'openrlhf':
      return (specOf(OPENRLHF_SETTINGS, 'actor.policy_loss_type').values ?? []).map((t) => ({ label: t, patch: { 'actor.policy_loss_type': t }, formula: FORMULAS[t] }));
  }
}

/** A column's loss, or why the trainer cannot form it on this batch (its SettingsError, one line). */
export interface LossCell {
  label: string;
  patch: Record<string, unknown>;
  formula: string;
  loss: number | null;
  error: string | null;
}

/**
 * GPU bytes one column holds per token while its group runs: its buffers (a PPO column's log-probs,
 * entropies, 8 inputs, 4 outputs, dlogp and dentropy: 64; TRL's 48) and its part of the shared readback's
 * staging (24), rounded up.
 */
const COLUMN_BYTES_PER_TOKEN = 96;
/** Columns share one submit and readback up to this many bytes; a bigger table runs in several groups, one after another. */
const GROUP_BYTES = 64 * 2 ** 20;

/**
 * The loss table: the chosen trainer's every loss type on the same completions, the rest of the config as
 * given. The columns' kernels go in ONE submit with ONE readback (a SubmitGroup seat each) while their
 * buffers fit GROUP_BYTES (every column at 8 × 512 tokens: 170 columns fit), else in as few groups as fit,
 * one after another. In a group the columns run concurrently up to their reads, and a column the trainer
 * refuses releases its seat with its reason.
 */
export async function lossTable(gpu: Gpu, c: TrainerInputs, scored: ScoredLogps, opts: { groupBytes?: number /* tests only */; columns?: LossColumn[] } = {}): Promise<LossCell[]> {
  const columns = opts.columns ?? lossColumns(c.trainer);
  const perGroup = Math.max(1, Math.floor((opts.groupBytes ?? GROUP_BYTES) / (COLUMN_BYTES_PER_TOKEN * Math.max(1, c.B * c.T))));
  const cells: LossCell[] = [];
  for (let first = 0; first < columns.length; first += perGroup) {
    const chunk = columns.slice(first, first + perGroup);
    const group = new SubmitGroup(gpu, `loss table (${c.trainer})`, chunk.length);
    cells.push(
      ...(await Promise.all(
        chunk.map(async (col): Promise<LossCell> => {
          const seat = group.seat();
          try {
            const r = await trainerLossFromLogps(gpu, { ...c, config: { ...c.config, ...col.patch } }, scored, seat);
            return { ...col, loss: r.loss, error: null };
          } catch (e) {
            if (!(e instanceof Error) || e.name !== 'SettingsError') throw e;
            return { ...col, loss: null, error: e.message };
          } finally {
            seat.release();
          }
        }),
      )),
    );
  }
  return cells;
}
