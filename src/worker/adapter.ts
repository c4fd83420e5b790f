// The page's LoRA adapter (src/worker/runner.ts holds one at most): a dropped PEFT folder or a new adapter
// made in the page, on the GPU as the policy's LoraAdapter (src/model/lora_adapter.ts; only it trains), the
// adapter as loaded kept on the CPU (what a run from the 'loaded' weights restores, and the "frozen copy of
// the loaded adapter" reference), the reference view for updates with β > 0, and the PEFT folder of the
// stepped adapter. As the CLI's --adapter / --ref-adapter / --save-adapter (src/cli/step.ts).
import type { Gpu } from '../gpu/context.ts';
import type { ReferenceSource } from '../grpo/step_types.ts';
import { ModelLoadError } from '../model/config.ts';
import { initLoraWeights, loadLoraAdapter, loraKey, saveLoraAdapter, type LoraWeights } from '../model/lora.ts';
import { LoraAdapter } from '../model/lora_adapter.ts';
import type { CausalLM } from '../model/model.ts';
import { FileSource } from '../model/source.ts';
import type { AdapterChoice, AdapterInfo, AdapterReference, ModelChoice } from '../bridge/protocol.ts';

/** The model's own name where it is exact (a Hub id, the embedded folder); a dropped folder may be renamed, so none. */
export function modelId(model: ModelChoice): string | null {
  return model.kind === 'hub' ? model.id : model.kind === 'embedded' ? model.name : null;
}

/**
 * adapter_config.json's base_model_name_or_path against the loaded model, where both are names (a path on
 * the training machine, "../model", says nothing here): the last path components must agree.
 */
export function checkBaseModel(base: unknown, model: ModelChoice, where: string): void {
  const id = modelId(model);
  if (typeof base !== 'string' || !id || /^[./~]|\\/.test(base)) return;
  const last = (s: string) => s.replace(/\/+$/, '').split('/').pop()!.toLowerCase();
  if (last(base) !== last(id)) throw new ModelLoadError(`${where}/adapter_config.json: "base_model_name_or_path" is ${JSON.stringify(base)}, but the loaded model is ${id}`);
}

export class AdapterSlot {
  /** GPU copy of the adapter as loaded, for the "frozen copy of the loaded adapter" reference. */
  private frozen: LoraAdapter | null = null;
  /** The policy's base with the reference's adapter (none, or `frozen`): a view sharing the base weights. */
  private view: CausalLM | null = null;

  private constructor(
    private readonly gpu: Gpu,
    readonly name: string,
    private readonly loaded: LoraWeights,
    readonly adapter: LoraAdapter,
    private reference: AdapterReference,
    /** Made here from a seed ("create"), not read from a folder: never a run's own adapter (src/grpo/run_adapter.ts). */
    readonly created: boolean,
  ) {}

  /** Reads or creates the adapter for `policy` (loaded from `model`); throws ModelLoadError naming the file and key that do not fit. */
  static async open(gpu: Gpu, choice: AdapterChoice, policy: CausalLM, model: ModelChoice): Promise<AdapterSlot> {
    let weights: LoraWeights;
    let name: string;
    if (choice.kind === 'local') {
      weights = await loadLoraAdapter(FileSource.fromFiles(choice.files, choice.name), policy.config);
      checkBaseModel(weights.config.raw.base_model_name_or_path, model, choice.name);
      name = choice.name;
    } else {
      weights = initLoraWeights(policy.config, choice.options, modelId(model));
      name = `new adapter (r = ${weights.config.r})`;
    }
    return new AdapterSlot(gpu, name, weights, LoraAdapter.fromWeights(gpu, weights), 'base-without-adapter', choice.kind !== 'local');
  }

  /** The reference model of an update with β > 0 and what the reference stage calls it. */
  referenceOf(policy: CausalLM): { model: CausalLM; source: ReferenceSource } {
    if (this.reference === 'frozen-adapter') this.frozen ??= LoraAdapter.fromWeights(this.gpu, this.loaded);
    this.view ??= policy.withAdapter(this.reference === 'frozen-adapter' ? this.frozen : null);
    return { model: this.view, source: { kind: this.reference } };
  }

  /** Call with no update running on the old reference (its view is freed). */
  setReference(reference: AdapterReference): void {
    this.view?.destroy();
    this.view = null;
    this.reference = reference;
  }

  /** Back to the adapter as loaded (a run from the 'loaded' weights). */
  restoreLoaded(): void {
    for (const m of this.loaded.modules) {
      this.gpu.write(this.adapter.params.get(loraKey(m.name, 'A'))!.buffer, m.A);
      this.gpu.write(this.adapter.params.get(loraKey(m.name, 'B'))!.buffer, m.B);
    }
  }

  info(): AdapterInfo {
    const c = this.loaded.config;
    const base = c.raw.base_model_name_or_path;
    return {
      name: this.name,
      r: c.r,
      lora_alpha: c.lora_alpha,
      use_rslora: c.use_rslora,
      scaling: c.scaling,
      target_modules: c.target_modules,
      modules: this.loaded.modules.map((m) => m.name),
      num_parameters: this.loaded.modules.reduce((n, m) => n + m.A.length + m.B.length, 0),
      reference: this.reference,
      base_model_name_or_path: typeof base === 'string' ? base : null,
    };
  }

  /** The stepped adapter as PEFT saves it: adapter_model.safetensors (F32, PEFT keys) and adapter_config.json. */
  async save(): Promise<Record<string, Uint8Array>> {
    const files = saveLoraAdapter(await this.adapter.read());
    return { 'adapter_config.json': new TextEncoder().encode(files['adapter_config.json']), 'adapter_model.safetensors': files['adapter_model.safetensors'] };
  }

  destroy(): void {
    this.view?.destroy();
    this.view = null;
    this.frozen?.destroy();
    this.frozen = null;
    this.adapter.destroy();
  }
}
