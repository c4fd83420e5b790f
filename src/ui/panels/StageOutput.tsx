// What the stages before "assemble batch" produced, shown as soon as each finishes: the rendered prompts,
// the sampled completions (finish reason, length; a tool rollout's calls and re-tokenized stretches), the rewards per function and the group advantages.
// Until the batch is assembled the grid has nothing to draw; this table is the only view of them.
import { useStudio } from '../../store/index.ts';
import { fmt } from '../fields.tsx';
import { visibleText } from '../../view/cells.ts';

export function StageOutput() {
  const run = useStudio((s) => s.run);
  const G = useStudio((s) => s.runSettings?.sampling.num_generations ?? s.sampling.num_generations);
  const { render, sample, reward, advantages } = run;
  if (!render || run.assemble) return null;
  const groups = advantages?.groups;
  return (
    <div className="stage-output" data-testid="stage-output">
      <h4>stage results so far</h4>
      {!sample && (
        <table className="dense" data-testid="stage-output-render">
          <thead>
            <tr>
              <th>prompt</th>
              <th>tokens</th>
              <th>rendered text</th>
            </tr>
          </thead>
          <tbody>
            {render.prompt_texts.map((t, i) => (
              <tr key={i}>
                <td>{i}</td>
                <td>{render.prompt_ids[i].length}</td>
                <td className="mono">{visibleText(t)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {sample && (
        <table className="dense" data-testid="stage-output-samples">
          <thead>
            <tr>
              <th>sample</th>
              <th>group</th>
              <th>completion</th>
              <th>tokens</th>
              <th>finish</th>
              {sample.tools && <th title="tool calls the loop ran (failed ones: an {'error': …} result)">tool calls</th>}
              {sample.tools && <th title="stretches of the completion the rerender loop re-tokenized: their ids are not the sampled ones (TRL before #5242)">re-tokenized</th>}
              {reward?.names.map((n) => <th key={n}>{n}</th>)}
              {reward && <th>reward</th>}
              {advantages && <th>advantage</th>}
            </tr>
          </thead>
          <tbody>
            {sample.completion_texts.map((t, i) => (
              <tr key={i}>
                <td>{i}</td>
                <td>{Math.floor(i / G)}</td>
                <td className="mono">{visibleText(t)}</td>
                <td>{sample.completion_ids[i].length}</td>
                <td>{sample.finish_reason[i]}</td>
                {sample.tools && <td>{sample.tools.tool_calls[i]}{sample.tools.tool_failures[i] > 0 ? ` (${sample.tools.tool_failures[i]} failed)` : ''}</td>}
                {sample.tools && <td data-testid={`retokenized-${i}`}>{sample.tools.retokenized[i].map((r) => `tokens ${r.start}–${r.end - 1}: ${r.sampled_tokens} sampled → ${r.rendered_tokens}`).join('; ')}</td>}
                {reward?.rewards_per_func[i].map((v, f) => <td key={f}>{fmt(v)}</td>)}
                {reward && <td>{fmt(reward.rewards[i])}</td>}
                {advantages && <td>{fmt(advantages.advantages[i])}</td>}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {groups && (
        <div className="small muted" data-testid="stage-output-groups">
          groups (mean / std):{' '}
          {groups.map((g) => `#${g.group} ${fmt(g.mean, 3)} / ${fmt(g.std, 3)}${g.zero_std ? ' (zero std)' : ''}`).join(' · ')}
        </div>
      )}
      {reward && reward.errors.length > 0 && <div className="bad small">{reward.errors.length} reward error(s): {reward.errors[0].message}</div>}
    </div>
  );
}
