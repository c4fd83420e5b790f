// What-if on the same batch: once the update has reached its loss stage, change any loss-side setting
// (loss type, β, ε, δ, KL estimator, IS level, advantage scaling) and the worker recomputes every per-token
// term from the log-probs of that update's policy forward — no resampling, no forward, no weight change.
// The table puts the current settings beside the what-if (every aggregation, mean KL, clipping, the
// gradient norm w.r.t. the log-probs and the rows whose gradient moved most); the grid's heat shows the
// per-token difference (what-if Δ loss, Δ ∂loss/∂logp); "Apply" makes the what-if the next update's settings.
// The trainer's objective is recomputed too; the trainer itself is a what-if (verl or OpenRLHF on the same
// batch, from that trainer's defaults under the update's base and its trainer-independent values): its column
// "current" is then empty, since the update ran another. The form's fields are the loss panel's rows (one table,
// one check) and show the settings the what-if computes with: the update's as it ran (src/store/derived.ts whatIfOf),
// never edits made in the settings form since.
import { useMemo } from 'react';
import { useStudio } from '../../store/index.ts';
import type { WhatIfResult, WhatIfSide } from '../../bridge/protocol.ts';
import { AGGREGATIONS, configTable, ranValue, settingOf, TRAINERS, whatIfOf, type SettingSpec } from '../../store/vocabulary.ts';
import { applyWhatIf, runWhatIf } from '../../store/controller.ts';
import { aggregationTitle } from '../explain.ts';
import { Section, SelectField, fmt } from '../fields.tsx';
import { SettingField } from '../SettingField.tsx';

/** The what-if's own values (the layer it added over the update's settings). */
function editsOfWhatIf(w: WhatIfResult): Record<string, unknown> {
  return Object.fromEntries(Object.entries(w.settings.config).filter(([k]) => w.settings.provenance[`config.${k}`]?.label === 'what-if'));
}

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
      <table className="dense" data-testid="whatif-table" data-loss-type={String(ranValue(w.settings, 'loss_type'))} data-ms={w.ms.toFixed(1)}>
        <thead>
          <tr>
            <th>term</th>
            <th>current ({ranType})</th>
            <th>what-if ({String(ranValue(w.settings, 'loss_type'))})</th>
            <th>Δ</th>
          </tr>
        </thead>
        <tbody>
          {row('loss (drives the gradient)', w.current.terms.loss, w.whatif.terms.loss, 'the loss under each side’s own loss_type', 'chosen')}
          {AGGREGATIONS.map((a) => row(a, w.current.terms.losses[a], w.whatif.terms.losses[a], aggregationTitle(a)))}
          {w.trainer.whatif && row(`${w.trainer.trainer} loss (trainer objective)`, w.trainer.current?.loss ?? NaN, w.trainer.whatif.loss, w.trainer.current ? 'the trainer’s objective: the update’s (current) and under the what-if settings' : `the update ran another trainer’s objective: ${w.trainer.trainer}’s is shown under the what-if settings only`)}
          {row('mean KL', cur.meanKl, next.meanKl, 'Σ M·KL / Σ M with each side’s estimator')}
          {row('clipped tokens', cc.region, nc.region, 'tokens whose ratio is outside [1 − ε_low, 1 + ε_high] on the side the advantage makes binding')}
          {row('‖∂loss/∂logp‖₂', cur.grad, next.grad, 'gradient norm w.r.t. the per-token log-probs (before the backward through the model)')}
          {w.trainer.current?.dlogp && w.trainer.whatif?.dlogp && row(`‖∂loss/∂logp‖₂ (${w.trainer.trainer})`, norm(w.trainer.current.dlogp), norm(w.trainer.whatif.dlogp), 'the trainer preset’s per-token gradient norm: the update’s preset and the form’s under the what-if settings')}
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
          {w.trainer.offer && (
            <button className="small" data-testid="whatif-offer" onClick={() => void runWhatIf({ ...editsOfWhatIf(w), ...w.trainer.offer }, w.trainer.trainer)}>
              use {Object.entries(w.trainer.offer).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(', ')}
            </button>
          )}
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
  const runSettings = useStudio((s) => s.runSettings);
  const ran = runSettings?.settings ?? null;
  const form = useStudio((s) => s.whatIfSettings);
  const w = useStudio((s) => s.whatIf);
  const stepFrom = useStudio((s) => s.stepFrom);
  const imported = useStudio((s) => s.imported);
  const task = useStudio((s) => s.task);
  const trainer = form?.trainer ?? ran?.trainer ?? 'trl';
  const edits = useMemo(() => form?.edits ?? {}, [form]);
  // The form shows the settings the what-if computes with: the update's as it ran, under the what-if's trainer, then its own values.
  const resolved = useMemo(() => whatIfOf({ runSettings, stepFrom, imported, task }, trainer, edits), [runSettings, stepFrom, imported, task, trainer, edits]);
  if (!hasLoss || !ran) {
    return (
      <Section title="What-if (same batch)" open={false}>
        <div className="muted small">run the update to its loss stage, then try other loss settings on the same completions</div>
      </Section>
    );
  }
  // Where the what-if's settings cannot be formed (the page's error says why), its values as typed over the update's.
  const shown = (spec: SettingSpec) =>
    resolved && 'settings' in resolved ? settingOf(resolved.settings, 'config', spec.name) : spec.name in edits ? { value: edits[spec.name], provenance: { origin: 'edited' as const, label: 'what-if' } } : settingOf(ran, 'config', spec.name);
  const rows = configTable(trainer).filter((s) => s.form === 'loss' && s.scope !== 'optimizer');
  return (
    <Section title="What-if (same batch)">
      <div className="grid2" data-testid="whatif-form">
        <SelectField label="trainer" value={trainer} options={TRAINERS} testId="whatif-trainer" title="recompute the objective of another trainer on the same batch (from its defaults)" onChange={(t) => void runWhatIf({}, t)} />
        {rows.map((spec) => {
          const { value, provenance } = shown(spec);
          return <SettingField key={`${trainer}.${spec.name}`} detached spec={spec} where="config" value={value} provenance={provenance} testId={`whatif-field-${spec.name}`} onCommit={(v) => void runWhatIf(v === undefined ? Object.fromEntries(Object.entries(edits).filter(([k]) => k !== spec.name)) : { ...edits, [spec.name]: v })} />;
        })}
      </div>
      <div className="row">
        <button disabled={!form} onClick={applyWhatIf} data-testid="whatif-apply" title="make these the settings of the next update">
          Apply to settings
        </button>
        <button disabled={!form} onClick={() => void runWhatIf({}, ran.trainer)} title="back to the settings the update ran with">
          Back to current
        </button>
      </div>
      {w && <WhatIfTable w={w} ranType={String(ranValue(ran, 'loss_type'))} />}
    </Section>
  );
}
