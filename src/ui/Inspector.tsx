// Token inspector (the hovered or selected cell: id, visible text, position, position id, every mask bit,
// log-probs, ratio, KL, loss and its weight under the chosen aggregation; the trainer preset's per-token loss, IS
// weight and effective mask with the factor that removed the token; with a what-if on, its weight, loss,
// gradient and loss contribution beside the update's; in a batch with turns, the token's turn — message index,
// role, where the turn came from, its sums, a re-tokenization difference — src/ui/grid/turns.ts) and sample inspector (the
// rendered text with the prompt | completion boundary, reward per function, advantage, group mean/std).
import { useHover } from '../store/hover.ts';
import { groupLabel, lossTypeOf } from '../store/vocabulary.ts';
import { useStudio } from '../store/index.ts';
import { groupStats, mismatchShown, rewardNames, shownRun } from '../store/derived.ts';
import { CLIP_HIGH, CLIP_LOW, DELTA_BINDS, MASK_FACTORS } from '../store/vocabulary.ts';
import { FLAG, FLAG_TEXT, REGION_NAMES, classifyCell, visibleText } from '../view/cells.ts';
import { useGridModel } from './grid/useGrid.ts';
import { useTurns, type TurnsModel } from './grid/turns.ts';
import { ROLE_NAMES } from '../view/turns.ts';
import { heatAccessor, whatIfToken } from './grid/heat.ts';
import { KV, fmt } from './fields.tsx';
import { TERM_HELP } from './explain.ts';
import { preview, previewNote } from './preview.ts';

const bitText = (m: number | null) => (m === null ? 'none' : String(m));

export function TokenInspector() {
  const hovered = useHover((s) => s.cell);
  const selected = useStudio((s) => s.selected);
  const run = useStudio(shownRun); // the chosen pass's ratio / KL / loss / clip (μ > 1)
  const lossType = useStudio(lossTypeOf);
  const model = useGridModel();
  const texts = useStudio((s) => s.tokenTexts);
  const mismatch = useStudio((s) => mismatchShown(s)?.result ?? null);
  const whatIf = useStudio((s) => s.whatIf);
  const turns = useTurns(model?.grid.P);
  const cell = hovered ?? selected;
  if (!model || !cell || cell.sample >= model.grid.B) return <div className="inspector muted" data-testid="token-inspector">hover or click a token</div>;
  const { ctx, grid } = model;
  const info = classifyCell(ctx, cell.sample, cell.col, model.grid.row(cell.sample));
  const b = cell.sample;
  const j = info.side === 'completion' ? info.index : -1;
  const text = info.id === null ? undefined : texts?.by_id[info.id];
  const at = (m: Parameters<typeof heatAccessor>[0]) => (j >= 0 ? heatAccessor(m, ctx.batch, run)?.(b, j) : undefined);
  const clip = at('clip');
  const flags = (Object.keys(FLAG) as (keyof typeof FLAG)[]).filter((f) => info.flags & FLAG[f]);
  const rows: [string, string][] = [
    ['sample / group', `${b} / ${groupLabel(ctx.batch, b)}`],
    ['region', REGION_NAMES[info.region]],
    ['id', info.id === null ? '—' : String(info.id)],
    ['text', text === undefined ? '(no tokenizer)' : JSON.stringify(visibleText(text))],
    [TERM_HELP.position.split(':')[0], `${cell.col} (${info.side} [${info.index}])`],
    [TERM_HELP.position_id.split(':')[0], String(grid.row(b).position_ids[cell.col])],
    ['attention_mask', bitText(info.attention)],
  ];
  if (turns) rows.push(...turnRows(turns, b, cell.col));
  if (info.side === 'completion') {
    rows.push(['completion_mask', bitText(info.completion)], ['tool_mask', ctx.batch.tool_mask ? bitText(info.tool) : '(none)']);
    rows.push(
      ['logp', fmt(at('logp'))],
      ['ref logp', fmt(at('ref_logp'))],
      ['old logp', fmt(at('old_logp'))],
      ['sampling logp', fmt(at('sampling_logp'))],
      ...(mismatch ? [['log ratio (trainer − sampler)', fmt(heatAccessor('log_ratio', ctx.batch, run, { mismatch })?.(b, j))] as [string, string]] : []),
      ['entropy', fmt(at('entropy'))],
      ['ratio', fmt(at('ratio'))],
      ['KL', fmt(at('kl'))],
      ['loss', fmt(at('loss'))],
      [`weight (${lossType})`, fmt(at('weight'))],
      ['loss contribution', fmt(mul(at('loss'), at('weight')))],
      ['clip', clip === undefined ? '—' : [clip & CLIP_LOW ? 'low' : '', clip & CLIP_HIGH ? 'high' : '', clip & DELTA_BINDS ? 'δ' : ''].filter(Boolean).join(', ') || 'none'],
      ['Δ logp after step', fmt(at('dlogp'))],
    );
    // A what-if on: the token's terms under the update's settings → under the what-if's, beside the update's own.
    for (const t of whatIfToken(run, whatIf, b, j) ?? []) rows.push([`what-if ${t.term}`, `${fmt(t.current)} → ${fmt(t.whatif)}`]);
    const trainer = run.loss?.trainer;
    const factor = at('mask_factor');
    if (trainer?.terms) {
      rows.push(
        [`${trainer.trainer} loss`, fmt(at('trainer_loss'))],
        [`${trainer.trainer} ∂loss/∂logp`, fmt(at('trainer_dlogp'))],
        ['IS weight', trainer.terms.importance_sampling_ratio ? fmt(at('is_weight')) : '(no correction)'],
        ['effective mask', factor === undefined ? '—' : factor === 0 ? '1' : `0 (${MASK_FACTORS[factor]})`],
      );
    }
  }
  return (
    <div className="inspector" data-testid="token-inspector">
      <div className="kv">
        {rows.map(([k, v]) => (
          <KV key={k} k={k} v={v} mono title={HELP[k]} />
        ))}
      </div>
      {flags.map((f) => (
        <div key={f} className="bad small">
          ⚠ {FLAG_TEXT[f]}
        </div>
      ))}
    </div>
  );
}

/** The token's turn and that turn's sums (rows of the token inspector). */
function turnRows(turns: TurnsModel, b: number, col: number): [string, string][] {
  const k = turns.turnAt(b, col);
  if (k < 0) return [['turn', '— (padding)']];
  const t = turns.row(b);
  const s = t.spans[k];
  const sum = turns.sums(b)[k];
  const p = col - t.offset;
  const diff = t.diffs.find((d) => p >= d.start && p < Math.max(d.end, d.start + 1));
  const from = s.source === 'render' ? 'chat-template render' : `masks${t.note ? ` (render: ${t.note})` : ''}`;
  return [
    ['turn', `${k + 1} of ${t.spans.length}: ${s.message !== null ? `message ${s.message}, ` : ''}${ROLE_NAMES[s.role]}`],
    ['turn from', from],
    ['turn tokens', String(sum.tokens)],
    ['turn loss tokens', String(sum.loss_tokens)],
    ['turn Σ loss', sum.loss === null ? '—' : fmt(sum.loss)],
    ['turn Σ KL', sum.kl === null ? '—' : fmt(sum.kl)],
    ['turn Σ |mismatch|', sum.mismatch === null ? '—' : fmt(sum.mismatch)],
    ...(diff ? [['re-tokenized', `${diff.cause} (message ${diff.message})`] as [string, string]] : []),
  ];
}

/** Tooltips of the inspector's rows that need one. */
const HELP: Record<string, string> = {
  position: TERM_HELP.position,
  'position id': TERM_HELP.position_id,
  'turn loss tokens': "the turn's completion tokens with completion_mask × tool_mask × the trainer's effective mask ≠ 0 (a tool response: 0)",
  'turn Σ loss': "Σ per-token loss over the turn's loss tokens",
  'turn Σ KL': "Σ per-token KL over the turn's loss tokens",
  'turn Σ |mismatch|': "Σ |trainer − sampler log-prob| over the turn's tokens (the mismatch explorer's, else old_per_token_logps − sampling_per_token_logps)",
  're-tokenized': "the stored token differs from the chat template's render of the conversation (the Doctor's turn-retokenization names the cause)",
  'effective mask': 'the trainer preset’s loss mask: completion × truncation × tool × entropy × off-policy × importance-sampling masks; 0 names the first factor that removed the token',
};

const mul = (a?: number, b?: number) => (a === undefined || b === undefined ? undefined : a * b);

/** A text of the batch, rendered up to PREVIEW_CHARS with its full length named beyond that. */
function Bounded({ text, className }: { text: string; className: string }) {
  const p = preview(text);
  return (
    <span className={className}>
      {p.text}
      {p.truncated && (
        <span className="muted small" data-testid="text-truncated" data-length={p.length}>
          {previewNote(p)}
        </span>
      )}
    </span>
  );
}

export function SampleInspector() {
  const selected = useStudio((s) => s.selected);
  const focus = useStudio((s) => s.focus);
  const batch = useStudio((s) => s.batch);
  const run = useStudio((s) => s.run);
  const texts = useStudio((s) => s.tokenTexts);
  const b = selected?.sample ?? focus?.sample ?? null;
  const stats = useStudio(groupStats);
  if (!batch || b === null || b >= batch.completion_ids.length) return <div className="inspector muted" data-testid="sample-inspector">select a sample</div>;
  const g = groupLabel(batch, b);
  const joined = (ids: number[]) => (texts ? ids.map((t) => texts.by_id[t] ?? '').join('') : null);
  const promptText = batch.prompt_texts?.[b] ?? joined(batch.prompt_ids[b]);
  const completionText = batch.completion_texts?.[b] ?? joined(batch.completion_ids[b]);
  const names = rewardNames(batch, run);
  const perFunc = batch.rewards_per_func;
  const reward = batch.rewards?.[b];
  const adv = batch.advantages?.[b];
  const gs = stats?.find((s) => s.group === g);
  return (
    <div className="inspector" data-testid="sample-inspector">
      <div className="sample-text mono">
        <Bounded className="t-prompt" text={promptText ?? `[${batch.prompt_ids[b].join(', ')}]`} />
        <span className="t-boundary" title="prompt | completion boundary">▌</span>
        <Bounded className="t-completion" text={completionText ?? `[${batch.completion_ids[b].join(', ')}]`} />
      </div>
      <div className="kv">
        <KV mono k="sample / group" v={`${b} / ${g}`} />
        {perFunc?.[b] && names.map((n, f) => <KV mono key={n} k={n} v={fmt(perFunc[b][f])} />)}
        <KV mono k="reward" v={fmt(reward)} />
        <KV mono k="advantage" v={fmt(adv)} />
        <KV mono k="group mean / std" v={gs ? `${fmt(gs.mean)} / ${fmt(gs.std)}${gs.zero_std ? ' (zero std: no signal)' : ''}` : '—'} />
      </div>
    </div>
  );
}
