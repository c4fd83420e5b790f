// Float64 twin of src/model/model.ts: the same GPT-2 / Llama / Qwen2 / Qwen3 forward and backward,
// composed from the op twins in src/oracle/ (no op is re-implemented here), so a GPU model can be checked
// against it on any random config and the model-level gradients against finite differences.
// Slow by design (plain loops): tiny configs only. With a PEFT LoRA adapter (src/model/lora.ts) every
// adapted linear layer adds scaling·(x·Aᵀ)·Bᵀ, and backward also returns ∂/∂A and ∂/∂B under their PEFT keys.
import { lmHeadName, numel, paramSpecs, type ModelConfig } from '../model/config.ts';
import { loadCheckpoint } from '../model/loader.ts';
import { loraKey, type LoraWeights } from '../model/lora.ts';
import type { ForwardInputs } from '../model/forward.ts';
import type { ModelSource } from '../model/source.ts';
import { attention_backward, attention_forward } from './attention.ts';
import { column_copy_forward } from './column_copy.ts';
import { embedding_backward, embedding_forward } from './embedding.ts';
import { gelu_backward, gelu_forward } from './gelu.ts';
import { layernorm_backward, layernorm_forward } from './layernorm.ts';
import { matmul_backward, matmul_forward, scale_forward, type WeightLayout } from './matmul.ts';
import { residual_accumulate, residual_forward } from './residual.ts';
import { rmsnorm_backward, rmsnorm_forward } from './rmsnorm.ts';
import { rope_backward, rope_forward } from './rope.ts';
import { silu_gate_backward, silu_gate_forward } from './silu_gate.ts';

type F64 = Float64Array;

interface Norm {
  out: F64;
  mean: F64 | null;
  rstd: F64;
}

interface LayerCache {
  x: F64; // (N, C) layer input
  ln1: Norm;
  qRaw: F64 | null; // (N, Hq·D) before q_norm (Qwen3)
  kRaw: F64 | null;
  qNorm: Norm | null;
  kNorm: Norm | null;
  q: F64; // (N, Hq·D) as attention reads it
  k: F64; // (N, Hkv·D)
  v: F64;
  lse: F64; // (B, Hq, T) attention log-sum-exp
  atty: F64; // (N, Hq·D)
  mid: F64; // (N, C)
  ln2: Norm;
  a: F64; // (N, I) c_fc output (GPT-2) or gate
  up: F64 | null; // (N, I)
  h: F64; // (N, I) gelu(a) or silu(a)·up
}

export interface RefForward {
  logits: F64; // (rows, V)
  rows: number;
  /** Everything backward needs. */
  cache: { x: ForwardInputs; keep: number; layers: LayerCache[]; last: F64; lnf: Norm; headIn: F64 };
}

/** One adapted module in float64: A (r, in), B (out, r). */
export interface RefLoraModule {
  A: F64;
  B: F64;
  in: number;
  out: number;
}

export class RefModel {
  /** Adapted modules by module name (tests perturb A and B here for finite differences). */
  readonly lora = new Map<string, RefLoraModule>();
  private readonly scaling: number;
  private readonly r: number;

  constructor(
    readonly config: ModelConfig,
    readonly weights: Map<string, F64>,
    adapter: LoraWeights | null = null,
  ) {
    this.scaling = adapter?.config.scaling ?? 0;
    this.r = adapter?.config.r ?? 0;
    for (const m of adapter?.modules ?? []) this.lora.set(m.name, { A: Float64Array.from(m.A), B: Float64Array.from(m.B), in: m.in, out: m.out });
    for (const p of paramSpecs(config)) {
      if (weights.get(p.name)?.length !== numel(p.shape)) throw new RangeError(`RefModel: "${p.name}" needs ${numel(p.shape)} values`);
    }
  }

  static async from_pretrained(source: ModelSource): Promise<RefModel> {
    const weights = new Map<string, F64>();
    const info = await loadCheckpoint(source, (spec, data) => void weights.set(spec.name, Float64Array.from(data)));
    return new RefModel(info.config, weights);
  }

  private w(name: string): F64 {
    const w = this.weights.get(name);
    if (!w) throw new Error(`no parameter "${name}"`);
    return w;
  }

  private prefix(l: number): string {
    return this.config.family === 'gpt2' ? `transformer.h.${l}` : `model.layers.${l}`;
  }

  private normName(which: 'ln1' | 'ln2' | 'final', l = 0): string {
    const gpt2 = this.config.family === 'gpt2';
    if (which === 'final') return gpt2 ? 'transformer.ln_f' : 'model.norm';
    if (gpt2) return `${this.prefix(l)}.${which === 'ln1' ? 'ln_1' : 'ln_2'}`;
    return `${this.prefix(l)}.${which === 'ln1' ? 'input_layernorm' : 'post_attention_layernorm'}`;
  }

  private get layout(): WeightLayout {
    return this.config.family === 'gpt2' ? 'in_out' : 'out_in';
  }

  private linear(name: string, inp: F64, M: number, K: number, N: number): F64 {
    const y = matmul_forward(inp, this.w(`${name}.weight`), this.weights.get(`${name}.bias`) ?? null, M, K, N, this.layout);
    const a = this.lora.get(name);
    if (!a) return y;
    const u = scale_forward(matmul_forward(inp, a.A, null, M, K, this.r, 'out_in'), this.scaling); // (M, r)
    return residual_accumulate(y, matmul_forward(u, a.B, null, M, this.r, N, 'out_in'));
  }

  private norm(name: string, inp: F64, N: number): Norm {
    const { hidden_size: C, norm_eps: eps } = this.config;
    if (this.config.norm === 'layernorm') return layernorm_forward(inp, this.w(`${name}.weight`), this.w(`${name}.bias`), N, C, eps);
    return { ...rmsnorm_forward(inp, this.w(`${name}.weight`), N, C, eps), mean: null };
  }

  forward(x: ForwardInputs, opts: { logits_to_keep?: number } = {}): RefForward {
    const cfg = this.config;
    const { B, T } = x;
    const N = B * T;
    const { hidden_size: C, vocab_size: V } = cfg;
    const keep = opts.logits_to_keep ?? 0;
    const gpt2 = cfg.family === 'gpt2';
    let h = embedding_forward(
      x.input_ids,
      this.w(gpt2 ? 'transformer.wte.weight' : 'model.embed_tokens.weight'),
      gpt2 ? this.w('transformer.wpe.weight') : null,
      gpt2 ? x.position_ids : null,
      N,
      C,
      V,
      gpt2 ? cfg.max_position_embeddings : 0,
    );
    const layers: LayerCache[] = [];
    for (let l = 0; l < cfg.num_hidden_layers; l++) {
      const c = this.layerForward(l, h, x);
      layers.push(c);
      h = residual_forward(c.mid, this.mlpOut(l, c, N));
    }
    const lnf = this.norm(this.normName('final'), h, N);
    let headIn = lnf.out;
    if (keep) {
      headIn = new Float64Array(B * keep * C);
      for (let b = 0; b < B; b++) headIn.set(lnf.out.subarray((b * T + T - keep - 1) * C, (b * T + T - 1) * C), b * keep * C);
    }
    const rows = B * (keep || T);
    const logits = matmul_forward(headIn, this.w(lmHeadName(cfg)), null, rows, C, V, 'out_in');
    return { logits, rows, cache: { x, keep, layers, last: h, lnf, headIn } };
  }

  private layerForward(l: number, x: F64, inp: ForwardInputs): LayerCache {
    const cfg = this.config;
    const { B, T } = inp;
    const N = B * T;
    const { hidden_size: C, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
    const p = this.prefix(l);
    const ln1 = this.norm(this.normName('ln1', l), x, N);
    let q: F64, k: F64, v: F64;
    let qRaw: F64 | null = null;
    let kRaw: F64 | null = null;
    let qNorm: Norm | null = null;
    let kNorm: Norm | null = null;
    if (cfg.family === 'gpt2') {
      const qkv = this.linear(`${p}.attn.c_attn`, ln1.out, N, C, 3 * C);
      [q, k, v] = [0, 1, 2].map((i) => {
        const t = new Float64Array(N * C);
        column_copy_forward(t, qkv, N, C, 3 * C, i * C, C, 0);
        return t;
      });
    } else {
      q = this.linear(`${p}.self_attn.q_proj`, ln1.out, N, C, Hq * D);
      k = this.linear(`${p}.self_attn.k_proj`, ln1.out, N, C, Hkv * D);
      v = this.linear(`${p}.self_attn.v_proj`, ln1.out, N, C, Hkv * D);
      if (cfg.qk_norm) {
        [qRaw, kRaw] = [q, k];
        qNorm = { ...rmsnorm_forward(q, this.w(`${p}.self_attn.q_norm.weight`), N * Hq, D, cfg.norm_eps), mean: null };
        kNorm = { ...rmsnorm_forward(k, this.w(`${p}.self_attn.k_norm.weight`), N * Hkv, D, cfg.norm_eps), mean: null };
        [q, k] = [qNorm.out, kNorm.out];
      }
      q = rope_forward(q, inp.position_ids, N, Hq, D, cfg.rope_theta!, cfg.rope_scaling);
      k = rope_forward(k, inp.position_ids, N, Hkv, D, cfg.rope_theta!, cfg.rope_scaling);
    }
    const { out: atty, lse } = attention_forward(q, k, v, inp.attention_mask, { B, Tq: T, Tk: T, TkvMax: T, Hq, Hkv, D, scale: cfg.attn_scale });
    const o = this.linear(cfg.family === 'gpt2' ? `${p}.attn.c_proj` : `${p}.self_attn.o_proj`, atty, N, Hq * D, C);
    const mid = residual_forward(x, o);
    const ln2 = this.norm(this.normName('ln2', l), mid, N);
    let a: F64, up: F64 | null, h: F64;
    if (cfg.mlp === 'gelu_new') {
      a = this.linear(`${p}.mlp.c_fc`, ln2.out, N, C, I);
      up = null;
      h = gelu_forward(a);
    } else {
      a = this.linear(`${p}.mlp.gate_proj`, ln2.out, N, C, I);
      up = this.linear(`${p}.mlp.up_proj`, ln2.out, N, C, I);
      h = silu_gate_forward(a, up);
    }
    return { x, ln1, qRaw, kRaw, qNorm, kNorm, q, k, v, lse, atty, mid, ln2, a, up, h };
  }

  private mlpOut(l: number, c: LayerCache, N: number): F64 {
    const { hidden_size: C, intermediate_size: I } = this.config;
    return this.linear(this.config.family === 'gpt2' ? `${this.prefix(l)}.mlp.c_proj` : `${this.prefix(l)}.mlp.down_proj`, c.h, N, I, C);
  }

  // ------------------------------------------------------------------ backward

  /** ∂(Σ logits·dlogits)/∂param for every parameter (a tied embedding gets both of its uses). */
  backward(f: RefForward, dlogits: F64): Map<string, F64> {
    const cfg = this.config;
    const { x, keep, layers, last, lnf, headIn } = f.cache;
    const { B, T } = x;
    const N = B * T;
    const { hidden_size: C, vocab_size: V, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
    const grads = new Map<string, F64>(paramSpecs(cfg).map((p) => [p.name, new Float64Array(numel(p.shape))]));
    const add = (name: string, g: F64) => void grads.set(name, residual_accumulate(grads.get(name)!, g));
    const gpt2 = cfg.family === 'gpt2';

    const linearBackward = (name: string, dout: F64, inp: F64, M: number, K: number, Nout: number): F64 => {
      const r = matmul_backward(dout, inp, this.w(`${name}.weight`), M, K, Nout, this.layout);
      add(`${name}.weight`, r.dweight);
      if (grads.has(`${name}.bias`)) add(`${name}.bias`, r.dbias);
      const a = this.lora.get(name);
      if (!a) return r.dinp;
      // u = scaling·x·Aᵀ is recomputed rather than cached: the twin favours plainness over speed.
      const u = scale_forward(matmul_forward(inp, a.A, null, M, K, this.r, 'out_in'), this.scaling);
      const bw = matmul_backward(dout, u, a.B, M, this.r, Nout, 'out_in');
      const aw = matmul_backward(scale_forward(bw.dinp, this.scaling), inp, a.A, M, K, this.r, 'out_in');
      grads.set(loraKey(name, 'B'), residual_accumulate(grads.get(loraKey(name, 'B')) ?? new Float64Array(a.B.length), bw.dweight));
      grads.set(loraKey(name, 'A'), residual_accumulate(grads.get(loraKey(name, 'A')) ?? new Float64Array(a.A.length), aw.dweight));
      return residual_accumulate(r.dinp, aw.dinp);
    };
    const normBackward = (name: string, dout: F64, inp: F64, n: Norm, rows: number): F64 => {
      if (cfg.norm === 'layernorm') {
        const r = layernorm_backward(dout, inp, this.w(`${name}.weight`), n.mean!, n.rstd, rows, C);
        add(`${name}.weight`, r.dweight);
        add(`${name}.bias`, r.dbias);
        return r.dinp;
      }
      const r = rmsnorm_backward(dout, inp, this.w(`${name}.weight`), n.rstd, rows, C);
      add(`${name}.weight`, r.dweight);
      return r.dinp;
    };

    const head = lmHeadName(cfg);
    const rows = f.rows;
    const hr = matmul_backward(dlogits, headIn, this.w(head), rows, C, V, 'out_in');
    add(head, hr.dweight);
    let dln = hr.dinp;
    if (keep) {
      dln = new Float64Array(N * C);
      for (let b = 0; b < B; b++) dln.set(hr.dinp.subarray(b * keep * C, (b + 1) * keep * C), (b * T + T - keep - 1) * C);
    }
    let dres = normBackward(this.normName('final'), dln, last, lnf, N);

    for (let l = cfg.num_hidden_layers - 1; l >= 0; l--) {
      const c = layers[l];
      const p = this.prefix(l);
      // MLP branch.
      let dln2: F64;
      if (gpt2) {
        const dh = linearBackward(`${p}.mlp.c_proj`, dres, c.h, N, I, C);
        dln2 = linearBackward(`${p}.mlp.c_fc`, gelu_backward(c.a, dh), c.ln2.out, N, C, I);
      } else {
        const dh = linearBackward(`${p}.mlp.down_proj`, dres, c.h, N, I, C);
        const { dgate, dup } = silu_gate_backward(dh, c.a, c.up!);
        dln2 = residual_forward(linearBackward(`${p}.mlp.gate_proj`, dgate, c.ln2.out, N, C, I), linearBackward(`${p}.mlp.up_proj`, dup, c.ln2.out, N, C, I));
      }
      dres = residual_forward(dres, normBackward(this.normName('ln2', l), dln2, c.mid, c.ln2, N));
      // Attention branch.
      const datty = linearBackward(gpt2 ? `${p}.attn.c_proj` : `${p}.self_attn.o_proj`, dres, c.atty, N, Hq * D, C);
      const { dq, dk, dv } = attention_backward(datty, c.q, c.k, c.v, c.atty, c.lse, x.attention_mask, { B, T, Hq, Hkv, D, scale: cfg.attn_scale });
      let dln1: F64;
      if (gpt2) {
        const dqkv = new Float64Array(N * 3 * C);
        [dq, dk, dv].forEach((src, i) => column_copy_forward(dqkv, src, N, C, C, 0, 3 * C, i * C));
        dln1 = linearBackward(`${p}.attn.c_attn`, dqkv, c.ln1.out, N, C, 3 * C);
      } else {
        let dqr = rope_backward(dq, x.position_ids, N, Hq, D, cfg.rope_theta!, cfg.rope_scaling);
        let dkr = rope_backward(dk, x.position_ids, N, Hkv, D, cfg.rope_theta!, cfg.rope_scaling);
        if (cfg.qk_norm) {
          const qn = rmsnorm_backward(dqr, c.qRaw!, this.w(`${p}.self_attn.q_norm.weight`), c.qNorm!.rstd, N * Hq, D);
          const kn = rmsnorm_backward(dkr, c.kRaw!, this.w(`${p}.self_attn.k_norm.weight`), c.kNorm!.rstd, N * Hkv, D);
          add(`${p}.self_attn.q_norm.weight`, qn.dweight);
          add(`${p}.self_attn.k_norm.weight`, kn.dweight);
          [dqr, dkr] = [qn.dinp, kn.dinp];
        }
        dln1 = linearBackward(`${p}.self_attn.q_proj`, dqr, c.ln1.out, N, C, Hq * D);
        dln1 = residual_accumulate(dln1, linearBackward(`${p}.self_attn.k_proj`, dkr, c.ln1.out, N, C, Hkv * D));
        dln1 = residual_accumulate(dln1, linearBackward(`${p}.self_attn.v_proj`, dv, c.ln1.out, N, C, Hkv * D));
      }
      dres = residual_forward(dres, normBackward(this.normName('ln1', l), dln1, c.x, c.ln1, N));
    }

    const e = embedding_backward(dres, x.input_ids, gpt2 ? x.position_ids : null, N, C, V, gpt2 ? cfg.max_position_embeddings : 0);
    add(gpt2 ? 'transformer.wte.weight' : 'model.embed_tokens.weight', e.dwte);
    if (gpt2) add('transformer.wpe.weight', e.dwpe!);
    return grads;
  }
}
