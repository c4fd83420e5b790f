// Diff two batches token by token: pin the batch on screen, then import another (or step: the update's
// batch against the imported one it started from, step N against step N + 1 of an export) and this panel
// says what differs on real tokens only (padding left out: a trainer dump of the page's own batch is
// identical; numbers equal within an f32 round trip) — rows, prompt and completion tokens, mask entries,
// rewards, advantages, config keys — with the changed rows listed (a click selects the row) and the
// grid's "diff" heat marking the changed completion cells. Below it, the prompt set rendered with two chat templates (TemplateDiff.tsx).
import { useStudio } from '../../store/index.ts';
import { Section, fmt } from '../fields.tsx';
import { useBatchDiff } from '../grid/useGrid.ts';
import { TemplateDiffPanel } from './TemplateDiff.tsx';

const MAX_ROWS = 40;

export function DiffPanel() {
  const batch = useStudio((s) => s.batch);
  const name = useStudio((s) => s.batchName);
  const base = useStudio((s) => s.diffBase);
  const setBase = useStudio((s) => s.setDiffBase);
  const select = useStudio((s) => s.select);
  const setHeat = useStudio((s) => s.setHeat);
  const diff = useBatchDiff();
  // reduce, not Math.max(...rows): a spread of 200,000 rows overflows the stack and takes the page down.
  const P = batch ? batch.prompt_ids.reduce((m, r) => Math.max(m, r.length), 0) : 0;
  const s = diff?.summary;
  return (
    <Section title="Diff batches">
      <div className="row">
        <button disabled={!batch} onClick={() => batch && setBase({ name, batch })} data-testid="diff-pin" title="compare every later batch on screen with this one">
          Pin this batch
        </button>
        {base && (
          <button onClick={() => setBase(null)} title="stop comparing">
            Unpin
          </button>
        )}
        <span className="small muted">{base ? `base: ${base.name}` : 'pin a batch, then import or step another'}</span>
      </div>
      {base && batch && !diff && <div className="small muted">the batch on screen is the pinned one</div>}
      {diff && s && (
        <div data-testid="diff-summary" className="small">
          <div>
            {base!.name} ({diff.rows[0]} rows) → {name} ({diff.rows[1]} rows):{' '}
            {s.rows_changed === 0 && s.config.length === 0 && s.only_in_one === 0 ? (
              <span className="ok">identical</span>
            ) : (
              <b>
                {s.rows_changed} rows differ · {s.prompt_tokens} prompt tokens · {s.completion_tokens} completion tokens · {s.mask_entries} mask entries · {s.rewards} rewards · {s.advantages} advantages
                {s.only_in_one ? ` · ${s.only_in_one} rows on one side only` : ''}
              </b>
            )}
          </div>
          <div className="muted" data-testid="diff-rules" data-pad-ignored={diff.pad_ignored}>
            real tokens only ({diff.pad_ignored} pad positions left out) · rewards and advantages equal within one f32 ulp (relative {diff.tolerance.toExponential(2)}: a float32 round trip)
          </div>
          {s.config.length > 0 && <div>config keys that differ: {s.config.join(', ')}</div>}
          {s.completion_tokens + s.mask_entries > 0 && (
            <button className="small-btn" onClick={() => setHeat('diff')} data-testid="diff-heat">
              show changed cells in the grid
            </button>
          )}
          <table className="dense" data-testid="diff-rows">
            <thead>
              <tr>
                <th>row</th>
                <th>prompt (from end)</th>
                <th>completion</th>
                <th>mask</th>
                <th>reward</th>
              </tr>
            </thead>
            <tbody>
              {diff.changed.slice(0, MAX_ROWS).map((r) => (
                <tr key={r.sample} className="link" onClick={() => select({ sample: r.sample, col: P + (r.completion[0] ?? r.completion_mask[0] ?? 0) })}>
                  <td>#{r.sample}</td>
                  <td>{r.prompt_from_end.length || ''}</td>
                  <td>{r.completion.length ? `${r.completion.length} from [${r.completion[0]}]` : ''}</td>
                  <td>{r.completion_mask.length ? `${r.completion_mask.length} from [${r.completion_mask[0]}]` : ''}</td>
                  <td>{r.reward ? `${fmt(r.reward[0] ?? NaN, 3)} → ${fmt(r.reward[1] ?? NaN, 3)}` : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {diff.changed.length > MAX_ROWS && <div className="muted">… and {diff.changed.length - MAX_ROWS} more rows</div>}
        </div>
      )}
      <TemplateDiffPanel />
    </Section>
  );
}
