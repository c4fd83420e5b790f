// trainer-nonfinite: tokens where the trainer's own float32 code makes the loss NaN or ±inf although every
// input is finite. OpenRLHF's vLLM IS correction (PolicyLoss.forward, OpenRLHF/OpenRLHF
// openrlhf/models/loss.py at 3c3be62) takes torch.exp(old − rollout) in float32: past a log-ratio of
// ln(FLT_MAX) ≈ 88.72 it is inf, and icepop's inf · 0 (or seq-mask-tis' mask · inf) is NaN or inf; the sum of
// the loss over the batch is then NaN or inf, padding included (NaN · 0 = NaN). The tokens come from the
// objective's own rule (src/grpo/trainers/openrlhf_overflow.ts); settings are read as the importance-sampling
// rule reads them (src/doctor/trainer.ts). Row by row, linear in the batch.
import { openrlhfIsOverflow } from '../../grpo/trainers/openrlhf_overflow.ts';
import type { OpenrlhfConfig } from '../../grpo/settings/openrlhf.ts';
import { SettingsError } from '../../grpo/settings/types.ts';
import { trainerOfBatch } from '../../grpo/settings/effective.ts';
import { settingOf } from '../trainer.ts';
import type { Finding, Rule } from '../types.ts';
import { firstRun, msg, showNumber } from '../util.ts';

const ID = 'trainer-nonfinite';
const SHOWN = 4;

export const trainerNonfinite: Rule = {
  id: ID,
  title: "The trainer's own float32 arithmetic makes the loss NaN or Inf",
  severity: 'error',
  description: 'OpenRLHF icepop / seq-mask-tis: where exp(old − rollout) overflows float32 (log-ratio > 88.72) the IS weight is inf, and icepop’s inf · 0 is NaN: the trainer’s loss is NaN (or ±inf), though every input is finite.',
  seed: 'OpenRLHF PolicyLoss (openrlhf/models/loss.py): vllm_is = exp(rollout_log_ratio) · mask',
  check(ctx) {
    const { batch } = ctx;
    if (trainerOfBatch(batch) !== 'openrlhf') return [];
    try {
      const get = <K extends keyof OpenrlhfConfig>(k: K) => settingOf<NonNullable<OpenrlhfConfig[K]>>(batch, 'openrlhf', k) as OpenrlhfConfig[K];
      // gspo takes no IS weight; tis clamps inf to the upper threshold.
      if (!get('algo.advantage.is_correction_enable') || get('actor.policy_loss_type') === 'gspo') return [];
      const type = get('algo.advantage.is_correction_type');
      if (type === 'tis') return [];
      if (!batch.old_per_token_logps || !batch.sampling_per_token_logps) return 'needs both old_per_token_logps and sampling_per_token_logps';
      const [lo, hi] = get('algo.advantage.is_correction_threshold');
      const out: Finding[] = [];
      for (let b = 0; b < ctx.B; b++) {
        const old = batch.old_per_token_logps[b] ?? [];
        const s = batch.sampling_per_token_logps[b] ?? [];
        const m = batch.completion_mask[b] ?? [];
        const T = Math.min(old.length, s.length, m.length);
        const hit = openrlhfIsOverflow(old, s, m, 1, T, type, [lo, hi]);
        if (hit.length === 0) continue;
        const listed = hit.slice(0, SHOWN).map((o) => `position ${o.t}: log-ratio ${showNumber(o.logRatio)}`).join(', ');
        const outcome = Number.isNaN(hit[0].weight)
          ? `its IS weight there is inf · 0 = NaN (${type === 'icepop' ? 'icepop: inf is above the upper threshold' : 'seq-mask-tis: the sequence is out of range'}), so OpenRLHF's loss and these tokens' gradient are NaN`
          : "seq-mask-tis keeps the sequence, so those tokens' loss is ±inf (NaN where the advantage is 0 or the token is masked), and OpenRLHF's loss is ±inf or NaN";
        out.push({
          rule: ID,
          severity: 'error',
          sample: b,
          span: firstRun(hit.map((o) => o.t))!.span,
          message: msg`sample ${b}: exp(old − rollout) overflows float32 at ${hit.length} token(s) (${listed}${hit.length > SHOWN ? ', …' : ''}; > ln(FLT_MAX) ≈ 88.72) under is_correction_type = ${type}: ${outcome}`,
          hint: 'A log-ratio this large means the rollout log-probs are not the sampler’s for these tokens (−inf clipped to a large negative, misaligned or unmasked padding), or the trainer’s are wrong. Fix the inputs; the studio reports OpenRLHF’s NaN rather than a finite loss OpenRLHF would not compute.',
        });
      }
      return out;
    } catch (e) {
      if (e instanceof SettingsError) return `${e.message}: the correction cannot be reproduced`;
      throw e;
    }
  },
};
