// The trainer preset's loss on the update's completions: the chosen trainer's own loss (or the setting that
// stops it, named), and the loss table — every loss type of that trainer side by side on the same log-probs
// (TRL's loss_type values; verl's policy-loss modes × loss_agg_mode; OpenRLHF's policy_loss_type), each with
// its formula as the tooltip and the preset's own one marked.
import { useStudio } from '../../store/index.ts';
import { baseKindOf, TRAINER_TABLES } from '../../store/vocabulary.ts';
import type { TrainerView } from '../../bridge/protocol.ts';
import { Section, fmt } from '../fields.tsx';

type Cell = TrainerView['table'][number];

/** Whether the cell is the preset's own loss type (its patch fields at the values the objective read). */
function isChosen(view: TrainerView, c: Cell): boolean {
  const table = TRAINER_TABLES[view.trainer].config;
  return Object.entries(c.patch).every(([k, v]) => (view.config[k] ?? table.find((s) => s.name === k)?.default) === v);
}

function CellTd({ view, c }: { view: TrainerView; c: Cell }) {
  return (
    <td className={`num${isChosen(view, c) ? ' chosen' : ''}`} title={c.error ?? c.formula} data-loss-type={c.label} data-value={c.loss ?? ''}>
      {c.loss === null ? 'n/a' : fmt(c.loss, 5)}
    </td>
  );
}

/**
 * TRL / OpenRLHF: one row per loss type (a column each did not fit the side panel: TRL's eight types read
 * "grpo … vespo" only from ~560 px). verl: policy-loss modes (rows) × loss_agg_mode (columns).
 */
function Table({ view }: { view: TrainerView }) {
  const split = view.table.map((c) => c.label.split(' · '));
  if (split.every((p) => p.length === 1)) {
    return (
      <table className="dense" data-testid="loss-table" data-trainer={view.trainer}>
        <thead>
          <tr>
            <th>loss type</th>
            <th>loss</th>
          </tr>
        </thead>
        <tbody>
          {view.table.map((c) => (
            <tr key={c.label}>
              <th title={c.formula}>{c.label}</th>
              <CellTd view={view} c={c} />
            </tr>
          ))}
        </tbody>
      </table>
    );
  }
  const modes = [...new Set(split.map((p) => p[0]))];
  const aggs = [...new Set(split.map((p) => p[1]))];
  return (
    <table className="dense" data-testid="loss-table" data-trainer={view.trainer}>
      <thead>
        <tr>
          <th>loss_mode \ loss_agg_mode</th>
          {aggs.map((a) => (
            <th key={a}>{a}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {modes.map((m) => (
          <tr key={m}>
            <th>{m}</th>
            {aggs.map((a) => {
              const c = view.table.find((x) => x.label === `${m} · ${a}`)!;
              return <CellTd key={a} view={view} c={c} />;
            })}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Sets the values a trainer's refusal offers as the user's edits (the next update's settings; the results read as stale). */
function OfferButton({ offer }: { offer: Record<string, unknown> }) {
  const setSetting = useStudio((s) => s.setSetting);
  const base = useStudio(baseKindOf);
  return (
    <button className="small" data-testid="trainer-offer" onClick={() => Object.entries(offer).forEach(([k, v]) => setSetting(base, 'config', k, v))}>
      use {Object.entries(offer).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(', ')}
    </button>
  );
}

export function LossTablePanel() {
  const view = useStudio((s) => s.run.loss?.trainer ?? null);
  if (!view) {
    return (
      <Section title="Trainer loss & loss table" open={false}>
        <div className="muted small">run the update to its loss stage: the trainer preset's loss and every loss type of that trainer on the same completions</div>
      </Section>
    );
  }
  return (
    <Section title={`Trainer loss (${view.trainer}) & loss table`}>
      {view.terms ? (
        <div data-testid="trainer-loss" data-trainer={view.trainer} data-value={view.terms.loss}>
          {view.trainer} loss <b className="mono">{fmt(view.terms.loss, 6)}</b>
        </div>
      ) : (
        <div className="bad small" data-testid="trainer-error">
          {view.error}
          {view.offer && <OfferButton offer={view.offer} />}
        </div>
      )}
      {view.table.length > 0 && <Table view={view} />}
    </Section>
  );
}
