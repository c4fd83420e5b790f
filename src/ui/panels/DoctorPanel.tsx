// The Doctor's report on the batch on screen (imported, or the current update's assembled batch): a
// summary line, the findings grouped by rule with their rule ids — a click selects the sample and
// highlights the token span in the grid (the grid scrolls to it) — and the rules that could not run. An imported
// batch whose settings the user changed is judged under them (as its Export), and the panel says so, or why not.
import { useMemo, useState } from 'react';
import { useStudio } from '../../store/index.ts';
import { judgedNote, judgedShown } from '../../store/derived.ts';
import type { Finding } from '../../bridge/protocol.ts';
import { Section } from '../fields.tsx';
import { countOf } from './count.ts';

/**
 * Findings shown per rule at first, and added per "show more": every rule is seen at once, and a rule
 * that fires on each of 1,024 rows is not 7,000 DOM nodes to lay out in the import's commit (500 of them
 * held the page ~80 ms).
 */
const FIRST_PER_RULE = 5;
const MORE_PER_CLICK = 100;

/** Findings by rule, rules in the order of their first finding (the Doctor lists errors first). */
function byRule(findings: readonly Finding[]): [string, Finding[]][] {
  const groups = new Map<string, Finding[]>();
  for (const f of findings) {
    let g = groups.get(f.rule);
    if (!g) groups.set(f.rule, (g = []));
    g.push(f);
  }
  return [...groups];
}

export function DoctorPanel() {
  const findings = useStudio((s) => s.findings);
  const skipped = useStudio((s) => s.skipped);
  const batch = useStudio((s) => s.batch);
  const batchName = useStudio((s) => s.batchName);
  const focus = useStudio((s) => s.focus);
  const setFocus = useStudio((s) => s.setFocus);
  const imported = useStudio((s) => s.imported);
  const batchOrigin = useStudio((s) => s.batchOrigin);
  // Changes only with the judgement's status (not per keystroke): what the findings of an imported batch were judged under.
  const judged = judgedNote(useStudio(judgedShown));
  const counts = { error: 0, warning: 0, info: 0 };
  for (const f of findings) counts[f.severity]++;
  const open = (f: Finding) => setFocus({ sample: f.sample, field: f.field, span: f.span, rule: f.rule });
  const groups = useMemo(() => byRule(findings), [findings]);
  // How many of each rule's findings are listed; another batch starts again from the first few (its deferred
  // tokenizer findings arriving later keep what was opened).
  const [shown, setShown] = useState<{ of: unknown; n: Record<string, number> }>({ of: batch, n: {} });
  const opened = shown.of === batch ? shown.n : {};
  const limit = (rule: string) => opened[rule] ?? FIRST_PER_RULE;
  return (
    <Section
      title="Doctor"
      right={
        <span className="counts">
          <span className="sev error">{counts.error}</span>
          <span className="sev warning">{counts.warning}</span>
          <span className="sev info">{counts.info}</span>
        </span>
      }
    >
      {!batch && <div className="muted">import a batch or run a step to check it</div>}
      {batch && (
        <div className="doctor-summary small" data-testid="doctor-summary">
          <b>{batchName}</b>: {batch.completion_ids.length} samples,{' '}
          {findings.length === 0 ? <span className="ok">no findings</span> : `${countOf(counts.error, 'error')}, ${countOf(counts.warning, 'warning')}, ${countOf(counts.info, 'note')}`}
          {skipped.length > 0 ? ` · ${countOf(skipped.length, 'rule')} skipped` : ''}
        </div>
      )}
      {judged && (
        <div className={`doctor-judged small ${judged.status}`} data-testid="doctor-judged" role="status">
          {judged.text}
        </div>
      )}
      {batchOrigin === 'import' && imported?.notes?.length ? (
        <ul className="small muted" data-testid="import-notes">
          {imported.notes.map((n) => (
            <li key={n}>{n}</li>
          ))}
        </ul>
      ) : null}
      <ul className="findings" data-testid="findings">
        {groups.flatMap(([rule, list]) => [
          ...list.slice(0, limit(rule)).map((f, k) => {
            const active = focus?.rule === f.rule && focus.sample === f.sample && focus.span?.[0] === f.span?.[0];
            return (
              <li
                key={`${rule}/${k}`}
                className={`finding ${f.severity}${active ? ' active' : ''}`}
                data-rule={f.rule}
                data-sample={f.sample}
                role="button"
                tabIndex={0}
                onClick={() => open(f)}
                onKeyDown={(e) => {
                  if (e.key === 'Enter' || e.key === ' ') {
                    e.preventDefault();
                    open(f);
                  }
                }}
              >
                <div className="finding-head">
                  <span className={`sev ${f.severity}`}>{f.severity}</span>
                  <code className="rule">{f.rule}</code>
                  {f.sample === undefined && <span className="where">whole batch</span>}
                  {f.sample !== undefined && (
                    <span className="where">
                      sample {f.sample}
                      {f.span ? ` · ${f.field ?? 'completion_ids'}[${f.span[0]}:${f.span[1]}]` : ''}
                    </span>
                  )}
                </div>
                <div className="finding-msg">{f.message}</div>
                <div className="finding-hint">{f.hint}</div>
              </li>
            );
          }),
          ...(list.length > limit(rule)
            ? [
                <li key={`${rule}/more`} className="findings-more small">
                  <button data-testid="findings-more" data-rule-more={rule} onClick={() => setShown({ of: batch, n: { ...opened, [rule]: limit(rule) + MORE_PER_CLICK } })}>
                    show {Math.min(MORE_PER_CLICK, list.length - limit(rule))} more <code>{rule}</code> ({list.length.toLocaleString('en-US')} in all)
                  </button>
                </li>,
              ]
            : []),
        ])}
      </ul>
      {skipped.length > 0 && (
        <details>
          <summary className="small muted">{countOf(skipped.length, 'rule')} skipped</summary>
          <ul className="small muted">
            {skipped.map((s) => (
              <li key={s.rule}>
                <code>{s.rule}</code>: {s.reason}
              </li>
            ))}
          </ul>
        </details>
      )}
    </Section>
  );
}
