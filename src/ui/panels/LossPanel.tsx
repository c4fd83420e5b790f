// Loss & optimizer: the rows of the trainer's table marked for this panel (form: 'loss' — the aggregation,
// β and the KL estimator, clipping ε / ε_high and δ, temperature, reward scaling and advantage ε,
// importance-sampling level, max completion length, position ids, optimizer, learning rate, weight decay,
// gradient clipping), in the trainer's own names with the table's bounds, each showing where its value comes
// from. The trainer preset form edits the same values.
import { useStudio } from '../../store/index.ts';
import { baseKindOf, configTable, effectiveOf, trainerOf, settingOf } from '../../store/vocabulary.ts';
import { Section } from '../fields.tsx';
import { SettingField } from '../SettingField.tsx';

export function LossPanel() {
  const trainer = useStudio(trainerOf);
  const base = useStudio(baseKindOf);
  const effective = useStudio(effectiveOf);
  const setSetting = useStudio((s) => s.setSetting);
  const rows = configTable(trainer).filter((s) => s.form === 'loss');
  return (
    <Section title="Loss & optimizer">
      {'error' in effective ? (
        <div className="bad small" data-testid="settings-error">
          {effective.error}
        </div>
      ) : (
        <div className="grid2">
          {rows.map((spec) => {
            const { value, provenance } = settingOf(effective.settings, 'config', spec.name);
            return <SettingField key={`${trainer}.${spec.name}`} spec={spec} where="config" value={value} provenance={provenance} testId={`loss-field-${spec.name}`} onCommit={(v) => setSetting(base, 'config', spec.name, v)} />;
          })}
        </div>
      )}
    </Section>
  );
}
