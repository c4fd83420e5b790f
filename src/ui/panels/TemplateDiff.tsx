// The prompt set rendered with two chat templates, token by token: the loaded tokenizer's template against
// a pasted one, or the same template with other arguments (add_generation_prompt, enable_thinking). Both
// renderings run in the worker (template sandbox, bounded), are tokenized by the loaded tokenizer and
// aligned (alignTokens, beside the batch diff), so a template change shows as the tokens it inserts
// (green, only in B) or removes (red, only in A), with a summary. Part of the diff panel.
import { useState } from 'react';
import { runTemplateDiff } from '../../store/controller.ts';
import { useStudio } from '../../store/index.ts';
import type { TemplateDiff as Diff, TemplateVariant } from '../../bridge/protocol.ts';
import { CheckField, SelectField } from '../fields.tsx';
import { visibleText } from '../../view/cells.ts';

type Thinking = 'template default' | 'true' | 'false';
const THINKING: readonly Thinking[] = ['template default', 'true', 'false'];

interface Form {
  pasted: string | null; // null: the tokenizer's template
  add_generation_prompt: boolean;
  enable_thinking: Thinking;
}

const variantOf = (label: string, f: Form): TemplateVariant => ({
  label,
  chat_template: f.pasted,
  add_generation_prompt: f.add_generation_prompt,
  template_kwargs: f.enable_thinking === 'template default' ? {} : { enable_thinking: f.enable_thinking === 'true' },
});

/** Whitespace made visible, as the grid shows it; an empty token text as ∅. */
const visible = (t: string) => visibleText(t) || '∅';

const MAX_PROMPTS = 8;

/** One variant's controls; "pasted" starts from the loaded tokenizer's template text, to edit. */
function VariantForm({ side, form, set, own }: { side: 'A' | 'B'; form: Form; set(f: Form): void; own: string }) {
  return (
    <div className="template-variant" data-testid={`template-variant-${side}`}>
      <div className="row">
        <b>{side}</b>
        <SelectField label="template" value={form.pasted === null ? 'model' : 'pasted'} options={['model', 'pasted'] as const} title="the loaded tokenizer's chat template, or one pasted below (starts as a copy to edit)" onChange={(v) => set({ ...form, pasted: v === 'model' ? null : (form.pasted ?? own) })} testId={`template-source-${side}`} />
        <SelectField label="enable_thinking" value={form.enable_thinking} options={THINKING} onChange={(v) => set({ ...form, enable_thinking: v })} title="chat_template_kwargs.enable_thinking (Qwen3-style templates)" testId={`template-thinking-${side}`} />
        <CheckField label="add_generation_prompt" value={form.add_generation_prompt} onChange={(v) => set({ ...form, add_generation_prompt: v })} title="end with the assistant header, as for a GRPO prompt" />
      </div>
      {form.pasted !== null && (
        <textarea className="code" aria-label={`chat template ${side}`} data-testid={`template-text-${side}`} placeholder="a Jinja chat template" value={form.pasted} onChange={(e) => set({ ...form, pasted: e.target.value })} />
      )}
    </div>
  );
}

function Strip({ diff, row }: { diff: Diff; row: Diff['rows'][number] }) {
  return (
    <div className="template-strip mono" data-testid="template-diff-row">
      {row.ops.map((o, i) => {
        const [id, text] = o.op === 'added' ? [row.b.ids[o.b!], row.b.texts[o.b!]] : [row.a.ids[o.a!], row.a.texts[o.a!]];
        const where = o.op === 'same' ? `A ${o.a} · B ${o.b}` : o.op === 'removed' ? `only in A (${diff.variants[0].label}), position ${o.a}` : `only in B (${diff.variants[1].label}), position ${o.b}`;
        return (
          <span key={i} className={`ttok ${o.op}`} data-op={o.op} title={`${JSON.stringify(text)} id ${id} — ${where}`}>
            {visible(text)}
          </span>
        );
      })}
    </div>
  );
}

export function TemplateDiffPanel() {
  const ready = useStudio((s) => s.modelStatus === 'ready');
  const diff = useStudio((s) => s.templateDiff);
  const own = useStudio((s) => s.model?.chat_template) ?? '';
  const [a, setA] = useState<Form>({ pasted: null, add_generation_prompt: true, enable_thinking: 'template default' });
  const [b, setB] = useState<Form>({ pasted: null, add_generation_prompt: true, enable_thinking: 'false' });
  const [busy, setBusy] = useState(false);
  /** Why the last render failed (shown beside the templates; the diff of the last ones that rendered stays). */
  const [error, setError] = useState<string | null>(null);
  const s = diff?.summary;
  const run = async () => {
    setBusy(true);
    setError(await runTemplateDiff([variantOf('A', a), variantOf('B', b)]));
    setBusy(false);
  };
  return (
    <div className="template-diff">
      <h4>Two chat templates</h4>
      <VariantForm side="A" form={a} set={setA} own={own} />
      <VariantForm side="B" form={b} set={setB} own={own} />
      <div className="row">
        <button disabled={!ready || busy || [a, b].some((f) => f.pasted !== null && f.pasted.trim() === '')} onClick={() => void run()} data-testid="template-diff-run" title="render the prompt set with A and with B (loaded tokenizer), align the tokens">
          {busy ? 'rendering…' : 'Render both and diff'}
        </button>
        {!ready && <span className="small muted">load a model: its tokenizer renders both</span>}
      </div>
      {error && (
        <div className="warn small" role="alert" data-testid="template-diff-error">
          {error}
          {diff ? ' — the diff below is of the last templates that rendered.' : ''}
        </div>
      )}
      {diff && s && (
        <div className="small" data-testid="template-diff-summary">
          <div>
            {s.prompts} prompt(s):{' '}
            {s.prompts_changed === 0 ? (
              <span className="ok">identical token ids</span>
            ) : (
              <b>
                {s.prompts_changed} differ · {s.removed} tokens only in A · {s.added} tokens only in B · {s.same} aligned
              </b>
            )}
          </div>
          <div className="legend-row">
            <span className="ttok removed">only in A</span> <span className="ttok added">only in B</span> <span className="ttok same">both</span>
          </div>
          {diff.rows.slice(0, MAX_PROMPTS).map((row, i) => (
            <div key={i}>
              <div className="muted">
                prompt {i}: A {row.a.ids.length} tokens, B {row.b.ids.length} tokens{row.removed + row.added ? ` (−${row.removed} +${row.added})` : ' (same)'}
              </div>
              <Strip diff={diff} row={row} />
            </div>
          ))}
          {diff.rows.length > MAX_PROMPTS && <div className="muted">… and {diff.rows.length - MAX_PROMPTS} more prompts</div>}
        </div>
      )}
    </div>
  );
}
