// Model panel: pick the embedded default, a Hub id or a local folder; shows the GPU adapter and its
// limits, load progress, the tokenizer, the chat template and the memory plan of the loaded model, and
// the reference KL is measured against: the frozen copy of the weights as loaded, or a second checkpoint
// (a Hub id or a folder), with the GPU memory each holds; gradient checkpointing; and the LoRA adapter section
// (LoraSection.tsx).
import { useEffect, useRef, useState } from 'react';
import { useStudio } from '../../store/index.ts';
import { TASKS } from '../../store/vocabulary.ts';
import { loadAdapter, loadDefaultModel, loadModel, loadReference, refreshPlan, setCheckpointing } from '../../store/controller.ts';
import { LORA_CREATE_FIELDS } from '../../store/vocabulary.ts';
import { updateInProgress } from '../../store/derived.ts';
import { CheckField, KV, NumberField, Section, formatBytes } from '../fields.tsx';
import { folderChoice } from '../dropped_files.ts';
import { FolderDrop } from '../FolderDrop.tsx';
import { LoraSection } from './LoraSection.tsx';

function AdapterInfo() {
  const adapter = useStudio((s) => s.adapter);
  const status = useStudio((s) => s.gpuStatus);
  if (!adapter) return <div className="muted" data-testid="adapter">{status === 'busy' ? 'probing WebGPU…' : status === 'error' ? 'no WebGPU adapter' : '—'}</div>;
  const name = [adapter.vendor, adapter.architecture, adapter.device, adapter.description].filter(Boolean).join(' · ') || 'unnamed adapter';
  return (
    <div data-testid="adapter">
      <div className="kv">
        <span>adapter</span>
        <b data-testid="adapter-name">{name}</b>
        <span>backend</span>
        <span>{adapter.backend}{adapter.isFallback ? ' (fallback)' : ''}</span>
        <span>features</span>
        <span className="small">{adapter.features.join(', ') || '—'}</span>
      </div>
      <details>
        <summary className="small">limits</summary>
        <div className="kv small">
          {Object.entries(adapter.limits).map(([k, v]) => (
            <KV key={k} k={k} v={k.includes('Size') ? `${formatBytes(v)} (${v})` : String(v)} />
          ))}
        </div>
      </details>
    </div>
  );
}

export function ModelPanel() {
  const model = useStudio((s) => s.model);
  const status = useStudio((s) => s.modelStatus);
  const progress = useStudio((s) => s.loadProgress);
  const hubId = useStudio((s) => s.hubId);
  const setHubId = useStudio((s) => s.setHubId);
  const task = useStudio((s) => s.task);
  const busy = status === 'busy';
  const loadFolder = (files: File[]) => {
    const choice = folderChoice(files);
    if (choice) void loadModel(choice);
  };
  return (
    <Section title="Model">
      <div className="row">
        <button disabled={busy} onClick={() => void loadDefaultModel()} data-testid="load-default">
          Load default ({TASKS[task].model})
        </button>
      </div>
      <div className="row">
        <input className="grow" aria-label="Hugging Face Hub model id" placeholder="Hub id, e.g. HuggingFaceTB/SmolLM2-135M-Instruct" value={hubId} onChange={(e) => setHubId(e.target.value)} />
        <button disabled={busy || hubId.trim() === ''} onClick={() => void loadModel({ kind: 'hub', id: hubId.trim() })}>
          Load
        </button>
      </div>
      <FolderDrop what="a model folder (config.json, *.safetensors; tokenizer.json for the prompt set)" busy={busy} testId="model-folder" onFolder={loadFolder} />
      {progress && (
        <div className="progress" data-testid="load-progress">
          <div className="bar" style={{ width: progress.total > 0 ? `${(100 * progress.loaded) / progress.total}%` : '100%' }} />
          <span>
            {progress.label} {progress.total > 0 ? `${formatBytes(progress.loaded)} / ${formatBytes(progress.total)}` : progress.loaded > 0 ? formatBytes(progress.loaded) : ''}
          </span>
        </div>
      )}
      {model && (
        <div data-testid="model-info">
          <div className="kv">
            <span>model</span>
            <b>{model.name}</b>
            <span>type</span>
            <span>
              {model.model_type} ({model.architectures.join(', ')}), {model.dtype}
            </span>
            <span>params</span>
            <span>{model.num_parameters.toLocaleString()}</span>
            <span>vocab</span>
            <span>{model.vocab_size}</span>
            {Object.keys(model.dropout).length > 0 && (
              <>
                <span>dropout</span>
                <span className="warn" data-testid="model-dropout">
                  {Object.entries(model.dropout).map(([k, p]) => `${k} ${p}`).join(', ')}: a trainer that trains with it on (TRL unless disable_dropout, verl, OpenRLHF) draws at random, so the step refuses there
                </span>
              </>
            )}
            <span>tokenizer</span>
            {model.tokenizer ? (
              <span>
                {model.tokenizer.kind}; bos {model.tokenizer.bos_token_id ?? '—'}, eos [{model.tokenizer.eos_token_ids.join(', ')}], pad {model.tokenizer.pad_token_id ?? '—'}
              </span>
            ) : (
              <span className="warn" data-testid="no-tokenizer">
                {model.no_tokenizer}
              </span>
            )}
          </div>
          <details>
            <summary className="small">chat template</summary>
            <pre className="template">{model.chat_template ?? '(none: prompts are used as plain text)'}</pre>
          </details>
          <MemoryPlanView />
          <ReferenceView />
          <LoraSection />
        </div>
      )}
      <h4>GPU</h4>
      <AdapterInfo />
    </Section>
  );
}

/** The reference of the next updates (β > 0): the frozen copy, or a second checkpoint loaded here (its vocabulary must be the policy's). */
function ReferenceView() {
  const model = useStudio((s) => s.model);
  const busy = useStudio((s) => s.modelStatus === 'busy');
  const [hub, setHub] = useState('');
  const folderRef = useRef<HTMLInputElement>(null);
  if (!model) return null;
  const ref = model.reference;
  const frozenBytes = model.memory_plan.plan.bytes.reference_weights - (ref?.bytes ?? 0);
  return (
    <div data-testid="reference-model">
      <h4>Reference</h4>
      <div className="small" data-testid="reference-name">
        {ref ? (
          <>
            model <b>{ref.name}</b> ({ref.model_type}, {ref.dtype}, {ref.num_parameters.toLocaleString()} params) · {formatBytes(ref.bytes)}{' '}
            <button className="link-button" disabled={busy} onClick={() => void loadReference(null)} data-testid="reference-frozen">
              use the frozen copy
            </button>
          </>
        ) : model.adapter ? (
          <span data-testid="reference-adapter">{model.adapter.reference === 'frozen-adapter' ? 'frozen copy of the loaded adapter' : 'base without adapter'} (the LoRA adapter's reference, below) · shares the base's weights</span>
        ) : (
          <span title="TRL's default with β > 0: a snapshot of the policy taken at load; updates that continue from stepped weights measure KL against it">
            frozen copy of the loaded weights · {formatBytes(frozenBytes)}
          </span>
        )}
        {ref && !model.adapter && <div className="muted">the frozen copy stays for “loaded weights (restart)”: {formatBytes(frozenBytes)}</div>}
      </div>
      <div className="row">
        <input className="grow" aria-label="reference model Hub id" placeholder="reference: Hub id" value={hub} onChange={(e) => setHub(e.target.value)} data-testid="reference-hub-id" />
        <button disabled={busy || hub.trim() === ''} onClick={() => void loadReference({ kind: 'hub', id: hub.trim() })}>
          Load
        </button>
      </div>
      <div className="small">
        or{' '}
        <button className="link-button" disabled={busy} onClick={() => folderRef.current?.click()} data-testid="reference-folder-button">
          pick a reference folder
        </button>
        <input ref={folderRef} type="file" hidden data-testid="reference-folder-input" {...({ webkitdirectory: '' } as object)} multiple onChange={(e) => { const c = folderChoice(Array.from(e.target.files ?? [])); if (c) void loadReference(c); e.target.value = ''; }} />
      </div>
    </div>
  );
}

/**
 * The memory plan of the next update (src/model/plan.ts, the same as `grpo-studio plan`) for the current
 * prompt set, G and completion length — or the imported batch's rows and lengths when the step starts from
 * it — asked of the worker whenever those change; the default task's plan from the model load until then.
 * Over the user's memory budget (default 8 GiB, kept in localStorage), a full fine-tune is offered the
 * LoRA adapter the create form makes, with its plan, and any update gradient checkpointing (the box under the
 * budget: the worker's choice for the policy, which the plan's options report).
 */
/** Where the user's memory budget is kept between visits (GiB). */
const BUDGET_KEY = 'grpo-studio.memory-budget-gib';
/** The budget before the user sets one: what most laptop GPUs hold. */
const DEFAULT_BUDGET_GIB = 8;

function useBudget(): [number, (gib: number) => void] {
  const [gib, setGib] = useState(() => {
    const v = Number(globalThis.localStorage?.getItem(BUDGET_KEY));
    return Number.isFinite(v) && v > 0 ? v : DEFAULT_BUDGET_GIB;
  });
  return [gib, (v: number) => {
    setGib(v);
    globalThis.localStorage?.setItem(BUDGET_KEY, String(v));
  }];
}

function MemoryPlanView() {
  const [budgetGib, setBudgetGib] = useBudget();
  const busy = useStudio((s) => s.modelStatus === 'busy');
  // Turning checkpointing over drops the update: not while one is in progress.
  const stepping = useStudio(updateInProgress);
  const model = useStudio((s) => s.model);
  const asked = useStudio((s) => s.plan);
  const prompts = useStudio((s) => s.prompts);
  const G = useStudio((s) => s.sampling.num_generations);
  const C = useStudio((s) => s.sampling.max_new_tokens);
  // An imported batch the next update steps is planned with its own shape (refreshPlan reads it).
  const imported = useStudio((s) => (s.stepFrom === 'import' ? s.imported?.batch : null));
  useEffect(() => {
    if (!model) return;
    const t = setTimeout(() => void refreshPlan(), 200);
    return () => clearTimeout(t);
  }, [model, prompts, G, C, imported]);
  const current = asked ?? model?.memory_plan;
  if (!current) return null;
  const { options: o, plan, lora } = current;
  const budget = budgetGib * 2 ** 30;
  const F = LORA_CREATE_FIELDS;
  return (
    <details open data-testid="memory-plan" data-total={plan.total_bytes} data-update={`${o.B}x${o.T}x${o.prompt}`} data-checkpointing={o.checkpointing}>
      <summary className="small" title="the peak of one update: the larger of the reference forward and the backward + optimizer step (src/model/plan.ts; `grpo-studio plan` prints the same)">
        memory plan ({o.B} rows × {o.T} tokens, prompt {o.prompt}{o.adapter !== null ? `, LoRA r ${o.adapter}` : ''}): peak {formatBytes(plan.total_bytes)} at the {plan.peak}
      </summary>
      <div className="kv small">
        {Object.entries(plan.bytes).map(([k, v]) => (
          <KV key={k} k={k} v={formatBytes(v)} />
        ))}
      </div>
      <NumberField label="memory budget (GiB)" value={budgetGib} min={0.001} onChange={(v) => v !== null && setBudgetGib(v)} title="the GPU memory you can give one update: a plan over it proposes a LoRA adapter" testId="memory-budget" detached />
      <CheckField
        label="gradient checkpointing"
        value={o.checkpointing}
        disabled={busy || stepping}
        onChange={(v) => void setCheckpointing(v)}
        title="the backward recomputes each layer's activations from its input instead of keeping them all: the same gradients bit for bit, in less memory and about one more forward of time (HF / TRL gradient_checkpointing, the CLI's --checkpointing)"
        testId="checkpointing"
      />
      {plan.total_bytes > budget && (
        <div className="warn small" data-testid="plan-over-budget">
          The peak {formatBytes(plan.total_bytes)} exceeds your budget of {formatBytes(budget)}.
          {!o.checkpointing && ` Gradient checkpointing (below the budget) keeps each layer's input and recomputes the rest instead of holding all ${formatBytes(plan.bytes.activations)} of activations.`}
          {lora && (
            <>
              {' '}A LoRA adapter (r {lora.options.adapter}, all linear layers) with the base frozen in {lora.options.dtype === 'bf16' ? 'bf16' : 'its checkpoint dtype (f32)'} plans{' '}
              <b data-testid="plan-lora-total">{formatBytes(lora.plan.total_bytes)}</b>
              {lora.plan.total_bytes > budget ? ', still over the budget: shorten the batch' : ''}.{' '}
              <button
                disabled={busy}
                data-testid="plan-create-lora"
                onClick={() => void loadAdapter({ kind: 'create', options: { r: F.r.default, lora_alpha: F.lora_alpha.default, use_rslora: F.use_rslora.default, target_modules: F.target_modules.default, seed: F.seed.default } })}
              >
                Create LoRA adapter
              </button>
            </>
          )}
        </div>
      )}
      {plan.buffers.map((b) => (
        <div key={b.name} className={b.status === 'does not fit' ? 'warn small' : 'small muted'}>
          {b.name} is {formatBytes(b.bytes)}: {b.status === 'does not fit' ? 'larger than maxBufferSize, does not fit' : 'past one storage binding, bound in windows'}
        </div>
      ))}
    </details>
  );
}
