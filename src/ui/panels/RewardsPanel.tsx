// Rewards: built-in functions (exact match, regex, length, contains) and user JavaScript, each with a
// weight. "Score batch" runs them on the batch on screen (JS in the sandbox worker, with its time limit)
// and shows the per-sample table, errors included, so a reward can be checked before a step uses it.
import { useState } from 'react';
import type { RewardKind, RewardSpec, RewardTable } from '../../grpo/rewards.ts';
import { useStudio } from '../../store/index.ts';
import { scoreOnScreenBatch } from '../../store/controller.ts';
import { CheckField, Field, NumberField, Section, SelectField, fmt } from '../fields.tsx';

const KINDS: RewardKind[] = ['exact_match', 'regex', 'length', 'contains', 'js'];

function RewardEditor({ r, i }: { r: RewardSpec; i: number }) {
  const set = useStudio((s) => s.setReward);
  const remove = useStudio((s) => s.removeReward);
  const patch = (p: Partial<RewardSpec>) => set(i, p);
  return (
    <div className="reward" data-testid={`reward-${i}`}>
      <div className="row">
        <CheckField label="" value={r.enabled} onChange={(v) => patch({ enabled: v })} title="enabled" />
        <input className="grow" aria-label="reward name" value={r.name} onChange={(e) => patch({ name: e.target.value })} />
        <span className="tag">{r.kind}</span>
        <button className="x" title="remove reward" aria-label="remove reward" onClick={() => remove(i)}>×</button>
      </div>
      <div className="grid2">
        <NumberField label="weight" value={r.weight} onChange={(v) => patch({ weight: v! })} />
        {r.kind === 'exact_match' && <CheckField label="normalize (trim, case, final period)" value={r.normalize} onChange={(v) => patch({ normalize: v })} />}
        {r.kind === 'regex' && (
          <>
            <Field label="pattern">
              <input className="mono" value={r.pattern} onChange={(e) => patch({ pattern: e.target.value })} />
            </Field>
            <Field label="flags">
              <input className="mono" value={r.flags} onChange={(e) => patch({ flags: e.target.value })} />
            </Field>
          </>
        )}
        {r.kind === 'length' && <NumberField label="target tokens" value={r.target_tokens} min={1} onChange={(v) => patch({ target_tokens: v! })} />}
        {r.kind === 'contains' && (
          <>
            <Field label="text (empty: the answer)">
              <input value={r.text} onChange={(e) => patch({ text: e.target.value })} />
            </Field>
            <CheckField label="case sensitive" value={r.case_sensitive} onChange={(v) => patch({ case_sensitive: v })} />
          </>
        )}
        {r.kind === 'js' && <NumberField label="time limit / sample (ms)" value={r.timeout_ms} min={1} onChange={(v) => patch({ timeout_ms: v! })} />}
      </div>
      {r.kind === 'js' && (
        <textarea
          className="code"
          aria-label="reward function source"
          rows={4}
          spellCheck={false}
          value={r.source}
          data-testid={`reward-source-${i}`}
          onChange={(e) => patch({ source: e.target.value })}
          title="(s) => number | null, s = { index, group, prompt, completion, answer, completion_ids }"
        />
      )}
    </div>
  );
}

function RewardResults({ table }: { table: RewardTable }) {
  return (
    <div className="reward-results" data-testid="reward-results">
      <div className="small muted">answers: the prompt set's, by group (prompt #g for samples g·G … g·G + G − 1)</div>
      <table className="dense">
        <thead>
          <tr>
            <th>#</th>
            {table.names.map((n) => (
              <th key={n}>{n}</th>
            ))}
            <th>reward</th>
          </tr>
        </thead>
        <tbody>
          {table.rewards.map((r, i) => (
            <tr key={i}>
              <td>{i}</td>
              {table.rewards_per_func[i].map((v, f) => (
                <td key={f} className={Number.isNaN(v) ? 'nan' : ''}>{fmt(v)}</td>
              ))}
              <td>{fmt(r)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {table.errors.map((e, k) => (
        <div key={k} className="err small" data-testid="reward-error">
          sample {e.sample}, {e.reward}: {e.message}
        </div>
      ))}
    </div>
  );
}

export function RewardsPanel() {
  const rewards = useStudio((s) => s.rewards);
  const add = useStudio((s) => s.addReward);
  const [kind, setKind] = useState<RewardKind>('js');
  const [table, setTable] = useState<RewardTable | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <Section title={`Rewards (${rewards.filter((r) => r.enabled).length})`}>
      {rewards.map((r, i) => (
        <RewardEditor key={i} r={r} i={i} />
      ))}
      <div className="row">
        <SelectField<RewardKind> label="" title="kind of reward to add" value={kind} options={KINDS} onChange={(v) => setKind(v)} />
        <button onClick={() => add(kind)}>+ reward</button>
        <button
          disabled={busy}
          data-testid="score-batch"
          title="score the completions of the batch on screen with these rewards"
          onClick={async () => {
            setBusy(true);
            setTable(await scoreOnScreenBatch());
            setBusy(false);
          }}
        >
          {busy ? 'scoring…' : 'Score batch'}
        </button>
      </div>
      {table && <RewardResults table={table} />}
    </Section>
  );
}
