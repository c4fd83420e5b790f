// Prompt set (system + user messages and the reference answer of each prompt) and sampling settings.
import { useStudio } from '../../store/index.ts';
import { CheckField, NumberField, Section, SelectField, Field } from '../fields.tsx';

export function PromptPanel() {
  const prompts = useStudio((s) => s.prompts);
  const setPrompt = useStudio((s) => s.setPrompt);
  const addPrompt = useStudio((s) => s.addPrompt);
  const removePrompt = useStudio((s) => s.removePrompt);
  return (
    <Section title={`Prompts (${prompts.length})`} right={<button className="small-btn" onClick={(e) => { e.preventDefault(); addPrompt(); }}>+ prompt</button>}>
      {prompts.map((p, i) => (
        <div className="prompt" key={i} data-testid={`prompt-${i}`}>
          <div className="prompt-head">
            <span className="muted">#{i}</span>
            <button className="x" title="remove prompt" aria-label={`remove prompt ${i}`} onClick={() => removePrompt(i)}>×</button>
          </div>
          <textarea rows={1} aria-label={`prompt ${i} system message`} placeholder="system (optional)" value={p.system} onChange={(e) => setPrompt(i, { system: e.target.value })} />
          <textarea rows={2} aria-label={`prompt ${i} user message`} placeholder="user" value={p.user} onChange={(e) => setPrompt(i, { user: e.target.value })} data-testid={`prompt-user-${i}`} />
          <input aria-label={`prompt ${i} answer`} placeholder="answer (for rewards)" value={p.answer} onChange={(e) => setPrompt(i, { answer: e.target.value })} />
        </div>
      ))}
    </Section>
  );
}

export function SamplingPanel() {
  const s = useStudio((st) => st.sampling);
  const set = useStudio((st) => st.setSampling);
  return (
    <Section title="Sampling">
      <div className="grid2">
        <NumberField integer label="G (num_generations)" value={s.num_generations} min={1} onChange={(v) => set({ num_generations: v! })} testId="num-generations" />
        <NumberField label="temperature (sampler)" testId="sampling-temperature" value={s.temperature} min={0} onChange={(v) => set({ temperature: v! })} />
        <NumberField integer label="top-k (0 off)" value={s.top_k} min={0} onChange={(v) => set({ top_k: v! })} />
        <NumberField label="top-p (1 off)" testId="top-p" value={s.top_p} min={0} max={1} onChange={(v) => set({ top_p: v! })} />
        <NumberField integer label="min new tokens" value={s.min_new_tokens} min={0} onChange={(v) => set({ min_new_tokens: v! })} />
        <NumberField integer label="max new tokens" value={s.max_new_tokens} min={1} testId="max-new-tokens" onChange={(v) => set({ max_new_tokens: v! })} />
        <NumberField label="repetition penalty" value={s.repetition_penalty} min={0} onChange={(v) => set({ repetition_penalty: v! })} />
        <NumberField label="presence penalty" value={s.presence_penalty} onChange={(v) => set({ presence_penalty: v! })} />
        <NumberField label="frequency penalty" value={s.frequency_penalty} onChange={(v) => set({ frequency_penalty: v! })} />
        <SelectField
          label="penalty scope"
          value={s.penalty_scope}
          options={['completion', 'prompt+completion'] as const}
          onChange={(v) => set({ penalty_scope: v })}
          title="prompt+completion is HF's repetition penalty: prompt words get penalised, EOS never does (seed 002's 1-token collapse)"
        />
        <NumberField integer label="seed" value={s.seed} onChange={(v) => set({ seed: v! })} />
        <Field label="EOS ids (empty: tokenizer's)">
          <input
            value={s.eos_token_ids?.join(', ') ?? ''}
            placeholder="tokenizer default"
            onChange={(e) => {
              const parts = e.target.value.split(/[\s,]+/).filter(Boolean).map(Number);
              set({ eos_token_ids: parts.length === 0 ? null : parts.every(Number.isInteger) ? parts : s.eos_token_ids });
            }}
          />
        </Field>
      </div>
      <CheckField label="sample (off: greedy)" value={s.do_sample} onChange={(v) => set({ do_sample: v })} />
    </Section>
  );
}
