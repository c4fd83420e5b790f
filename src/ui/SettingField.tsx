// One setting of a trainer's (or the studio's) table as a form field: its input by the row's type (number,
// integer, boolean, enum, text, JSON list / object), bounds and allowed values from the row — the same check
// (checkSetting) the CLI and the worker apply, so a field has one rule everywhere — its meaning, default and
// source as the tooltip, and where the value comes from (default · preset · from FILE · edited). A value the
// row refuses is shown with the field named and registered as a form error (the stepper will not start),
// never replaced. "reset" drops the user's edit, so the base's value shows through again.
import { useEffect, useState } from 'react';
import { useStudio } from '../store/index.ts';
import { checkSetting, type Provenance, type SettingSpec } from '../store/vocabulary.ts';
import { Field } from './fields.tsx';

/** An enum value longer than this many characters does not read whole in half a side panel: its field takes a row. */
const WIDE_CHARS = 13;

const text = (v: unknown): string => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** The typed text as the row's type: numbers, JSON lists / objects, '' as null; unparsable text stays text (the check names it). */
function parse(spec: SettingSpec, t: string): unknown {
  const s = t.trim();
  if (s === '') return spec.nullable ? null : t;
  if (spec.type === 'number' || spec.type === 'integer') return Number.isFinite(Number(s)) ? Number(s) : t;
  if (spec.type === 'number-list' || spec.type === 'object') {
    try {
      return JSON.parse(s);
    } catch {
      return t;
    }
  }
  return t;
}

function tooltip(spec: SettingSpec): string {
  const allowed = !spec.values ? '' : spec.type === 'enum' ? ` — one of ${spec.values.join(', ')}${spec.nullable ? ', null' : ''}` : ` — the studio reproduces ${spec.values.join(', ')}`;
  return `${spec.doc} (${spec.type}, default ${JSON.stringify(spec.default)}${allowed})${spec.source ? ` — ${spec.source}` : ''}${spec.studio ? ' — studio-only' : ''}`;
}

/** Where a value comes from, in a word: "default", "preset", "file", "edited" (the file's name in the title). */
export function ProvenanceBadge({ p }: { p: Provenance }) {
  const title = p.origin === 'file' ? `from ${p.label ?? 'the imported file'}` : p.origin === 'preset' ? `the ${p.label ?? 'studio'} preset` : p.origin === 'edited' ? 'set by you' : "the trainer's default";
  return (
    <span className={`prov prov-${p.origin}`} data-testid="provenance" data-origin={p.origin} title={title}>
      {p.origin === 'file' ? 'file' : p.origin}
    </span>
  );
}

/**
 * One setting: `value` and `provenance` as resolved, `onCommit` with a checked value (or undefined: drop the
 * edit). `detached` fields (the what-if form) never block an update.
 */
export function SettingField({ spec, where, value, provenance, onCommit, testId, detached }: { spec: SettingSpec; where: 'config' | 'run'; value: unknown; provenance: Provenance; onCommit(v: unknown): void; testId: string; detached?: boolean }) {
  const setFormError = useStudio((s) => s.setFormError);
  const field = `${where}.${spec.name}`;
  const [typed, setTyped] = useState(text(value));
  const [problem, setProblem] = useState<string | null>(null);
  // Follow a value set elsewhere (the other form, an import), not the one being typed ("0." is 0 on its way to "0.5").
  useEffect(() => {
    if (JSON.stringify(parse(spec, typed)) !== JSON.stringify(value)) setTyped(text(value));
  }, [text(value)]);
  useEffect(() => () => (detached ? undefined : setFormError(field, null)), [field]);
  const commit = (v: unknown) => {
    try {
      const ok = checkSetting(spec, v, where);
      setProblem(null);
      if (!detached) setFormError(field, null);
      onCommit(ok);
    } catch (e) {
      const msg = (e as Error).message;
      setProblem(msg);
      if (!detached) setFormError(field, msg.slice(field.length + 2));
    }
  };
  let input;
  if (spec.type === 'boolean') {
    input = <input type="checkbox" data-testid={testId} checked={value === true} onChange={(e) => commit(e.target.checked)} />;
  } else if (spec.type === 'enum') {
    input = (
      <select data-testid={testId} value={value === null ? '' : String(value)} onChange={(e) => commit(e.target.value === '' ? null : e.target.value)}>
        {spec.nullable && <option value="">null</option>}
        {spec.values!.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    );
  } else {
    const list = spec.type === 'string' && spec.values ? `values-${spec.name}` : undefined;
    input = (
      <input
        type="text"
        list={list}
        className={problem ? 'bad' : undefined}
        aria-invalid={problem !== null}
        data-testid={testId}
        value={typed}
        placeholder={spec.nullable ? 'null' : undefined}
        onChange={(e) => {
          setTyped(e.target.value);
          commit(parse(spec, e.target.value));
        }}
      />
    );
    // A string row's reproduced values are offered, not imposed (a dump's other value is read, then refused where used).
    if (list) {
      input = (
        <>
          {input}
          <datalist id={list}>
            {spec.values!.map((o) => (
              <option key={o} value={o} />
            ))}
          </datalist>
        </>
      );
    }
  }
  return (
    <Field label={spec.name} title={problem ?? tooltip(spec)} wide={spec.type === 'enum' && spec.values!.some((o) => o.length > WIDE_CHARS)}>
      {input}
      <ProvenanceBadge p={provenance} />
      {provenance.origin === 'edited' && !detached && (
        <button className="link small" title="drop your value: the base's shows through" onClick={() => onCommit(undefined)}>
          reset
        </button>
      )}
      {problem && (
        <span className="bad small" data-testid="trainer-field-error">
          {problem}
        </span>
      )}
    </Field>
  );
}
