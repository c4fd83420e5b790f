// The trainer preset: which trainer's objective the loss side follows (trl | verl | openrlhf) and its settings
// form, generated from the trainer's settings tables (src/grpo/settings: the trainer's own field names, type,
// default, allowed values, one-line meaning and source as the tooltip), each field showing where its value
// comes from. The loss panel shows some of the same rows: one value, edited in either.
import { useStudio } from '../../store/index.ts';
import { baseKindOf, configTable, effectiveOf, trainerOf, runTable, settingOf, SCOPES, TRAINERS, type Scope } from '../../store/vocabulary.ts';
import { Section, SelectField } from '../fields.tsx';
import { SettingField } from '../SettingField.tsx';

export function TrainerPanel() {
  const trainer = useStudio(trainerOf);
  const base = useStudio(baseKindOf);
  const effective = useStudio(effectiveOf);
  const setTrainer = useStudio((s) => s.setTrainer);
  const setSetting = useStudio((s) => s.setSetting);
  const own = configTable(trainer).filter((s) => s.trainer === trainer && !s.studio);
  const groups = (Object.keys(SCOPES) as Scope[]).map((scope) => ({
    scope,
    rows: (scope === 'run' ? runTable(trainer) : own.filter((s) => s.scope === scope)).map((spec) => ({ spec, where: (scope === 'run' ? 'run' : 'config') as 'config' | 'run' })),
  }));
  return (
    // Closed until opened: its dozens of fields would otherwise sit in every Tab walk through the page.
    <Section title={`Trainer preset: ${trainer}`} open={false}>
      <SelectField label="trainer" value={trainer} options={TRAINERS} testId="trainer" title="whose objective the loss, gradient, what-if, loss table and overlays follow" onChange={(t) => setTrainer(base, t)} />
      {'error' in effective && (
        <div className="bad small" data-testid="settings-error">
          {effective.error}
        </div>
      )}
      {'settings' in effective &&
        groups.map(({ scope, rows }) =>
          rows.length === 0 ? null : (
            <details key={scope} open={scope === 'loss' || scope === 'run'} className="subsection" data-testid={`trainer-group-${scope}`}>
              <summary>
                {SCOPES[scope].title} ({rows.length})
              </summary>
              <div className="grid2">
                {rows.map(({ spec, where }) => {
                  const { value, provenance } = settingOf(effective.settings, where, spec.name);
                  return <SettingField key={`${trainer}.${where}.${spec.name}`} spec={spec} where={where} value={value} provenance={provenance} testId={`trainer-field-${spec.name}`} onCommit={(v) => setSetting(base, where, spec.name, v)} />;
                })}
              </div>
            </details>
          ),
        )}
    </Section>
  );
}
