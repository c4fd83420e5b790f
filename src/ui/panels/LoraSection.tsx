// The Model panel's "LoRA adapter" section: load a PEFT adapter folder (picked or dropped), or create one
// here (r, lora_alpha, use_rslora, target_modules; A Kaiming-uniform from a seed, B = 0, as PEFT), remove
// it, pick the reference it implies (base without adapter, or a frozen copy of the loaded adapter), and save
// the stepped adapter as a PEFT folder. With an adapter only it trains over a frozen base held in its
// checkpoint dtype (src/worker/adapter.ts); the memory plan above counts it. The create form's defaults,
// bounds and hints are LORA_CREATE_FIELDS, the table `grpo-studio step --create-adapter` reads too.
import { useState } from 'react';
import { useStudio } from '../../store/index.ts';
import { loadAdapter, saveAdapter, setAdapterReference } from '../../store/controller.ts';
import { LORA_CREATE_FIELDS as F } from '../../store/vocabulary.ts';
import { CheckField, NumberField, SelectField, fmt } from '../fields.tsx';
import { folderChoice } from '../dropped_files.ts';
import { FolderDrop } from '../FolderDrop.tsx';
import type { AdapterReference } from '../../bridge/protocol.ts';

const REFERENCES = ['base-without-adapter', 'frozen-adapter'] as const satisfies readonly AdapterReference[];
const REFERENCE_LABELS: Record<AdapterReference, string> = {
  'base-without-adapter': 'base without adapter (TRL with peft_config)',
  'frozen-adapter': 'frozen copy of the loaded adapter (TRL with a PeftModel)',
};
const TARGETS = ['all-linear', 'list'] as const;
type Targets = (typeof TARGETS)[number];

/** The create form: PEFT LoraConfig fields; target_modules "all-linear" or a comma-separated list of module names. */
function CreateAdapter({ busy }: { busy: boolean }) {
  const [r, setR] = useState(F.r.default);
  const [alpha, setAlpha] = useState(F.lora_alpha.default);
  const [rslora, setRslora] = useState<boolean>(F.use_rslora.default);
  const [targets, setTargets] = useState<Targets>(F.target_modules.default);
  const [list, setList] = useState('q_proj, v_proj'); // what the list field offers once "these modules" is picked
  const [seed, setSeed] = useState(F.seed.default);
  const names = list.split(',').map((t) => t.trim()).filter(Boolean);
  const create = () => void loadAdapter({ kind: 'create', options: { r, lora_alpha: alpha, use_rslora: rslora, target_modules: targets === 'all-linear' ? 'all-linear' : names, seed } });
  return (
    <details data-testid="lora-create">
      <summary className="small">create one here</summary>
      <div className="row">
        <NumberField label="r" value={r} onChange={(v) => setR(v ?? F.r.default)} min={F.r.min} integer detached title={F.r.doc} testId="lora-r" />
        <NumberField label="lora_alpha" value={alpha} onChange={(v) => setAlpha(v ?? F.lora_alpha.default)} detached title={F.lora_alpha.doc} testId="lora-alpha" />
        <CheckField label="use_rslora" value={rslora} onChange={setRslora} title={F.use_rslora.doc} />
      </div>
      <div className="row">
        <SelectField<Targets> label="target_modules" value={targets} options={TARGETS} labels={{ list: 'these modules' }} onChange={setTargets} title={F.target_modules.doc} testId="lora-targets" />
        {targets === 'list' && <input className="grow" aria-label="target_modules list" value={list} onChange={(e) => setList(e.target.value)} data-testid="lora-target-list" title={F.target_modules.doc} />}
      </div>
      <div className="row">
        <NumberField label="init seed" value={seed} onChange={(v) => setSeed(v ?? F.seed.default)} min={F.seed.min} max={F.seed.max} integer detached title={F.seed.doc} />
        <span className="small muted" title="dropout is random; one deterministic step has none">lora_dropout 0 (ignored)</span>
      </div>
      <button disabled={busy || (targets === 'list' && names.length === 0)} onClick={create} data-testid="lora-create-button">
        Create adapter
      </button>
    </details>
  );
}

export function LoraSection() {
  const model = useStudio((s) => s.model);
  const busy = useStudio((s) => s.modelStatus === 'busy');
  if (!model) return null;
  const a = model.adapter;
  const loadFolder = (files: File[]) => {
    const c = folderChoice(files);
    if (c?.kind === 'local') void loadAdapter(c);
  };
  const bf16 = model.dtype.includes('BF16');
  return (
    <div data-testid="lora-adapter">
      <h4>LoRA adapter</h4>
      {a ? (
        <div className="small" data-testid="lora-info">
          <div>
            <b data-testid="lora-name">{a.name}</b>: r {a.r}, lora_alpha {a.lora_alpha}
            {a.use_rslora ? ' (rsLoRA)' : ''}, scaling {fmt(a.scaling)} · target_modules {JSON.stringify(a.target_modules)} · {a.modules.length} modules, {a.num_parameters.toLocaleString()} trainable params
            {a.base_model_name_or_path && <> · base {a.base_model_name_or_path}</>}
          </div>
          <div className="muted">only the adapter trains (grad norm and AdamW over lora_A / lora_B); the base is frozen in its checkpoint dtype{bf16 ? ' (bf16 stays bf16)' : ''}</div>
          {model.reference ? (
            <div className="muted">reference: the reference model {model.reference.name} (it replaces the adapter's reference while loaded)</div>
          ) : (
            <SelectField label="reference" value={a.reference} options={REFERENCES} labels={REFERENCE_LABELS} onChange={(r) => void setAdapterReference(r)} testId="lora-reference" />
          )}
          <div className="row">
            <button disabled={busy} onClick={() => void saveAdapter()} data-testid="lora-save" title="adapter_config.json + adapter_model.safetensors (F32, PEFT key names): two downloads">
              Save adapter
            </button>
            <button disabled={busy} onClick={() => void loadAdapter(null)} data-testid="lora-remove">
              Remove adapter
            </button>
          </div>
        </div>
      ) : (
        <div className="small muted">none: every weight trains{bf16 ? ' (in f32)' : ''}</div>
      )}
      <FolderDrop what="an adapter folder (adapter_config.json, adapter_model.safetensors)" busy={busy} testId="lora-folder" onFolder={loadFolder} />
      <CreateAdapter busy={busy} />
      {bf16 && <div className="small muted">attaching or removing an adapter reloads this bf16 model (frozen base in bf16, or f32 to train every weight): stepped weights are dropped</div>}
    </div>
  );
}
