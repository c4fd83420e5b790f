// Reads a Hugging Face checkpoint from any ModelSource: config.json, then model.safetensors or the
// shards listed in model.safetensors.index.json, one shard at a time (a shard's bytes are dropped once
// its tensors are handed over). Every parameter the config implies must be present with the shape the
// config implies; F32 / F16 / BF16 (and F64) are widened to f32. The consumer (GPU upload in model.ts,
// the float64 reference in src/oracle/model.ts) receives each tensor through `onTensor`, with its stored bytes
// too (a frozen model keeps BF16 weights packed on the GPU).
import { parseSafeTensors, tensorBytes, toF32, type DType } from '../io/safetensors.ts';
import { ModelLoadError, paramSpecs, parseConfig, numel, type ModelConfig, type ParamSpec } from './config.ts';
import type { ModelSource } from './source.ts';

export interface LoadProgress {
  phase: 'config' | 'download' | 'tensors' | 'done';
  file?: string;
  fileIndex?: number; // 0-based shard index
  files?: number; // shard count
  loaded: number; // bytes of this file (download) or tensors handed over (tensors)
  total: number;
}

export interface LoadOptions {
  onProgress?: (p: LoadProgress) => void;
  /**
   * GPU storage of the weights (CausalLM.from_pretrained): 'f32' (default, trainable) or 'checkpoint', for a
   * frozen model (a LoRA base, a reference): BF16 2-D weights (linear, lm_head, token embedding) stay packed bf16, half the bytes.
   */
  storage?: 'f32' | 'checkpoint';
}

/** A tensor as the checkpoint stores it (a view into the shard, valid only during onTensor). */
export interface StoredTensor {
  dtype: DType;
  bytes: Uint8Array;
}

export interface CheckpointInfo {
  config: ModelConfig;
  hfConfig: Record<string, unknown>;
  files: string[];
  dtypes: DType[]; // distinct storage dtypes seen
  unused: string[]; // checkpoint tensors the model does not use (HF would warn)
}

const FLOAT_DTYPES: DType[] = ['F32', 'F16', 'BF16', 'F64'];

/** Buffers some checkpoints carry that are not parameters (GPT-2's causal-mask buffers, rotary inv_freq). */
const NON_PARAMETERS = [/\.attn\.(masked_)?bias$/, /rotary_emb\.inv_freq$/];

/** Names a parameter may be stored under: the original GPT-2 checkpoints omit the "transformer." prefix. */
function aliases(name: string): string[] {
  return name.startsWith('transformer.') ? [name, name.slice('transformer.'.length)] : [name];
}

async function readConfig(source: ModelSource): Promise<{ config: ModelConfig; hfConfig: Record<string, unknown> }> {
  const hfConfig = (await source.readJSON('config.json')) as Record<string, unknown>;
  try {
    return { config: parseConfig(hfConfig), hfConfig };
  } catch (e) {
    if (e instanceof ModelLoadError) throw new ModelLoadError(`${source.name}: ${e.message}`);
    throw e;
  }
}

/** A shard named by an index: a relative path inside the folder ("model-00001-of-00002.safetensors", "sub/x.safetensors"). */
function isShardName(file: unknown): file is string {
  return typeof file === 'string' && file.endsWith('.safetensors') && !file.startsWith('/') && !/^[a-zA-Z]:/.test(file) && !file.includes('\\') && !file.split('/').some((p) => p === '..' || p === '.' || p === '');
}

/** Transformer-block weights ("model.layers.3.…", GPT-2 "h.3.…") name their layer index. */
const LAYER_INDEX = /(?:^|\.)(?:layers|h)\.(\d+)\./;

/** Shard file names in order, and which file holds each stored tensor name (null: single file, read its header). */
async function listFiles(source: ModelSource): Promise<{ files: string[]; weightMap: Map<string, string> | null }> {
  if (await source.exists('model.safetensors.index.json')) {
    const index = (await source.readJSON('model.safetensors.index.json')) as { weight_map?: Record<string, string> };
    if (!index?.weight_map || typeof index.weight_map !== 'object') {
      throw new ModelLoadError(`${source.name}: model.safetensors.index.json has no "weight_map"`);
    }
    const weightMap = new Map(Object.entries(index.weight_map));
    for (const [tensor, file] of weightMap) {
      if (!isShardName(file)) throw new ModelLoadError(`${source.name}: model.safetensors.index.json maps "${tensor}" to ${JSON.stringify(file)}, not a .safetensors file inside the model folder`);
    }
    return { files: [...new Set(weightMap.values())], weightMap };
  }
  if (await source.exists('model.safetensors')) return { files: ['model.safetensors'], weightMap: null };
  const hint = (await source.exists('pytorch_model.bin')) ? ' (only pytorch_model.bin, which cannot be read: convert it to safetensors)' : '';
  throw new ModelLoadError(`${source.name}: no model.safetensors or model.safetensors.index.json${hint}`);
}

/**
 * Streams every parameter of the checkpoint to `onTensor` (HF name, shape, f32 data — the data may be
 * a view into the shard, valid only during the call). Throws ModelLoadError on an unsupported config,
 * a missing tensor, a shape that disagrees with the config or a non-float dtype.
 */
export async function loadCheckpoint(
  source: ModelSource,
  onTensor: (spec: ParamSpec, data: Float32Array, stored: StoredTensor) => void | Promise<void>,
  opts: LoadOptions = {},
): Promise<CheckpointInfo> {
  const progress = opts.onProgress ?? (() => {});
  progress({ phase: 'config', loaded: 0, total: 1 });
  const { config, hfConfig } = await readConfig(source);
  const specs = paramSpecs(config);
  const { files, weightMap } = await listFiles(source);

  // Which stored name and file each parameter comes from (when an index tells us up front).
  const pending = new Map(specs.map((s) => [s.name, s]));
  if (weightMap) {
    const missing = specs.filter((s) => !aliases(s.name).some((a) => weightMap.has(a))).map((s) => s.name);
    if (missing.length) throw missingError(source, missing);
  }

  const dtypes = new Set<DType>();
  const unused: string[] = [];
  let handed = 0;
  for (let fi = 0; fi < files.length; fi++) {
    const file = files[fi];
    const bytes = await source.readBytes(file, (loaded, total) => progress({ phase: 'download', file, fileIndex: fi, files: files.length, loaded, total }));
    const st = parseSafeTensors(bytes, `${source.name}/${file}`);
    const stored = new Map<string, string>(); // stored name → parameter name
    // With an index, a parameter is read from the shard its weight_map names: a second copy elsewhere is not used.
    for (const name of pending.keys()) for (const a of aliases(name)) if (st.tensors.has(a) && (!weightMap || weightMap.get(a) === file)) stored.set(a, name);
    for (const [storedName, info] of st.tensors) {
      const paramName = stored.get(storedName);
      if (!paramName) {
        const tiedHead = config.tie_word_embeddings && storedName === 'lm_head.weight';
        if (!tiedHead && !NON_PARAMETERS.some((re) => re.test(storedName))) unused.push(storedName);
        continue;
      }
      const spec = pending.get(paramName)!;
      if (!FLOAT_DTYPES.includes(info.dtype)) {
        throw new ModelLoadError(`${source.name}: tensor "${storedName}" has dtype ${info.dtype}; only F32, F16 and BF16 checkpoints are supported`);
      }
      if (info.shape.length !== spec.shape.length || info.shape.some((d, i) => d !== spec.shape[i])) {
        throw new ModelLoadError(
          `${source.name}: tensor "${storedName}" has shape ${JSON.stringify(info.shape)}, config.json implies ${JSON.stringify(spec.shape)}`,
        );
      }
      dtypes.add(info.dtype);
      const data = toF32(st, storedName);
      if (data.length !== numel(spec.shape)) throw new ModelLoadError(`${source.name}: tensor "${storedName}" has ${data.length} elements`);
      const bad = firstNonFinite(data);
      if (bad >= 0) throw new ModelLoadError(`${source.name}/${file}: tensor "${storedName}" holds ${data[bad]} at flat index ${bad}: a checkpoint with NaN or infinite weights cannot be used`);
      await onTensor(spec, data, { dtype: info.dtype, bytes: tensorBytes(st, storedName) });
      pending.delete(paramName);
      progress({ phase: 'tensors', file, fileIndex: fi, files: files.length, loaded: ++handed, total: specs.length });
    }
  }
  if (pending.size) throw missingError(source, [...pending.keys()]);
  // Weights for layers the config does not have would be dropped without a word: refuse instead.
  const extraLayer = unused.find((n) => Number(LAYER_INDEX.exec(n)?.[1] ?? -1) >= config.num_hidden_layers);
  if (extraLayer) {
    throw new ModelLoadError(`${source.name}: config.json has num_hidden_layers = ${config.num_hidden_layers} but the checkpoint holds "${extraLayer}"${unused.length > 1 ? ` (${unused.length} unused tensors in all)` : ''}: the config and the weights disagree`);
  }
  progress({ phase: 'done', loaded: specs.length, total: specs.length });
  return { config, hfConfig, files, dtypes: [...dtypes], unused };
}

/**
 * Index of the first NaN or ±Infinity (x - x is 0 only for finite x), or -1: one linear pass, no allocation.
 * Also the LoRA adapter's check (src/model/lora.ts loadLoraAdapter).
 */
export function firstNonFinite(a: Float32Array): number {
  for (let i = 0; i < a.length; i++) if (a[i] - a[i] !== 0) return i;
  return -1;
}

function missingError(source: ModelSource, names: string[]): ModelLoadError {
  const shown = names.slice(0, 4).map((n) => `"${n}"`).join(', ');
  return new ModelLoadError(`${source.name}: missing tensor${names.length > 1 ? 's' : ''} ${shown}${names.length > 4 ? ` and ${names.length - 4} more` : ''}`);
}
