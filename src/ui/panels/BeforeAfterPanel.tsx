// The before/after check (as a manual GRPO debugging session does it): after the optimizer step, sample
// the same prompts again with the same seed from the updated weights and compare rewards, completion
// lengths and per-group pass rates with the update's own samples. "Pass" is the first reward function
// scoring above 0 (correctness in the default task); the table says which function that is. A bar chart
// puts each group's mean reward before beside after.
import { useState } from 'react';
import { useStudio } from '../../store/index.ts';
import type { SampledSide } from '../../bridge/protocol.ts';
import { runBeforeAfter } from '../../store/controller.ts';
import { SERIES_COLORS } from '../../view/chart_theme.ts';
import { SummaryChart } from '../chart/SummaryChart.tsx';
import { Section, fmt } from '../fields.tsx';

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/** Per group: mean reward, pass rate (first reward function > 0), mean length. */
function groups(s: SampledSide, G: number) {
  return Array.from({ length: s.rewards.length / G }, (_, g) => {
    const idx = Array.from({ length: G }, (_, k) => g * G + k);
    return {
      reward: mean(idx.map((i) => s.rewards[i])),
      pass: mean(idx.map((i) => ((s.rewards_per_func[i]?.[0] ?? 0) > 0 ? 1 : 0))),
      length: mean(idx.map((i) => s.lengths[i])),
    };
  });
}

export function BeforeAfterPanel() {
  const stepped = useStudio((s) => !!s.run.step && !!s.run.sample);
  const r = useStudio((s) => s.beforeAfter);
  const [busy, setBusy] = useState(false);
  if (!stepped) return null;
  const G = r?.G ?? 1;
  const [b, a] = r ? [groups(r.before, G), groups(r.after, G)] : [[], []];
  const changed = r ? r.after.completion_texts.filter((t, i) => t !== r.before.completion_texts[i]).length : 0;
  return (
    <Section title="Before / after the step">
      <button
        disabled={busy}
        data-testid="before-after-run"
        title="sample the same prompts with the same seed from the updated weights, and score them with the same rewards"
        onClick={() => {
          setBusy(true);
          void runBeforeAfter().finally(() => setBusy(false));
        }}
      >
        {busy ? 'Re-sampling…' : 'Re-sample after the step (same seed)'}
      </button>
      {r && (
        <div data-testid="before-after" className="small">
          <SummaryChart
            title="mean reward per group, before → after the step"
            testId="chart-before-after-groups"
            data={b.map((x, g) => ({ group: g, before: x.reward, after: a[g].reward, pass_before: x.pass, pass_after: a[g].pass }))}
            xKey="group"
            xTitle="group (prompt)"
            series={[
              { key: 'before', color: SERIES_COLORS.before },
              { key: 'after', color: SERIES_COLORS.after },
            ]}
            label={(row) => `group ${String(row.group)}: pass rate ${fmt(row.pass_before as number, 3)} → ${fmt(row.pass_after as number, 3)}`}
            zeroLine
          />
          <table className="dense">
            <thead>
              <tr>
                <th>group</th>
                <th>reward before → after</th>
                <th title={`pass: ${r.names[0] ?? 'the first reward'} > 0`}>pass rate</th>
                <th>mean length</th>
              </tr>
            </thead>
            <tbody>
              {b.map((x, g) => (
                <tr key={g}>
                  <td>{g}</td>
                  <td>{fmt(x.reward, 3)} → {fmt(a[g].reward, 3)}</td>
                  <td>{fmt(x.pass, 3)} → {fmt(a[g].pass, 3)}</td>
                  <td>{fmt(x.length, 3)} → {fmt(a[g].length, 3)}</td>
                </tr>
              ))}
              <tr className="chosen">
                <td>all</td>
                <td>{fmt(mean(r.before.rewards), 3)} → {fmt(mean(r.after.rewards), 3)}</td>
                <td>{fmt(mean(b.map((x) => x.pass)), 3)} → {fmt(mean(a.map((x) => x.pass)), 3)}</td>
                <td>{fmt(mean(r.before.lengths), 3)} → {fmt(mean(r.after.lengths), 3)}</td>
              </tr>
            </tbody>
          </table>
          <div className="muted" data-testid="before-after-changed">
            {changed} of {r.after.completion_texts.length} completions changed (same prompts, same seed); pass = {r.names[0] ?? 'first reward'} &gt; 0
          </div>
        </div>
      )}
    </Section>
  );
}
