// The grid's legends: the region colours, boundary and mask marks (with what the row readout letters
// mean), and the heat overlay's colour scale with its range, so no colour on the canvas is unexplained.
import { fmt } from '../fields.tsx';
import { CLIP_HIGH, CLIP_LOW, DELTA_BINDS } from '../../store/vocabulary.ts';
import { REGION_COLORS, RETOKENIZED_COLOR, ROLE_COLORS } from '../../view/colors.ts';
import { ROLE_NAMES } from '../../view/turns.ts';
import { FACTOR_COLORS, HEATS, heatColor, rampColor, type HeatSource } from './heat.ts';
import { MASK_FACTORS } from '../../store/vocabulary.ts';

export function Legend() {
  const names = ['pad', 'prompt', 'special', 'completion', 'EOS', 'after EOS'];
  return (
    <div className="legend small">
      {names.map((n, i) => (
        <span key={n}>
          <i style={{ background: REGION_COLORS[i + 1] }} />
          {n}
        </span>
      ))}
      <span>
        <i style={{ background: '#f2cc60', width: 3 }} />
        boundary
      </span>
      <span>
        <i style={{ border: '2px solid #ff4040', background: 'transparent' }} />
        mask ≠ region
      </span>
      <span className="muted">rows: p = prompt ids / mask, c = completion ids; m, t, o, r = completion_mask, tool_mask, old, ref lengths; Σm = Σ completion_mask</span>
    </div>
  );
}

/** The turns' marks: role colours, the turn separator, the re-tokenization outline; collapsed, what a turn cell's numbers are. */
export function TurnLegend({ collapsed }: { collapsed: boolean }) {
  const roles = Object.keys(ROLE_COLORS) as (keyof typeof ROLE_COLORS)[];
  return (
    <div className="legend small turn-legend" data-testid="turn-legend">
      <span className="muted">turns:</span>
      {roles.map((r) => (
        <span key={r} data-role={r}>
          <i style={{ background: ROLE_COLORS[r] }} />
          {ROLE_NAMES[r]}
        </span>
      ))}
      <span>
        <i style={{ background: '#e6edf3', width: 2 }} />
        turn boundary
      </span>
      <span title="stored tokens that differ from the chat template's render of the conversation (the Doctor's turn-retokenization: a re-tokenized tool call, a BPE merge at a seam, …)">
        <i style={{ border: `2px dashed ${RETOKENIZED_COLOR}`, background: 'transparent' }} />
        re-tokenized
      </span>
      <span className="muted">
        {collapsed ? 'cell: role tokens/tokens in the loss, Σℓ = Σ per-token loss; ← / → move by turn' : 'tokens tool_mask keeps out of the loss are dimmed'}
      </span>
    </div>
  );
}

/** The heat overlay's colour scale: the gradient with its ends (and centre for diverging metrics). */
export function HeatLegend({ src }: { src: HeatSource }) {
  if (src.metric === 'clip') {
    return (
      <span className="heat-legend small" data-testid="heat-legend">
        <i style={{ width: 12, background: heatColor(src, CLIP_LOW) }} />
        low-clipped <i style={{ width: 12, background: heatColor(src, CLIP_HIGH) }} />
        high-clipped <i style={{ width: 12, background: heatColor(src, DELTA_BINDS) }} />
        δ binds
      </span>
    );
  }
  if (src.metric === 'mask_factor') {
    return (
      <span className="heat-legend small" data-testid="heat-legend" title="the first factor of the trainer's effective loss mask that removed the token">
        {MASK_FACTORS.map((f, k) => (
          <span key={f}>
            <i style={{ width: 12, background: FACTOR_COLORS[k] }} /> {f}{' '}
          </span>
        ))}
      </span>
    );
  }
  const { scale } = src;
  const stops = Array.from({ length: 9 }, (_, i) => rampColor(i / 8, scale.center !== null));
  const how = scale.mode === 'percentile' ? `p${scale.clip}–p${100 - scale.clip}` : scale.mode === 'minmax' ? 'min–max' : 'fixed';
  return (
    <span
      className="heat-legend small"
      data-testid="heat-legend"
      data-lo={scale.lo}
      data-hi={scale.hi}
      data-mode={scale.mode}
      data-log={scale.log ? '1' : '0'}
      title={`${HEATS[src.metric].label}: colour by value over tokens with completion_mask = 1 (${how}${scale.log ? ', log scale' : ''}); values beyond the range take its end colour; magenta = NaN / ±inf`}
    >
      {fmt(scale.lo, 3)}
      <i style={{ background: `linear-gradient(to right, ${stops.join(', ')})` }} />
      {fmt(scale.hi, 3)}
      <span className="muted" data-testid="heat-unit">{src.unit ?? ''}</span>
      <span className="muted">
        ({how}
        {scale.log ? ', log' : ''}
        {scale.center !== null ? `, centre ${scale.center}` : ''})
      </span>
    </span>
  );
}
