// Loss settings: the aggregation (TRL loss_type or verl's), β and the KL estimator, clipping ε low/high
// and δ, temperature, reward scaling, importance-sampling level, optimizer, and the position-ids policy.
import { useStudio } from '../../store/index.ts';
import { AGGREGATIONS } from '../../store/vocabulary.ts';
import { NumberField, Section, SelectField } from '../fields.tsx';

export function LossPanel() {
  const l = useStudio((s) => s.loss);
  const set = useStudio((s) => s.setLoss);
  return (
    <Section title="Loss & optimizer">
      <div className="grid2">
        <SelectField label="loss_type / aggregation" value={l.loss_type} options={AGGREGATIONS} onChange={(v) => set({ loss_type: v })} />
        <NumberField label="β (KL coef)" value={l.beta} min={0} onChange={(v) => set({ beta: v! })} />
        <SelectField label="KL estimator" value={l.kl_estimator} options={['k1', 'k2', 'k3'] as const} onChange={(v) => set({ kl_estimator: v })} />
        <NumberField label="ε low" value={l.epsilon_low} min={0} onChange={(v) => set({ epsilon_low: v! })} />
        <NumberField label="ε high" value={l.epsilon_high} min={0} onChange={(v) => set({ epsilon_high: v! })} />
        <NumberField label="δ (ratio cap)" value={l.delta} nullable min={1} onChange={(v) => set({ delta: v })} />
        <NumberField label="temperature" value={l.temperature} min={1e-6} onChange={(v) => set({ temperature: v! })} />
        <SelectField label="scale_rewards" value={l.scale_rewards} options={['group', 'batch', 'none'] as const} onChange={(v) => set({ scale_rewards: v })} />
        <SelectField label="advantage ε" value={l.advantage_estimator} options={['trl', 'verl'] as const} labels={{ trl: 'trl (std + 1e-4)', verl: 'verl (std + 1e-6)' }} onChange={(v) => set({ advantage_estimator: v })} />
        <SelectField label="importance sampling" value={l.importance_sampling_level} options={['token', 'sequence'] as const} onChange={(v) => set({ importance_sampling_level: v })} />
        <NumberField label="max completion length" value={l.max_completion_length} min={1} onChange={(v) => set({ max_completion_length: v! })} title="L_max for dr_grpo (verl seq-mean-token-sum-norm divides by the padded width T instead)" />
        <SelectField label="position ids" value={l.position_ids} options={['from_attention_mask', 'arange'] as const} onChange={(v) => set({ position_ids: v })} title="arange is what a forward without position_ids gets: left padding shifts GPT-2's learned positions" />
        <SelectField label="optimizer" value={l.optimizer} options={['adamw', 'sgd'] as const} onChange={(v) => set({ optimizer: v })} />
        <NumberField label="lr" value={l.lr} min={0} onChange={(v) => set({ lr: v! })} />
        <NumberField label="weight decay" value={l.weight_decay} min={0} onChange={(v) => set({ weight_decay: v! })} />
        <NumberField label="max grad norm (0 off)" value={l.max_grad_norm} min={0} onChange={(v) => set({ max_grad_norm: v! })} />
      </div>
    </Section>
  );
}
