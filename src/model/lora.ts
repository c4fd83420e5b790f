// Hugging Face PEFT LoRA adapters, the GPU-independent part: adapter_config.json → LoraConfig, which of
// the model's linear modules carry an adapter (PEFT's target_modules rule), the PEFT tensor names, and
// reading / writing an adapter folder, and a new adapter as PEFT initialises one (its options, for the page
// and the CLI alike: src/model/lora_fields.ts). The GPU adapter (src/model/lora_adapter.ts) and the float64
// twin (src/oracle/model.ts) both start from `loadLoraAdapter`'s tensors.
//
// Semantics follow huggingface/peft `src/peft/tuners/lora/layer.py` (LoraLayer.update_layer: scaling =
// lora_alpha / r, or lora_alpha / √r with use_rslora; Linear.forward: y = base(x) + scaling·B(A(x))),
// `src/peft/tuners/tuners_utils.py` (check_target_module_exists: a list entry matches the module name
// exactly or as a dotted suffix, a string is a full regex match; "all-linear" is every linear layer but
// the output layer; _get_in_out_features reads GPT-2 Conv1D's [in, out] weight, so A is [r, in] and
// B [out, r] there too) and `src/peft/utils/save_and_load.py` (keys base_model.model.<module>.lora_A.weight,
// the adapter name dropped). Options that change the math and are not implemented are refused by name.
import { parseSafeTensors, toF32, writeSafeTensors, type TensorOut } from '../io/safetensors.ts';
import { ModelLoadError, paramSpecs, type ModelConfig, type ParamGroup } from './config.ts';
import { firstNonFinite } from './loader.ts';
import { LORA_CREATE_FIELDS, type LoraFieldSpec, type NewLoraOptions } from './lora_fields.ts';
import { Rng } from './rng.ts';
import type { ModelSource } from './source.ts';

export interface LoraConfig {
  r: number;
  lora_alpha: number;
  use_rslora: boolean;
  /** lora_alpha / r, or lora_alpha / √r with use_rslora. */
  scaling: number;
  target_modules: string[] | string;
  fan_in_fan_out: boolean;
  /** adapter_config.json as read: written back unchanged when the stepped adapter is saved. */
  raw: Record<string, unknown>;
}

/** One linear layer of the model that can carry an adapter: y (M, out) = x (M, in) · W' + b. */
export interface LinearModule {
  name: string; // HF module name, e.g. model.layers.0.self_attn.q_proj
  in: number;
  out: number;
  group: ParamGroup; // the group of its base weight (for per-group norms)
}

/** One adapted module with its tensors: A (r, in), B (out, r), f32. */
export interface LoraModule extends LinearModule {
  A: Float32Array;
  B: Float32Array;
}

export interface LoraWeights {
  config: LoraConfig;
  modules: LoraModule[]; // in the model's forward order
}

/** PEFT's saved names of a module's two tensors. */
export const loraKey = (module: string, which: 'A' | 'B'): string => `base_model.model.${module}.lora_${which}.weight`;

/** Every linear module of the model (the output layer excluded: PEFT's "all-linear" leaves it out too), forward order. */
export function linearModules(cfg: ModelConfig): LinearModule[] {
  return paramSpecs(cfg)
    .filter((p) => p.shape.length === 2 && p.name.endsWith('.weight') && !/(wte|wpe|embed_tokens)\.weight$|^lm_head\./.test(p.name))
    .map((p) => {
      const gpt2 = cfg.family === 'gpt2'; // Conv1D [in, out]; nn.Linear [out, in]
      return { name: p.name.slice(0, -'.weight'.length), in: p.shape[gpt2 ? 0 : 1], out: p.shape[gpt2 ? 1 : 0], group: p.group };
    });
}

/**
 * PEFT check_target_module_exists for one module name; "all-linear" in any case, as PEFT compares
 * target_modules.lower() (peft/tuners/tuners_utils.py _maybe_include_all_linear_layers).
 */
export function isTargeted(target: string[] | string, module: string): boolean {
  if (typeof target === 'string') return target.toLowerCase() === 'all-linear' || new RegExp(`^(?:${target})$`).test(module);
  return target.some((t) => module === t || module.endsWith(`.${t}`));
}

/** Fields whose non-default values change the math in ways this runtime does not implement. */
const UNSUPPORTED: [string, (v: unknown) => boolean, string][] = [
  ['use_dora', (v) => v === true, 'DoRA'],
  ['lora_bias', (v) => v === true, 'a trainable LoRA bias'],
  ['bias', (v) => v !== undefined && v !== null && v !== 'none', 'training base biases'],
  ['lora_dropout', (v) => typeof v === 'number' && v !== 0, 'dropout (random; the studio steps deterministically: set it to 0)'],
  ['rank_pattern', (v) => v != null && Object.keys(v as object).length > 0, 'per-module ranks'],
  ['alpha_pattern', (v) => v != null && Object.keys(v as object).length > 0, 'per-module alphas'],
  ['layers_to_transform', (v) => v != null, 'layers_to_transform'],
  ['exclude_modules', (v) => v != null && (!Array.isArray(v) || v.length > 0), 'exclude_modules'],
  ['modules_to_save', (v) => v != null && (!Array.isArray(v) || v.length > 0), 'modules_to_save'],
  ['layer_replication', (v) => v != null, 'layer_replication'],
  ['target_parameters', (v) => v != null && (!Array.isArray(v) || v.length > 0), 'target_parameters'],
  ['trainable_token_indices', (v) => v != null, 'trainable_token_indices'],
];

/** Parses adapter_config.json (PEFT LoraConfig); throws ModelLoadError naming the field. */
export function parseLoraConfig(raw: unknown, where = 'adapter_config.json'): LoraConfig {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ModelLoadError(`${where}: not a JSON object`);
  const c = raw as Record<string, unknown>;
  if (c.peft_type !== 'LORA') throw new ModelLoadError(`${where}: peft_type ${JSON.stringify(c.peft_type)} is not supported (only "LORA")`);
  for (const [key, bad, what] of UNSUPPORTED) {
    if (bad(c[key])) throw new ModelLoadError(`${where}: "${key}" = ${JSON.stringify(c[key])}: ${what} is not supported`);
  }
  const r = c.r;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 1) throw new ModelLoadError(`${where}: "r" must be a positive integer, got ${JSON.stringify(r)}`);
  const alpha = c.lora_alpha ?? 8; // PEFT's LoraConfig default
  if (typeof alpha !== 'number' || !Number.isFinite(alpha)) throw new ModelLoadError(`${where}: "lora_alpha" must be a number, got ${JSON.stringify(alpha)}`);
  const use_rslora = c.use_rslora === true;
  const t = c.target_modules;
  const listOk = Array.isArray(t) && t.length > 0 && t.every((x) => typeof x === 'string');
  if (!listOk && typeof t !== 'string') throw new ModelLoadError(`${where}: "target_modules" must be a module name list or a regex string, got ${JSON.stringify(t)}`);
  return {
    r,
    lora_alpha: alpha,
    use_rslora,
    scaling: use_rslora ? alpha / Math.sqrt(r) : alpha / r,
    target_modules: t as string[] | string,
    fan_in_fan_out: c.fan_in_fan_out === true,
    raw: c,
  };
}

/**
 * Reads an adapter folder for `model`: adapter_config.json and adapter_model.safetensors. The targeted
 * modules must be exactly the modules the file holds, each with A (r, in) and B (out, r).
 */
export async function loadLoraAdapter(source: ModelSource, model: ModelConfig): Promise<LoraWeights> {
  const config = parseLoraConfig(await source.readJSON('adapter_config.json'), `${source.name}/adapter_config.json`);
  if (!(await source.exists('adapter_model.safetensors'))) {
    const hint = (await source.exists('adapter_model.bin')) ? ' (only adapter_model.bin, which cannot be read: save with safe_serialization)' : '';
    throw new ModelLoadError(`${source.name}: no adapter_model.safetensors${hint}`);
  }
  const file = `${source.name}/adapter_model.safetensors`;
  const st = parseSafeTensors(await source.readBytes('adapter_model.safetensors'), file);
  const targeted = linearModules(model).filter((m) => isTargeted(config.target_modules, m.name));
  if (!targeted.length) throw new ModelLoadError(`${source.name}: target_modules ${JSON.stringify(config.target_modules)} matches no linear module of this ${model.model_type} model`);
  const used = new Set<string>();
  const modules = targeted.map((m) => {
    const tensor = (which: 'A' | 'B', shape: number[]): Float32Array => {
      const key = loraKey(m.name, which);
      const info = st.tensors.get(key);
      if (!info) throw new ModelLoadError(`${file}: missing "${key}" (target_modules ${JSON.stringify(config.target_modules)} selects ${m.name})`);
      if (info.shape.length !== 2 || info.shape[0] !== shape[0] || info.shape[1] !== shape[1]) {
        throw new ModelLoadError(`${file}: "${key}" has shape ${JSON.stringify(info.shape)}, expected ${JSON.stringify(shape)} (r = ${config.r})`);
      }
      if (!['F32', 'F16', 'BF16', 'F64'].includes(info.dtype)) throw new ModelLoadError(`${file}: "${key}" has dtype ${info.dtype}`);
      used.add(key);
      const data = toF32(st, key);
      // As the base checkpoint (loader.ts): NaN / ±Inf would reach the step as a non-finite loss (exit 3).
      const bad = firstNonFinite(data);
      if (bad >= 0) throw new ModelLoadError(`${file}: tensor "${key}" holds ${data[bad]} at flat index ${bad}: an adapter with NaN or infinite weights cannot be used`);
      return data;
    };
    return { ...m, A: tensor('A', [config.r, m.in]), B: tensor('B', [m.out, config.r]) };
  });
  const extra = [...st.tensors.keys()].filter((k) => !used.has(k));
  if (extra.length) {
    const which = extra.length > 1 ? ` and ${extra.length - 1} more are` : ' is';
    throw new ModelLoadError(`${file}: "${extra[0]}"${which} not LoRA tensors of a module target_modules ${JSON.stringify(config.target_modules)} selects`);
  }
  return { config, modules };
}

/** The bytes of adapter_model.safetensors (F32, PEFT names) and adapter_config.json (the input's, unchanged). */
export function saveLoraAdapter(w: LoraWeights): { 'adapter_model.safetensors': Uint8Array; 'adapter_config.json': string } {
  const tensors: Record<string, TensorOut> = {};
  for (const m of w.modules) {
    tensors[loraKey(m.name, 'A')] = { dtype: 'F32', shape: [w.config.r, m.in], data: m.A };
    tensors[loraKey(m.name, 'B')] = { dtype: 'F32', shape: [m.out, w.config.r], data: m.B };
  }
  return {
    'adapter_model.safetensors': writeSafeTensors(tensors, { format: 'pt' }),
    'adapter_config.json': JSON.stringify(w.config.raw, null, 2) + '\n',
  };
}

const FIELD_NAMES = Object.keys(LORA_CREATE_FIELDS) as (keyof NewLoraOptions)[];

/** What a value of `spec` must be, as the one-line error says it. */
function expected(spec: LoraFieldSpec): string {
  if (spec.kind === 'boolean') return 'true or false';
  if (spec.kind === 'modules') return '"all-linear" or a non-empty list of module names';
  if (spec.kind === 'number') return 'a finite number';
  if (spec.max !== undefined) return `an integer from ${spec.min} to ${spec.max}`;
  return spec.min === 1 ? 'a positive integer' : `an integer >= ${spec.min}`;
}

function fits(spec: LoraFieldSpec, v: unknown): boolean {
  if (spec.kind === 'boolean') return typeof v === 'boolean';
  if (spec.kind === 'modules') return v === 'all-linear' || (Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'string' && t.trim() !== ''));
  if (typeof v !== 'number' || !Number.isFinite(v) || (spec.kind === 'integer' && !Number.isInteger(v))) return false;
  return (spec.min === undefined || v >= spec.min) && (spec.max === undefined || v <= spec.max);
}

/** New-adapter options checked against LORA_CREATE_FIELDS; throws ModelLoadError naming the first field out of bounds. */
export function checkNewLoraOptions(opts: NewLoraOptions, where: string): NewLoraOptions {
  for (const name of FIELD_NAMES) {
    const spec: LoraFieldSpec = LORA_CREATE_FIELDS[name];
    if (!fits(spec, opts[name])) throw new ModelLoadError(`${where}: "${name}" must be ${expected(spec)}, got ${JSON.stringify(opts[name]) ?? String(opts[name])}`);
  }
  return opts;
}

/**
 * New-adapter options from `key=value,key=value` text (the CLI's --create-adapter), keys as LORA_CREATE_FIELDS
 * names them, absent keys at their defaults. target_modules takes the comma-separated names that follow it
 * (`target_modules=q_proj,v_proj,seed=1`): module names never hold "=". Text that is not a number or a
 * boolean is kept as typed, so the bounds check quotes it.
 */
export function newLoraOptionsFromText(text: string, where: string): NewLoraOptions {
  const given = new Map<keyof NewLoraOptions, string[]>();
  let last: keyof NewLoraOptions | null = null;
  for (const token of text.split(',').map((t) => t.trim()).filter(Boolean)) {
    const eq = token.indexOf('=');
    if (eq < 0) {
      if (last === null || LORA_CREATE_FIELDS[last].kind !== 'modules') throw new ModelLoadError(`${where}: "${token}" is not key=value (keys: ${FIELD_NAMES.join(', ')})`);
      given.get(last)!.push(token);
      continue;
    }
    const key = token.slice(0, eq).trim();
    if (!(FIELD_NAMES as string[]).includes(key)) throw new ModelLoadError(`${where}: unknown key "${key}" (keys: ${FIELD_NAMES.join(', ')})`);
    last = key as keyof NewLoraOptions;
    if (given.has(last)) throw new ModelLoadError(`${where}: "${key}" is given twice`);
    given.set(last, [token.slice(eq + 1).trim()]);
  }
  const value = (spec: LoraFieldSpec, [v, ...more]: string[]): unknown => {
    if (spec.kind === 'modules') return more.length === 0 && v === 'all-linear' ? v : [v, ...more].filter(Boolean);
    if (spec.kind === 'boolean') return v === 'true' ? true : v === 'false' ? false : v;
    return v !== '' && Number.isFinite(Number(v)) ? Number(v) : v;
  };
  const opts = Object.fromEntries(FIELD_NAMES.map((k) => [k, given.has(k) ? value(LORA_CREATE_FIELDS[k], given.get(k)!) : LORA_CREATE_FIELDS[k].default]));
  return checkNewLoraOptions(opts as unknown as NewLoraOptions, where);
}

/**
 * A fresh adapter as PEFT's LoraLayer.reset_lora_parameters(init_lora_weights=True) makes it: A from
 * kaiming_uniform_(a=√5), i.e. U(±1/√in), here from a seeded RNG; B = 0, so the first forward is the
 * base's exactly. The config is the adapter_config.json that saving writes (lora_dropout 0: one
 * deterministic step has no dropout). The page's "create" (src/worker/adapter.ts) and the CLI's
 * --create-adapter both make their adapter here. Throws ModelLoadError, prefixed `where`, naming the field
 * the options get wrong; a target_modules entry that selects no module is refused too (PEFT refuses only a
 * list that selects none, which would let a misspelt name leave out the modules it meant).
 */
export function initLoraWeights(model: ModelConfig, opts: NewLoraOptions, base_model_name_or_path: string | null, where = 'new adapter'): LoraWeights {
  checkNewLoraOptions(opts, where);
  const config = parseLoraConfig(
    {
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      base_model_name_or_path,
      r: opts.r,
      lora_alpha: opts.lora_alpha,
      use_rslora: opts.use_rslora,
      target_modules: opts.target_modules,
      lora_dropout: 0,
      bias: 'none',
      fan_in_fan_out: model.family === 'gpt2', // PEFT sets it for Conv1D layers
      init_lora_weights: true,
      inference_mode: false,
    },
    where,
  );
  const linear = linearModules(model);
  const targeted = linear.filter((m) => isTargeted(config.target_modules, m.name));
  const known = () => `its linear modules end in ${[...new Set(linear.map((m) => m.name.split('.').pop()))].join(', ')}`;
  if (!targeted.length) throw new ModelLoadError(`${where}: target_modules ${JSON.stringify(config.target_modules)} matches no linear module of this ${model.model_type} model (${known()})`);
  const unmatched = opts.target_modules === 'all-linear' ? [] : opts.target_modules.filter((t) => !targeted.some((m) => isTargeted([t], m.name)));
  if (unmatched.length) throw new ModelLoadError(`${where}: target_modules entry "${unmatched[0]}" matches no linear module of this ${model.model_type} model (${known()})`);
  const rng = new Rng(opts.seed);
  const modules = targeted.map((m) => {
    const bound = 1 / Math.sqrt(m.in);
    return { ...m, A: Float32Array.from({ length: config.r * m.in }, () => (2 * rng.next() - 1) * bound), B: new Float32Array(m.out * config.r) };
  });
  return { config, modules };
}
