// Small pieces shared by the panels: labelled number / text / select / checkbox inputs that write straight
// to the store (numbers are committed only when they parse), key / value rows, sections, number formats.
import { memo, useEffect, useState, type ReactNode } from 'react';
import { useStudio } from '../store/index.ts';

/** `wide`: the field takes a whole row of a two-column form (a select whose values are too long for half of it). */
export function Field({ label, title, children, wide = false }: { label: string; title?: string; children: ReactNode; wide?: boolean }) {
  return (
    <label className={wide ? 'field wide' : 'field'} title={title}>
      <span className="field-label">{label}</span>
      {children}
    </label>
  );
}

/** Why `text` is not a valid value for a number field with these bounds, or null when it is. */
export function numberProblem(text: string, o: { min?: number; max?: number; nullable?: boolean; integer?: boolean }): string | null {
  const t = text.trim();
  if (t === '') return o.nullable ? null : 'is empty';
  const v = Number(t);
  if (!Number.isFinite(v)) return `${JSON.stringify(text)} is not a number`;
  if (o.integer && !Number.isInteger(v)) return `${t} is not an integer`;
  if (o.min !== undefined && v < o.min) return `${t} is below the minimum ${o.min}`;
  if (o.max !== undefined && v > o.max) return `${t} is above the maximum ${o.max}`;
  return null;
}

/**
 * A number input that keeps what is typed and commits valid numbers (or null where allowed). An invalid
 * entry is registered as a form error under the field's label: the stepper refuses to start an update
 * while one exists, so the run never silently uses the last valid value.
 */
export function NumberField(props: { label: string; value: number | null; onChange(v: number | null): void; min?: number; max?: number; nullable?: boolean; integer?: boolean; title?: string; testId?: string; /** not a setting of the next update (the what-if form): never blocks one */ detached?: boolean }) {
  const { label, value, onChange, min, max, nullable, integer, title, testId, detached } = props;
  const [text, setText] = useState(value === null ? '' : String(value));
  const setFormError = useStudio((s) => s.setFormError);
  useEffect(() => {
    if ((value === null ? '' : String(value)) !== text && Number(text) !== value) setText(value === null ? '' : String(value));
  }, [value]);
  const problem = numberProblem(text, { min, max, nullable, integer });
  useEffect(() => {
    if (!detached) setFormError(label, problem);
  }, [label, problem]);
  useEffect(() => () => (detached ? undefined : setFormError(label, null)), [label]);
  const bad = problem !== null;
  return (
    <Field label={label} title={bad ? `${label}: ${problem}` : title}>
      <input
        className={bad ? 'num bad' : 'num'}
        aria-invalid={bad}
        data-testid={testId}
        type="text"
        inputMode="decimal"
        value={text}
        placeholder={nullable ? 'off' : undefined}
        onChange={(e) => {
          const t = e.target.value;
          setText(t);
          if (t.trim() === '' && nullable) onChange(null);
          else if (numberProblem(t, { min, max, nullable, integer }) === null) onChange(Number(t));
        }}
      />
    </Field>
  );
}

export function SelectField<T extends string>(props: { label: string; value: T; options: readonly T[]; onChange(v: T): void; title?: string; labels?: Partial<Record<T, string>>; titles?: (o: T) => string; testId?: string }) {
  return (
    <Field label={props.label} title={props.title}>
      <select value={props.value} aria-label={props.label || props.title} data-testid={props.testId} title={props.titles?.(props.value)} onChange={(e) => props.onChange(e.target.value as T)}>
        {props.options.map((o) => (
          <option key={o} value={o} title={props.titles?.(o)}>
            {props.labels?.[o] ?? o}
          </option>
        ))}
      </select>
    </Field>
  );
}

export function CheckField({ label, value, onChange, title, testId, disabled }: { label: string; value: boolean; onChange(v: boolean): void; title?: string; testId?: string; disabled?: boolean }) {
  return (
    <label className="check" title={title}>
      <input type="checkbox" checked={value} aria-label={label || title} data-testid={testId} disabled={disabled} onChange={(e) => onChange(e.target.checked)} />
      {label}
    </label>
  );
}

/** One key / value pair of a `.kv` grid: two cells, no wrapper, so the grid lines them up. Memoised (its props are text): an inspector re-rendering on each stage's result redraws only the pairs that changed. */
export const KV = memo(function KV({ k, v, mono, title }: { k: string; v: string; mono?: boolean; title?: string }) {
  return (
    <>
      <span title={title}>{title ? <abbr>{k}</abbr> : k}</span>
      <span className={mono ? 'mono' : undefined}>{v}</span>
    </>
  );
});

/** A collapsible panel section. */
export function Section({ title, children, open = true, right }: { title: string; children: ReactNode; open?: boolean; right?: ReactNode }) {
  return (
    <details className="section" open={open}>
      <summary>
        <span>{title}</span>
        {right}
      </summary>
      <div className="section-body">{children}</div>
    </details>
  );
}

export function formatBytes(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : n < 10 ? 2 : 1)} ${units[i]}`;
}

/** A number for the dense readouts: 4 significant digits, exponent when tiny or huge, NaN/±inf spelled out. */
export function fmt(v: number | undefined | null, digits = 4): string {
  if (v === undefined || v === null) return '—';
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+inf' : '-inf';
  if (v === 0) return '0';
  const a = Math.abs(v);
  return a < 1e-3 || a >= 1e5 ? v.toExponential(digits - 1) : Number(v.toPrecision(digits)).toString();
}
