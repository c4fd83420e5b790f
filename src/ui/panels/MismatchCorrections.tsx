// The mismatch explorer's corrections, side by side (issue 22 §4): what each trainer's sampler–trainer
// correction (TRL's vLLM importance sampling, verl's rollout IS and rejection sampling, OpenRLHF's tis / icepop /
// seq-mask-tis: src/grpo/mismatch/corrections.ts, whose table the worker sends) would do on the batch on screen —
// tokens masked or truncated, rows masked, effective sample size, mean weight, the trainer's loss with it off and
// on, and how far the per-token gradient weight ∂loss/∂logp moves. Each correction's live controls are its
// trainer's own table rows (rowOf), drawn by the table-driven SettingField, so a control takes exactly the
// values the trainer's table accepts; an edit is recomputed in the worker (the loss on the GPU).
import { useEffect } from 'react';
import { useStudio } from '../../store/index.ts';
import { correctionsShown } from '../../store/derived.ts';
import { runCorrections } from '../../store/controller.ts';
import { rowOf } from '../../store/vocabulary.ts';
import type { CorrectionSummary } from '../../bridge/protocol.ts';
import type { Correction } from '../../grpo/mismatch/corrections.ts';
import { fmt } from '../fields.tsx';
import { SettingField } from '../SettingField.tsx';

const count = (n: number | null, of: number | null) => (n === null ? '—' : of ? `${n} (${((100 * n) / of).toFixed(1)} %)` : String(n));

function EffectRows({ c, e, busy }: { c: Correction; e: CorrectionSummary | undefined; busy: boolean }) {
  const g = e?.gradient;
  return (
    <>
      <tr className="correction-label" data-correction={c.id} data-busy={busy ? '1' : '0'}>
        <td colSpan={7} title={c.source}>
          <b>{c.label}</b>
          {e?.level ? <span className="muted"> · {e.level} level</span> : null}
          {busy && <span className="muted"> · computing…</span>}
        </td>
      </tr>
      {e?.error ? (
        <tr>
          <td colSpan={7} className="bad" data-testid="correction-error">
            {e.error}
          </td>
        </tr>
      ) : (
        <tr data-correction-effect={c.id} data-tokens={e?.tokens ?? ''} data-masked={e?.masked ?? ''} data-truncated={e?.truncated ?? ''}>
          <td className="num" title="loss tokens given weight 0 (mask modes, rejection sampling); rows whose every loss token is masked">
            {count(e?.masked ?? null, e?.tokens ?? null)}
            {e?.rows_masked ? ` · ${e.rows_masked} rows` : ''}
          </td>
          <td className="num" title="loss tokens whose weight was clamped to a bound">
            {count(e?.truncated ?? null, e?.tokens ?? null)}
          </td>
          <td className="num" title="effective sample size (Σw)² / (n·Σw²) of the correction weights over the loss tokens">
            {fmt(e?.ess, 3)}
          </td>
          <td className="num" title="mean correction weight over the loss tokens">
            {fmt(e?.mean_weight, 3)}
          </td>
          <td className="num" title={`the trainer's loss at ratio 1 (policy = trainer side) with the correction off → on${e?.loss_note ? `: ${e.loss_note}` : ''}`}>
            {e?.loss_off === null || e?.loss_on === null || !e ? '—' : `${fmt(e.loss_off, 3)} → ${fmt(e.loss_on, 3)}`}
          </td>
          <td className="num" title="mean |Δ ∂loss/∂logp| over the loss tokens (on − off)">
            {fmt(g?.mean_abs, 3)}
          </td>
          <td className="num" title="∂loss/∂logp on / off over the loss tokens where off ≠ 0: min … max">
            {g && g.factor.n ? `${fmt(g.factor.min, 3)} … ${fmt(g.factor.max, 3)}` : '—'}
          </td>
        </tr>
      )}
    </>
  );
}

/** The controls of one correction: its rows of the trainer's table, over the correction's resolved values. */
function Controls({ c, e, edits }: { c: Correction; e: CorrectionSummary | undefined; edits: Record<string, unknown> }) {
  return (
    <details className="correction-controls">
      <summary className="small">{c.label}: controls</summary>
      <div className="grid2">
        {c.controls.map((name) => {
          const spec = rowOf(c.trainer, 'config', name);
          if (!spec) return null;
          const edited = name in edits;
          return (
            <SettingField
              key={name}
              detached
              spec={spec}
              where="config"
              value={edited ? edits[name] : e?.settings[name] ?? c.settings[name] ?? spec.default}
              provenance={edited ? { origin: 'edited', label: 'correction' } : { origin: 'preset', label: `${c.label}, over the batch's settings` }}
              testId={`correction-field-${c.id}-${name}`}
              onCommit={(v) => void runCorrections({ id: c.id, edits: v === undefined ? Object.fromEntries(Object.entries(edits).filter(([k]) => k !== name)) : { ...edits, [name]: v } })}
            />
          );
        })}
      </div>
    </details>
  );
}

export function MismatchCorrections({ analysis }: { analysis: object }) {
  const state = useStudio(correctionsShown);
  // Every correction once per analysis (a new batch, a recompute); edits then ask for one correction at a time.
  useEffect(() => {
    if (!state) void runCorrections();
  }, [analysis]);
  if (!state || state.table.length === 0) return <div className="muted small">{state?.busy.length ? 'weighing the corrections in the worker…' : ''}</div>;
  return (
    <>
      <table className="dense mismatch-corrections" data-testid="mismatch-corrections">
        <thead>
          <tr>
            <th>masked</th>
            <th>truncated</th>
            <th>ESS</th>
            <th>mean w</th>
            <th>loss off → on</th>
            <th>mean |Δ∂|</th>
            <th>∂ on/off</th>
          </tr>
        </thead>
        <tbody>
          {state.table.map((c) => (
            <EffectRows key={c.id} c={c} e={state.effects[c.id]} busy={state.busy.includes(c.id) || state.busy.includes('all')} />
          ))}
        </tbody>
      </table>
      {state.table.map((c) => (
        <Controls key={c.id} c={c} e={state.effects[c.id]} edits={state.edits[c.id] ?? {}} />
      ))}
    </>
  );
}
