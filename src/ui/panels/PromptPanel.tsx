// The embedded task (its model, prompts and tools), the prompt set (system + user messages and the reference
// answer of each prompt), a multi-turn prompt set's tools, and the sampling settings.
import { useState } from 'react';
import { useStudio } from '../../store/index.ts';
import { chooseTask } from '../../store/controller.ts';
import { TASKS, TASK_IDS, TOOL_LOOP_WAYS, type TaskId } from '../../store/vocabulary.ts';
import { CheckField, NumberField, Section, SelectField, Field } from '../fields.tsx';

/** The embedded task: choosing one loads its model and replaces the prompt set, sampling, rewards and tools. */
export function TaskPanel() {
  const task = useStudio((s) => s.task);
  const labels = Object.fromEntries(TASK_IDS.map((id) => [id, TASKS[id].label])) as Record<TaskId, string>;
  return (
    <Section title="Task">
      <SelectField label="embedded task" testId="task" value={task} options={TASK_IDS} labels={labels} title="loads the task's embedded model and replaces the prompt set, sampling, rewards and tools (the loss settings stay)" onChange={(id) => void chooseTask(id)} />
    </Section>
  );
}

/** A multi-turn prompt set's tools: the functions (JS, run in the sandbox), their JSON schemas, the loop. */
export function ToolsPanel() {
  const tools = useStudio((s) => s.tools);
  const set = useStudio((s) => s.setTools);
  // The schemas as typed: kept while they do not parse, so nothing entered is lost; the store holds the last valid.
  const [schemaText, setSchemaText] = useState<string | null>(null);
  if (!tools) return null;
  const shown = schemaText ?? JSON.stringify(tools.schemas, null, 1);
  let schemaError: string | null = null;
  if (schemaText !== null) {
    try {
      const v: unknown = JSON.parse(schemaText);
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'object' && x !== null)) schemaError = 'a JSON array of function schemas';
    } catch (e) {
      schemaError = (e as Error).message;
    }
  }
  return (
    <Section title="Tools (multi-turn)">
      <Field label="tool functions (JS: an object of functions of the call's arguments)" wide>
        <textarea rows={3} className="mono" aria-label="tool functions" data-testid="tools-source" value={tools.source} onChange={(e) => set({ source: e.target.value })} />
      </Field>
      <Field label="tool schemas (tools= of apply_chat_template)" wide>
        <textarea
          rows={4}
          className="mono"
          aria-label="tool schemas"
          aria-invalid={schemaError !== null}
          value={shown}
          onChange={(e) => {
            setSchemaText(e.target.value);
            try {
              const v: unknown = JSON.parse(e.target.value);
              if (Array.isArray(v) && v.every((x) => typeof x === 'object' && x !== null)) set({ schemas: v as Record<string, unknown>[] });
            } catch {
              // Kept as typed (shown with its error); the last valid schemas stay in use.
            }
          }}
        />
        {schemaError && <div className="field-error small">schemas: {schemaError}; the last valid ones are used</div>}
      </Field>
      <div className="grid2">
        <SelectField label="tool loop" testId="tool-loop" value={tools.way} options={Object.keys(TOOL_LOOP_WAYS) as (keyof typeof TOOL_LOOP_WAYS)[]} titles={(w) => TOOL_LOOP_WAYS[w]} onChange={(way) => set({ way })} />
        <NumberField integer label="max_tool_calling_iterations" value={tools.max_tool_calling_iterations} min={0} onChange={(v) => set({ max_tool_calling_iterations: v! })} />
        <NumberField integer label="ms per call" value={tools.timeout_ms} min={1} onChange={(v) => set({ timeout_ms: v! })} />
      </div>
    </Section>
  );
}

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

/**
 * The prompt set's sampling. G, the temperature, the completion budget and top-k / top-p are also the trainer's
 * settings of the same name (one value: src/bridge/settings.ts samplingLayer), so they are edited here only.
 */
export function SamplingPanel() {
  const s = useStudio((st) => st.sampling);
  const set = useStudio((st) => st.setSampling);
  return (
    <Section title="Sampling">
      <div className="grid2">
        <NumberField integer label="G (num_generations)" value={s.num_generations} min={1} onChange={(v) => set({ num_generations: v! })} testId="num-generations" />
        <NumberField label="temperature" testId="sampling-temperature" value={s.temperature} min={0} onChange={(v) => set({ temperature: v! })} />
        <NumberField integer label="top-k (0 off)" value={s.top_k} min={0} onChange={(v) => set({ top_k: v! })} />
        <NumberField label="top-p (1 off)" testId="top-p" value={s.top_p} min={0} max={1} onChange={(v) => set({ top_p: v! })} />
        <NumberField integer label="min new tokens" value={s.min_new_tokens} min={0} onChange={(v) => set({ min_new_tokens: v! })} />
        <NumberField integer label="max new tokens (max_completion_length)" value={s.max_new_tokens} min={1} testId="max-new-tokens" onChange={(v) => set({ max_new_tokens: v! })} />
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
        <NumberField integer label="seed" testId="sampling-seed" value={s.seed} onChange={(v) => set({ seed: v! })} />
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
