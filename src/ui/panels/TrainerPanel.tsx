// The trainer preset: which trainer's objective the loss side follows (trl | verl | openrlhf) and its settings
// form, generated from the trainer's settings tables (src/grpo/settings: the trainer's own field names, type,
// default, allowed values, one-line meaning and source as the tooltip). A value the table refuses is shown
// with the field named and registered as a form error (the stepper will not start), never replaced. For TRL,
// the fields the loss panel also has (loss_type, beta, epsilon, ...) are one value: editing either edits both.
import { useEffect, useState } from 'react';
import { useStudio } from '../../store/index.ts';
import { checkSetting, TRAINER_TABLES, TRAINERS, trainerConfigOf, type SettingSpec } from '../../store/vocabulary.ts';
import { Field, Section, SelectField } from '../fields.tsx';

const SHOWN: Record<string, string> = { loss: 'loss', run: 'run context', batch: 'batch', sampling: 'sampling', advantages: 'advantages', optimizer: 'optimizer' };

const text = (v: unknown): string => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** The typed text as the spec's type: numbers, JSON lists / objects, '' as null; unparsable text stays text (the check names it). */
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
  const allowed = spec.values ? ` — one of ${spec.values.join(', ')}${spec.nullable ? ', null' : ''}` : '';
  return `${spec.doc} (${spec.type}, default ${JSON.stringify(spec.default)}${allowed})${spec.source ? ` — ${spec.source}` : ''}${spec.studio ? ' — studio-only' : ''}`;
}

/** One setting: its input, the value the preset reads, and the check of what is typed. */
function SettingField({ spec, where, value }: { spec: SettingSpec; where: 'config' | 'run'; value: unknown }) {
  const setField = useStudio((s) => s.setTrainerField);
  const setFormError = useStudio((s) => s.setFormError);
  const field = `${where}.${spec.name}`;
  const [typed, setTyped] = useState(text(value));
  const [problem, setProblem] = useState<string | null>(null);
  // Follow a value set elsewhere (the loss panel, an import), not the one being typed ("0." is 0 on its way to "0.5").
  useEffect(() => {
    if (JSON.stringify(parse(spec, typed)) !== JSON.stringify(value)) setTyped(text(value));
  }, [text(value)]);
  useEffect(() => () => setFormError(field, null), [field]);
  const commit = (v: unknown) => {
    try {
      const ok = checkSetting(spec, v, where);
      setProblem(null);
      setFormError(field, null);
      setField(where, spec.name, ok);
    } catch (e) {
      const msg = (e as Error).message;
      setProblem(msg);
      setFormError(field, msg.slice(field.length + 2));
    }
  };
  const testId = `trainer-field-${spec.name}`;
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
    input = (
      <input
        type="text"
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
  }
  return (
    <Field label={spec.name} title={problem ?? tooltip(spec)}>
      {input}
      {problem && (
        <span className="bad small" data-testid="trainer-field-error">
          {problem}
        </span>
      )}
    </Field>
  );
}

export function TrainerPanel() {
  const preset = useStudio((s) => s.trainer);
  const loss = useStudio((s) => s.loss);
  const setTrainer = useStudio((s) => s.setTrainer);
  const tables = TRAINER_TABLES[preset.trainer];
  const config = trainerConfigOf(preset, loss);
  const groups = (['loss', 'run', 'batch', 'sampling', 'advantages', 'optimizer'] as const).map((scope) => ({
    scope,
    rows: (scope === 'run' ? tables.run : tables.config.filter((s) => s.scope === scope)).map((spec) => ({ spec, where: (scope === 'run' ? 'run' : 'config') as 'config' | 'run' })),
  }));
  return (
    // Closed until opened: its dozens of fields would otherwise sit in every Tab walk through the page.
    <Section title={`Trainer preset: ${preset.trainer}`} open={false}>
      <SelectField label="trainer" value={preset.trainer} options={TRAINERS} testId="trainer" title="whose objective the loss, what-if, loss table and overlays follow (the step's gradient runs TRL's)" onChange={setTrainer} />
      {groups.map(({ scope, rows }) =>
        rows.length === 0 ? null : (
          <details key={scope} open={scope === 'loss' || scope === 'run'} className="subsection" data-testid={`trainer-group-${scope}`}>
            <summary>
              {SHOWN[scope]} ({rows.length})
            </summary>
            <div className="grid2">
              {rows.map(({ spec, where }) => (
                <SettingField key={`${preset.trainer}.${where}.${spec.name}`} spec={spec} where={where} value={(where === 'config' ? config[spec.name] : preset.run[spec.name]) ?? spec.default} />
              ))}
            </div>
          </details>
        ),
      )}
    </Section>
  );
}
