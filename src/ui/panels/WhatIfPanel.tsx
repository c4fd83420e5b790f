// What-if on the same batch: once the update has reached its loss stage, change any loss-side setting
// (loss type, β, ε, δ, KL estimator, IS level, advantage scaling) and the worker recomputes every per-token
// term from the log-probs of that update's policy forward — no resampling, no forward, no weight change.
// The table puts the current settings beside the what-if (every aggregation, mean KL, clipping, the
// gradient norm w.r.t. the log-probs and the rows whose gradient moved most); the grid's heat shows the
// per-token difference (what-if Δ loss, Δ ∂loss/∂logp); "Apply" makes the what-if the next update's settings.
// The trainer preset's loss is recomputed too: the update's preset beside the one the form has now.
import { useMemo } from 'react';
import { useStudio } from '../../store/index.ts';
import type { LossSettings, WhatIfResult, WhatIfSide } from '../../worker/protocol.ts';
import { AGGREGATIONS } from '../../store/vocabulary.ts';
import { applyWhatIf, runWhatIf } from '../../store/controller.ts';
import { aggregationTitle } from '../explain.ts';
import { NumberField, Section, SelectField, fmt } from '../fields.tsx';

/** Mean KL over tokens with completion_mask = 1, ‖∂loss/∂logp‖₂ in all and per row. */
function summary(side: WhatIfSide, mask: Int32Array, B: number, C: number) {
  const { per_token_kl: kl, dlogp } = side.terms;
  let klSum = 0;
  let n = 0;
  let total = 0;
  const rows = new Float64Array(B);
  for (let i = 0; i < B * C; i++) {
    if (!mask[i]) continue;
    n++;
    klSum += kl?.[i] ?? 0;
    rows[Math.floor(i / C)] += dlogp[i] * dlogp[i];
    total += dlogp[i] * dlogp[i];
  }
  return { meanKl: kl ? klSum / Math.max(1, n) : NaN, grad: Math.sqrt(total), rowGrad: rows.map(Math.sqrt) };
}

const norm = (a: Float32Array) => Math.sqrt(a.reduce((s, x) => s + x * x, 0));

function WhatIfTable({ w, ranType }: { w: WhatIfResult; ranType: string }) {
  const padded = useStudio((s) => s.run.assemble?.padded);
  const sums = useMemo(() => (padded ? [summary(w.current, padded.completion_mask, padded.B, padded.C), summary(w.whatif, padded.completion_mask, padded.B, padded.C)] : null), [w, padded]);
  if (!sums) return null;
  const [cur, next] = sums;
  const [cc, nc] = [w.current.terms.clip_counts, w.whatif.terms.clip_counts];
  const moved = Array.from(next.rowGrad, (g, b) => ({ b, d: g - cur.rowGrad[b] })).sort((x, y) => Math.abs(y.d) - Math.abs(x.d)).slice(0, 5);
  const row = (k: string, a: number, b: number, title?: string, cls = '') => (
    <tr key={k} className={cls} title={title}>
      <td>{k}</td>
      <td className="num">{fmt(a, 4)}</td>
      <td className="num">{fmt(b, 4)}</td>
      <td className="num">{fmt(b - a, 3)}</td>
    </tr>
  );
  return (
    <>
      <table className="dense" data-testid="whatif-table" data-loss-type={w.settings.loss_type} data-ms={w.ms.toFixed(1)}>
        <thead>
          <tr>
            <th>term</th>
            <th>current ({ranType})</th>
            <th>what-if ({w.settings.loss_type})</th>
            <th>Δ</th>
          </tr>
        </thead>
        <tbody>
          {row('loss (drives the gradient)', w.current.terms.loss, w.whatif.terms.loss, 'the loss under each side’s own loss_type', 'chosen')}
          {AGGREGATIONS.map((a) => row(a, w.current.terms.losses[a], w.whatif.terms.losses[a], aggregationTitle(a)))}
          {w.trainer.current && w.trainer.whatif && row(`${w.trainer.preset.trainer} loss (trainer preset)`, w.trainer.current.loss, w.trainer.whatif.loss, 'the trainer preset’s objective: the update’s preset (current) and the form’s preset under the what-if settings')}
          {row('mean KL', cur.meanKl, next.meanKl, 'Σ M·KL / Σ M with each side’s estimator')}
          {row('clipped tokens', cc.region, nc.region, 'tokens whose ratio is outside [1 − ε_low, 1 + ε_high] on the side the advantage makes binding')}
          {row('‖∂loss/∂logp‖₂', cur.grad, next.grad, 'gradient norm w.r.t. the per-token log-probs (before the backward through the model)')}
          {w.trainer.current?.dlogp && w.trainer.whatif?.dlogp && row(`‖∂loss/∂logp‖₂ (${w.trainer.preset.trainer})`, norm(w.trainer.current.dlogp), norm(w.trainer.whatif.dlogp), 'the trainer preset’s per-token gradient norm: the update’s preset and the form’s under the what-if settings')}
        </tbody>
      </table>
      <div className="small muted" data-testid="whatif-rows">
        rows whose ‖∂loss/∂logp‖ moved most: {moved.map((m) => `#${m.b} ${m.d >= 0 ? '+' : ''}${fmt(m.d, 3)}`).join(' · ')}
      </div>
      <div className="small muted">
        recomputed in {w.ms.toFixed(0)} ms from the update's log-probs (self-check |current − loss stage| = {fmt(w.check, 2)})
      </div>
      {w.trainer.error && (
        <div className="bad small" data-testid="whatif-trainer-error">
          {w.trainer.error}
        </div>
      )}
      {w.notes.map((n) => (
        <div key={n} className="warn small">
          {n}
        </div>
      ))}
    </>
  );
}

export function WhatIfPanel() {
  const hasLoss = useStudio((s) => !!s.run.loss);
  const ran = useStudio((s) => s.runSettings?.loss ?? null);
  const form = useStudio((s) => s.whatIfSettings);
  const w = useStudio((s) => s.whatIf);
  if (!hasLoss || !ran) {
    return (
      <Section title="What-if (same batch)" open={false}>
        <div className="muted small">run the update to its loss stage, then try other loss settings on the same completions</div>
      </Section>
    );
  }
  const l = form ?? ran;
  const set = (patch: Partial<LossSettings>) => void runWhatIf({ ...l, ...patch });
  return (
    <Section title="What-if (same batch)">
      <div className="grid2" data-testid="whatif-form">
        <SelectField label="loss_type" value={l.loss_type} options={AGGREGATIONS} titles={aggregationTitle} testId="whatif-loss-type" onChange={(v) => set({ loss_type: v })} />
        <NumberField detached label="β" value={l.beta} min={0} testId="whatif-beta" onChange={(v) => set({ beta: v! })} />
        <NumberField detached label="ε low" value={l.epsilon_low} min={0} max={0.999} onChange={(v) => set({ epsilon_low: v! })} />
        <NumberField detached label="ε high" value={l.epsilon_high} min={0} onChange={(v) => set({ epsilon_high: v! })} />
        <NumberField detached label="δ (ratio cap)" value={l.delta} nullable min={1} onChange={(v) => set({ delta: v })} />
        <SelectField label="KL estimator" value={l.kl_estimator} options={['k1', 'k2', 'k3'] as const} onChange={(v) => set({ kl_estimator: v })} />
        <SelectField label="importance sampling" value={l.importance_sampling_level} options={['token', 'sequence'] as const} onChange={(v) => set({ importance_sampling_level: v })} />
        <SelectField label="scale_rewards" value={l.scale_rewards} options={['group', 'batch', 'none'] as const} onChange={(v) => set({ scale_rewards: v })} />
      </div>
      <div className="row">
        <button disabled={!form} onClick={applyWhatIf} data-testid="whatif-apply" title="make these the loss settings of the next update">
          Apply to settings
        </button>
        <button disabled={!form} onClick={() => void runWhatIf(ran)} title="back to the settings the update ran with">
          Back to current
        </button>
      </div>
      {w && <WhatIfTable w={w} ranType={ran.loss_type} />}
    </Section>
  );
}
