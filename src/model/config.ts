// Hugging Face config.json → the one normalised description of a causal LM the runtime, the loader,
// the memory plan and the float64 reference all read. It also lists every parameter (HF name, shape,
// group) in checkpoint order, so the loader checks shapes, the plan counts bytes and the optimizer
// groups gradients from the same table. Unsupported architectures or options fail here, before any
// weight is read, with a ModelLoadError naming the key.

import type { RopeScaling } from '../kernels/types.ts';

/** A checkpoint or config the runtime cannot load. The CLI maps this class name to exit code 2. */
export class ModelLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ModelLoadError';
  }
}

export type Family = 'gpt2' | 'llama' | 'qwen2' | 'qwen3';

const ARCHITECTURES: Record<string, Family> = {
  GPT2LMHeadModel: 'gpt2',
  LlamaForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
};

export interface ModelConfig {
  architecture: string;
  family: Family;
  model_type: string;
  vocab_size: number; // V
  hidden_size: number; // C
  num_hidden_layers: number;
  num_attention_heads: number; // Hq
  num_key_value_heads: number; // Hkv (query head h reads kv head h ÷ (Hq / Hkv))
  head_dim: number; // D
  intermediate_size: number; // MLP width
  max_position_embeddings: number;
  norm: 'layernorm' | 'rmsnorm';
  norm_eps: number;
  /** RoPE base (null: learned absolute positions, GPT-2). */
  rope_theta: number | null;
  /** config.json rope_scaling (linear, llama3), null for none / 'default'. */
  rope_scaling: RopeScaling | null;
  tie_word_embeddings: boolean;
  qkv_bias: boolean;
  o_bias: boolean;
  mlp_bias: boolean;
  /** Qwen3: RMSNorm over head_dim on q and k, per head, before RoPE. */
  qk_norm: boolean;
  mlp: 'gelu_new' | 'silu_gate';
  /** Softmax scale on q·k (1/√D, or 1 for GPT-2 with scale_attn_weights false). */
  attn_scale: number;
  /**
   * config.json's dropout probabilities that are not 0, by key (DROPOUT_KEYS). The studio's forward has no dropout
   * (eval mode): a trainer that trains in train mode drops activations at random, so the step refuses there
   * (src/grpo/step_train.ts).
   */
  dropout: Record<string, number>;
  /** config.json's `_name_or_path` as written (save_pretrained's record of what was loaded): the Doctor's model name (src/doctor/tokenizer_fit.ts). */
  _name_or_path: string | null;
}

/**
 * The dropout keys each family's modeling code reads, with the transformers config class's default for a key left
 * out (GPT2Config: 0.1 each; LlamaConfig / Qwen2Config / Qwen3Config: attention_dropout 0.0). GPT-2's
 * summary_first_dropout belongs to the sequence-summary heads, not the causal LM.
 */
const DROPOUT_KEYS: Record<Family, Record<string, number>> = {
  gpt2: { attn_pdrop: 0.1, embd_pdrop: 0.1, resid_pdrop: 0.1 },
  llama: { attention_dropout: 0 },
  qwen2: { attention_dropout: 0 },
  qwen3: { attention_dropout: 0 },
};

/** Every family's dropout keys: what a trainer's override of config.json may set without changing anything else. */
export const ALL_DROPOUT_KEYS: ReadonlySet<string> = new Set(Object.values(DROPOUT_KEYS).flatMap((k) => Object.keys(k)));

function dropoutOf(cfg: Json, family: Family): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, fallback] of Object.entries(DROPOUT_KEYS[family])) {
    const p = num(cfg, key, fallback);
    if (p < 0 || p > 1) throw new ModelLoadError(`config.json: "${key}" must be a probability in [0, 1], got ${p}`);
    if (p > 0) out[key] = p;
  }
  return out;
}

/**
 * The dropout of a model whose config.json a trainer updates with `override` before building it (verl's
 * actor_rollout_ref.model.override_config through update_model_config): the family's keys, the override's value
 * where it gives one (its values checked by the caller's settings: src/grpo/settings/dropout.ts).
 */
export function dropoutWith(config: ModelConfig, override: Record<string, unknown>): Record<string, number> {
  const asLoaded = Object.fromEntries(Object.keys(DROPOUT_KEYS[config.family]).map((k) => [k, config.dropout[k] ?? 0]));
  return dropoutOf({ ...asLoaded, ...override }, config.family);
}

type Json = Record<string, unknown>;

function num(cfg: Json, key: string, fallback?: number): number {
  const v = cfg[key] ?? fallback;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new ModelLoadError(`config.json: "${key}" must be a number, got ${JSON.stringify(cfg[key])}`);
  return v;
}

function posInt(cfg: Json, key: string, fallback?: number): number {
  const v = num(cfg, key, fallback);
  if (!Number.isInteger(v) || v < 1) throw new ModelLoadError(`config.json: "${key}" must be a positive integer, got ${v}`);
  return v;
}

/**
 * More transformer blocks than any published model has by two orders of magnitude: a corrupt or hostile config.
 * Refused up front, so the per-layer lists built from it (parameters, plans) stay bounded.
 */
export const MAX_LAYERS = 65_536;

function layers(cfg: Json, key: string): number {
  const n = posInt(cfg, key);
  if (n > MAX_LAYERS) throw new ModelLoadError(`config.json: "${key}" = ${n} exceeds the ${MAX_LAYERS} layers the studio reads`);
  return n;
}

function reject(cond: boolean, what: string): void {
  if (cond) throw new ModelLoadError(`config.json: ${what} is not supported`);
}

/** config.json rope_scaling → RopeScaling (HF accepts the type under "rope_type" or the older "type"); other types are refused by name. */
function parseRopeScaling(raw: unknown): RopeScaling | null {
  if (raw == null) return null;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new ModelLoadError(`config.json: "rope_scaling" must be an object or null, got ${JSON.stringify(raw)}`);
  const s = raw as Json;
  const type = s.rope_type ?? s.type;
  const field = (key: string) => {
    const v = s[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new ModelLoadError(`config.json: rope_scaling.${key} must be a positive number for type "${String(type)}", got ${JSON.stringify(v)}`);
    return v;
  };
  if (type === 'default') return null;
  if (type === 'linear') return { rope_type: 'linear', factor: field('factor') };
  if (type === 'llama3') {
    const r = { rope_type: 'llama3' as const, factor: field('factor'), low_freq_factor: field('low_freq_factor'), high_freq_factor: field('high_freq_factor'), original_max_position_embeddings: field('original_max_position_embeddings') };
    if (r.high_freq_factor <= r.low_freq_factor) throw new ModelLoadError(`config.json: rope_scaling.high_freq_factor (${r.high_freq_factor}) must exceed low_freq_factor (${r.low_freq_factor})`);
    return r;
  }
  throw new ModelLoadError(`config.json: rope_scaling type ${JSON.stringify(type)} is not supported (supported: default, linear, llama3)`);
}

/** Parses a Hugging Face config.json object; throws ModelLoadError for anything the runtime cannot run. */
export function parseConfig(raw: unknown): ModelConfig {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ModelLoadError('config.json: not a JSON object');
  const cfg = raw as Json;
  const archs = cfg.architectures;
  const architecture = Array.isArray(archs) && typeof archs[0] === 'string' ? archs[0] : undefined;
  if (!architecture) throw new ModelLoadError('config.json: "architectures" is missing');
  const family = ARCHITECTURES[architecture];
  if (!family) {
    throw new ModelLoadError(`unsupported architecture "${architecture}" (supported: ${Object.keys(ARCHITECTURES).join(', ')})`);
  }
  const model_type = typeof cfg.model_type === 'string' ? cfg.model_type : family;
  // Keys both config layouts share.
  const common = () => ({ architecture, family, model_type, vocab_size: posInt(cfg, 'vocab_size'), dropout: dropoutOf(cfg, family), _name_or_path: typeof cfg._name_or_path === 'string' ? cfg._name_or_path : null });

  if (family === 'gpt2') {
    const C = posInt(cfg, 'n_embd');
    const H = posInt(cfg, 'n_head');
    if (C % H !== 0) throw new ModelLoadError(`config.json: n_embd ${C} is not divisible by n_head ${H}`);
    const act = cfg.activation_function ?? 'gelu_new';
    reject(act !== 'gelu_new' && act !== 'gelu_pytorch_tanh', `activation_function "${String(act)}"`);
    reject(cfg.scale_attn_by_inverse_layer_idx === true, 'scale_attn_by_inverse_layer_idx = true');
    return {
      ...common(),
      hidden_size: C,
      num_hidden_layers: layers(cfg, 'n_layer'),
      num_attention_heads: H,
      num_key_value_heads: H,
      head_dim: C / H,
      intermediate_size: cfg.n_inner == null ? 4 * C : posInt(cfg, 'n_inner'),
      max_position_embeddings: posInt(cfg, 'n_positions'),
      norm: 'layernorm',
      norm_eps: num(cfg, 'layer_norm_epsilon', 1e-5),
      rope_theta: null,
      rope_scaling: null,
      tie_word_embeddings: cfg.tie_word_embeddings !== false,
      qkv_bias: true,
      o_bias: true,
      mlp_bias: true,
      qk_norm: false,
      mlp: 'gelu_new',
      attn_scale: cfg.scale_attn_weights === false ? 1 : 1 / Math.sqrt(C / H),
    };
  }

  const C = posInt(cfg, 'hidden_size');
  const Hq = posInt(cfg, 'num_attention_heads');
  const Hkv = posInt(cfg, 'num_key_value_heads', Hq);
  if (Hq % Hkv !== 0) throw new ModelLoadError(`config.json: num_attention_heads ${Hq} is not a multiple of num_key_value_heads ${Hkv}`);
  const D = cfg.head_dim == null ? C / Hq : posInt(cfg, 'head_dim');
  if (!Number.isInteger(D)) throw new ModelLoadError(`config.json: hidden_size ${C} is not divisible by num_attention_heads ${Hq} and no head_dim is given`);
  if (D % 2 !== 0) throw new ModelLoadError(`config.json: head_dim ${D} must be even for rotary embeddings`);
  reject(cfg.hidden_act !== undefined && cfg.hidden_act !== 'silu', `hidden_act "${String(cfg.hidden_act)}"`);
  reject(cfg.use_sliding_window === true, 'use_sliding_window = true');
  const attentionBias = cfg.attention_bias === true;
  return {
    ...common(),
    hidden_size: C,
    num_hidden_layers: layers(cfg, 'num_hidden_layers'),
    num_attention_heads: Hq,
    num_key_value_heads: Hkv,
    head_dim: D,
    intermediate_size: posInt(cfg, 'intermediate_size'),
    max_position_embeddings: posInt(cfg, 'max_position_embeddings', 2048),
    norm: 'rmsnorm',
    norm_eps: num(cfg, 'rms_norm_eps', 1e-6),
    rope_theta: num(cfg, 'rope_theta', 10000),
    rope_scaling: parseRopeScaling(cfg.rope_scaling),
    // LlamaConfig / Qwen2Config / Qwen3Config all default to untied heads.
    tie_word_embeddings: cfg.tie_word_embeddings === true,
    // Qwen2 always has q/k/v biases (and never an o_proj bias); Llama / Qwen3 follow attention_bias.
    qkv_bias: family === 'qwen2' || attentionBias,
    o_bias: family !== 'qwen2' && attentionBias,
    mlp_bias: family === 'llama' && cfg.mlp_bias === true,
    qk_norm: family === 'qwen3',
    mlp: 'silu_gate',
    attn_scale: 1 / Math.sqrt(D),
  };
}

/** Parameter groups for per-group gradient norms: the embedding, each layer's attention / MLP / norms, the final norm, the head. */
export type ParamGroup = string; // 'embedding' | `layers.${i}.attention` | `layers.${i}.mlp` | `layers.${i}.norms` | 'norm' | 'lm_head'

export interface ParamSpec {
  name: string; // exactly as in the checkpoint
  shape: number[];
  group: ParamGroup;
}

/** Every parameter of the model, HF names and layouts, in forward order. A tied head has no entry (it is the embedding). */
export function paramSpecs(cfg: ModelConfig): ParamSpec[] {
  const { vocab_size: V, hidden_size: C, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
  const out: ParamSpec[] = [];
  const add = (name: string, shape: number[], group: ParamGroup) => out.push({ name, shape, group });
  if (cfg.family === 'gpt2') {
    add('transformer.wte.weight', [V, C], 'embedding');
    add('transformer.wpe.weight', [cfg.max_position_embeddings, C], 'embedding');
    for (let l = 0; l < cfg.num_hidden_layers; l++) {
      const p = `transformer.h.${l}`;
      add(`${p}.ln_1.weight`, [C], `layers.${l}.norms`);
      add(`${p}.ln_1.bias`, [C], `layers.${l}.norms`);
      // Conv1D: [in, out]; c_attn columns are [q | k | v].
      add(`${p}.attn.c_attn.weight`, [C, 3 * C], `layers.${l}.attention`);
      add(`${p}.attn.c_attn.bias`, [3 * C], `layers.${l}.attention`);
      add(`${p}.attn.c_proj.weight`, [C, C], `layers.${l}.attention`);
      add(`${p}.attn.c_proj.bias`, [C], `layers.${l}.attention`);
      add(`${p}.ln_2.weight`, [C], `layers.${l}.norms`);
      add(`${p}.ln_2.bias`, [C], `layers.${l}.norms`);
      add(`${p}.mlp.c_fc.weight`, [C, I], `layers.${l}.mlp`);
      add(`${p}.mlp.c_fc.bias`, [I], `layers.${l}.mlp`);
      add(`${p}.mlp.c_proj.weight`, [I, C], `layers.${l}.mlp`);
      add(`${p}.mlp.c_proj.bias`, [C], `layers.${l}.mlp`);
    }
    add('transformer.ln_f.weight', [C], 'norm');
    add('transformer.ln_f.bias', [C], 'norm');
  } else {
    add('model.embed_tokens.weight', [V, C], 'embedding');
    for (let l = 0; l < cfg.num_hidden_layers; l++) {
      const p = `model.layers.${l}`;
      const attn = `layers.${l}.attention`;
      const mlp = `layers.${l}.mlp`;
      add(`${p}.input_layernorm.weight`, [C], `layers.${l}.norms`);
      // nn.Linear: [out, in].
      add(`${p}.self_attn.q_proj.weight`, [Hq * D, C], attn);
      if (cfg.qkv_bias) add(`${p}.self_attn.q_proj.bias`, [Hq * D], attn);
      add(`${p}.self_attn.k_proj.weight`, [Hkv * D, C], attn);
      if (cfg.qkv_bias) add(`${p}.self_attn.k_proj.bias`, [Hkv * D], attn);
      add(`${p}.self_attn.v_proj.weight`, [Hkv * D, C], attn);
      if (cfg.qkv_bias) add(`${p}.self_attn.v_proj.bias`, [Hkv * D], attn);
      if (cfg.qk_norm) {
        add(`${p}.self_attn.q_norm.weight`, [D], attn);
        add(`${p}.self_attn.k_norm.weight`, [D], attn);
      }
      add(`${p}.self_attn.o_proj.weight`, [C, Hq * D], attn);
      if (cfg.o_bias) add(`${p}.self_attn.o_proj.bias`, [C], attn);
      add(`${p}.post_attention_layernorm.weight`, [C], `layers.${l}.norms`);
      add(`${p}.mlp.gate_proj.weight`, [I, C], mlp);
      if (cfg.mlp_bias) add(`${p}.mlp.gate_proj.bias`, [I], mlp);
      add(`${p}.mlp.up_proj.weight`, [I, C], mlp);
      if (cfg.mlp_bias) add(`${p}.mlp.up_proj.bias`, [I], mlp);
      add(`${p}.mlp.down_proj.weight`, [C, I], mlp);
      if (cfg.mlp_bias) add(`${p}.mlp.down_proj.bias`, [C], mlp);
    }
    add('model.norm.weight', [C], 'norm');
    if (!cfg.tie_word_embeddings) add('lm_head.weight', [V, C], 'lm_head');
  }
  return out;
}

/** A parameter on the GPU in HF layout (the model's weights, a LoRA adapter's A and B): f32, or packed bf16 when frozen. */
export interface Param extends ParamSpec {
  buffer: GPUBuffer;
  dtype?: 'bf16'; // absent: f32
}

export const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** Total parameter count (a tied head counted once). */
export function countParams(cfg: ModelConfig): number {
  return paramSpecs(cfg).reduce((s, p) => s + numel(p.shape), 0);
}

/** The tensor the head multiplies by: lm_head.weight, or the embedding when tied. Layout (V, C) either way. */
export function lmHeadName(cfg: ModelConfig): string {
  if (!cfg.tie_word_embeddings) return 'lm_head.weight';
  return cfg.family === 'gpt2' ? 'transformer.wte.weight' : 'model.embed_tokens.weight';
}

/** Parameter names by group, in forward order (for per-group gradient norms). */
export function paramGroups(cfg: ModelConfig): Map<ParamGroup, string[]> {
  const groups = new Map<ParamGroup, string[]>();
  for (const p of paramSpecs(cfg)) {
    const g = groups.get(p.group);
    if (g) g.push(p.name);
    else groups.set(p.group, [p.name]);
  }
  return groups;
}
