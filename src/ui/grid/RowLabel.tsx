// One row label of the token grid: sample id, advantage, and the lengths of ids vs every mask / per-token
// field (mismatches in bold), with the whole readout as a tooltip. Only the labels of the drawn window exist.
import { memo } from 'react';
import { fmt } from '../fields.tsx';
import type { RowReadout } from '../../view/cells.ts';

// Memoised: a grid render (each stage's result re-renders it) passes the same cached readout (useGrid.ts) and advantage.
export const RowLabel = memo(function RowLabel({ r, adv }: { r: RowReadout; adv?: number }) {
  const bad = (n: number | null) => n !== null && n !== r.completion_ids;
  const title = [
    `sample ${r.sample}, group ${r.group}`,
    `prompt_ids ${r.prompt_ids}${r.prompt_mask !== null ? `, prompt_mask ${r.prompt_mask}` : ''}`,
    `completion_ids ${r.completion_ids}, completion_mask ${r.completion_mask} (Σ = ${r.masked_tokens})`,
    r.tool_mask !== null ? `tool_mask ${r.tool_mask}` : '',
    r.old_per_token_logps !== null ? `old_per_token_logps ${r.old_per_token_logps}` : '',
    r.ref_per_token_logps !== null ? `ref_per_token_logps ${r.ref_per_token_logps}` : '',
    r.first_eos >= 0 ? `EOS that ends the completion at ${r.first_eos}` : 'no EOS (truncated)',
  ].filter(Boolean).join('\n');
  return (
    <>
      <span className="rl-id">#{r.sample}</span>
      <span className="rl-adv">{adv !== undefined ? (adv >= 0 ? '+' : '') + fmt(adv, 2) : ''}</span>
      <span className="rl-len" title={title}>
        <span>p{r.prompt_ids}</span>
        {r.prompt_mask !== null && <span className={r.prompt_mask !== r.prompt_ids ? 'bad' : ''}>/{r.prompt_mask}</span>}
        <span> c{r.completion_ids}</span>
        <span className={bad(r.completion_mask) ? 'bad' : ''}> m{r.completion_mask}</span>
        {r.tool_mask !== null && <span className={bad(r.tool_mask) ? 'bad' : ''}> t{r.tool_mask}</span>}
        {r.old_per_token_logps !== null && <span className={bad(r.old_per_token_logps) ? 'bad' : ''}> o{r.old_per_token_logps}</span>}
        {r.ref_per_token_logps !== null && <span className={bad(r.ref_per_token_logps) ? 'bad' : ''}> r{r.ref_per_token_logps}</span>}
        <span className="muted" title="Σm: Σ completion_mask, the tokens of this row the loss counts">
          {' '}Σm{r.masked_tokens}
        </span>
      </span>
    </>
  );
});
