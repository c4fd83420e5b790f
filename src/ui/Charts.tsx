// Charts: rewards and advantages per sample grouped by prompt (zero-std groups marked), per-token curves
// along the selected completion, loss components (policy term vs β·KL), every aggregation side by side,
// grad norms per parameter group, and log-probs before / after the step. A chart appears once its data
// exists (an imported batch has rewards/advantages and old/ref log-probs; the rest comes from a step).
import { useMemo } from 'react';
import { Bar, BarChart, CartesianGrid, Legend, Line, LineChart, ReferenceArea, ReferenceLine, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { computeAdvantages } from '../grpo/advantages.ts';
import { scaleRewardsOf } from '../io/batch.ts';
import { useStudio } from '../store/index.ts';
import { heatAccessor } from './grid/heat.ts';
import { Section, fmt } from './fields.tsx';

const AXIS = { stroke: '#7d8590', fontSize: 10 };
const TOOLTIP = { contentStyle: { background: '#161b22', border: '1px solid #30363d', fontSize: 11 }, formatter: (v: unknown) => (typeof v === 'number' ? fmt(v) : String(v)) };

function ChartBox({ title, children, testId }: { title: string; children: React.ReactElement; testId?: string }) {
  return (
    <div className="chart" data-testid={testId}>
      <div className="chart-title">{title}</div>
      <ResponsiveContainer width="100%" height={150}>
        {children}
      </ResponsiveContainer>
    </div>
  );
}

function RewardsChart() {
  const batch = useStudio((s) => s.batch);
  const run = useStudio((s) => s.run);
  const data = useMemo(() => {
    if (!batch) return null;
    const rewards = run.rewards ?? batch.rewards;
    const adv = run.advantages ?? batch.advantages;
    if (!rewards && !adv) return null;
    const G = batch.num_generations;
    const groups = run.groups ?? (rewards && rewards.length % G === 0 ? computeAdvantages(rewards, { num_generations: G, scale_rewards: scaleRewardsOf(batch.config) }).groups : undefined);
    return {
      rows: batch.completion_ids.map((_, i) => ({ sample: i, reward: rewards?.[i], advantage: adv?.[i], group: Math.floor(i / G) })),
      zero: (groups ?? []).filter((g) => g.zero_std).map((g) => g.group),
      G,
    };
  }, [batch, run]);
  if (!data) return null;
  return (
    <ChartBox title={`rewards & advantages per sample${data.zero.length ? ` — zero-std groups: ${data.zero.join(', ')}` : ''}`} testId="chart-rewards">
      <BarChart data={data.rows}>
        <CartesianGrid stroke="#21262d" />
        <XAxis dataKey="sample" tick={AXIS} />
        <YAxis tick={AXIS} />
        <Tooltip {...TOOLTIP} />
        <Legend wrapperStyle={{ fontSize: 10 }} />
        {data.zero.map((g) => (
          <ReferenceArea key={g} x1={g * data.G} x2={g * data.G + data.G - 1} fill="#f85149" fillOpacity={0.12} label={{ value: 'zero std', fill: '#f85149', fontSize: 10 }} />
        ))}
        <ReferenceLine y={0} stroke="#7d8590" />
        <Bar dataKey="reward" fill="#58a6ff" isAnimationActive={false} />
        <Bar dataKey="advantage" fill="#f2cc60" isAnimationActive={false} />
      </BarChart>
    </ChartBox>
  );
}

function TokenCurves() {
  const batch = useStudio((s) => s.batch);
  const run = useStudio((s) => s.run);
  const sel = useStudio((s) => s.selected?.sample ?? s.focus?.sample ?? 0);
  const series = ['logp', 'old_logp', 'ref_logp', 'entropy', 'kl', 'dlogp'] as const;
  const colors = ['#58a6ff', '#8b949e', '#a371f7', '#3fb950', '#f85149', '#f2cc60'];
  const data = useMemo(() => {
    if (!batch || sel >= batch.completion_ids.length) return null;
    const acc = series.map((m) => [m, heatAccessor(m, batch, run)] as const).filter(([, a]) => a);
    if (acc.length === 0) return null;
    return {
      keys: acc.map(([m]) => m),
      rows: batch.completion_ids[sel].map((_, j) => Object.fromEntries([['t', j], ...acc.map(([m, a]) => [m, a!(sel, j)])])),
    };
  }, [batch, run, sel]);
  if (!data) return null;
  return (
    <ChartBox title={`per-token along completion of sample ${sel}`} testId="chart-tokens">
      <LineChart data={data.rows}>
        <CartesianGrid stroke="#21262d" />
        <XAxis dataKey="t" tick={AXIS} />
        <YAxis tick={AXIS} />
        <Tooltip {...TOOLTIP} />
        <Legend wrapperStyle={{ fontSize: 10 }} />
        {data.keys.map((k) => (
          <Line key={k} dataKey={k} stroke={colors[series.indexOf(k)]} dot={false} isAnimationActive={false} />
        ))}
      </LineChart>
    </ChartBox>
  );
}

function LossCharts() {
  const run = useStudio((s) => s.run);
  const lossType = useStudio((s) => s.loss.loss_type);
  if (!run.losses) return null;
  const components = [{ name: lossType, policy: run.policy_term, kl: run.kl_term }];
  const aggs = Object.entries(run.losses).map(([name, v]) => ({ name, loss: v }));
  return (
    <>
      <ChartBox title={`loss ${fmt(run.loss)} = policy ${fmt(run.policy_term)} + β·KL ${fmt(run.kl_term)}`} testId="chart-loss">
        <BarChart data={components} layout="vertical">
          <XAxis type="number" tick={AXIS} />
          <YAxis type="category" dataKey="name" tick={AXIS} width={70} />
          <Tooltip {...TOOLTIP} />
          <Legend wrapperStyle={{ fontSize: 10 }} />
          <Bar dataKey="policy" stackId="a" fill="#58a6ff" isAnimationActive={false} />
          <Bar dataKey="kl" stackId="a" fill="#f85149" isAnimationActive={false} />
        </BarChart>
      </ChartBox>
      <ChartBox title="every aggregation of the same per-token loss" testId="chart-aggregations">
        <BarChart data={aggs}>
          <XAxis dataKey="name" tick={{ ...AXIS, fontSize: 8 }} interval={0} angle={-20} textAnchor="end" height={40} />
          <YAxis tick={AXIS} />
          <Tooltip {...TOOLTIP} />
          <Bar dataKey="loss" fill="#a371f7" isAnimationActive={false} />
        </BarChart>
      </ChartBox>
    </>
  );
}

function GradNorms() {
  const run = useStudio((s) => s.run);
  if (!run.grad_norms) return null;
  return (
    <ChartBox title={`grad norm per parameter group (total ${fmt(run.grad_norm)})`} testId="chart-grads">
      <BarChart data={run.grad_norms}>
        <XAxis dataKey="group" tick={{ ...AXIS, fontSize: 8 }} interval={0} angle={-20} textAnchor="end" height={40} />
        <YAxis tick={AXIS} />
        <Tooltip {...TOOLTIP} />
        <Bar dataKey="norm" fill="#3fb950" isAnimationActive={false} />
      </BarChart>
    </ChartBox>
  );
}

function BeforeAfter() {
  const batch = useStudio((s) => s.batch);
  const run = useStudio((s) => s.run);
  const sel = useStudio((s) => s.selected?.sample ?? 0);
  const pre = run.per_token_logps;
  const post = run.post_per_token_logps;
  if (!batch || !pre || !post || sel >= pre.B) return null;
  const rows = batch.completion_ids[sel].map((_, j) => ({ t: j, before: pre.data[sel * pre.C + j], after: post.data[sel * post.C + j] }));
  return (
    <ChartBox title={`log-probs before / after the step, sample ${sel} (A = ${fmt(run.advantages?.[sel])})`} testId="chart-before-after">
      <LineChart data={rows}>
        <CartesianGrid stroke="#21262d" />
        <XAxis dataKey="t" tick={AXIS} />
        <YAxis tick={AXIS} />
        <Tooltip {...TOOLTIP} />
        <Legend wrapperStyle={{ fontSize: 10 }} />
        <Line dataKey="before" stroke="#8b949e" isAnimationActive={false} />
        <Line dataKey="after" stroke="#f2cc60" isAnimationActive={false} />
      </LineChart>
    </ChartBox>
  );
}

export function Charts() {
  const batch = useStudio((s) => s.batch);
  return (
    <Section title="Charts">
      {!batch && <div className="muted">charts appear with a batch</div>}
      <RewardsChart />
      <TokenCurves />
      <LossCharts />
      <GradNorms />
      <BeforeAfter />
    </Section>
  );
}
