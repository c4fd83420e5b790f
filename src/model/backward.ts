// The causal LM's backward pass as kernel launches (llm.c's gpt2_backward): from dlogits (or, chunk by
// chunk, from the loss's per-token dlogp: src/model/head.ts) through the head, final norm, every layer
// in reverse (MLP, norm, attention, RoPE / QK-norm, QKV projections, norm) to the embeddings. Every
// parameter gradient accumulates (+=): a tied embedding receives the head's and the embedding's
// contributions, and micro-batches add up.
import type { Recorder } from '../gpu/context.ts';
import { attention_backward } from '../kernels/attention.ts';
import { column_copy_forward } from '../kernels/column_copy.ts';
import { embedding_backward } from '../kernels/embedding.ts';
import { gelu_backward } from '../kernels/gelu.ts';
import { matmul_backward } from '../kernels/matmul.ts';
import { rmsnorm_backward } from '../kernels/rmsnorm.ts';
import { rope_backward } from '../kernels/rope.ts';
import { silu_gate_backward } from '../kernels/silu_gate.ts';
import { lmHeadName } from './config.ts';
import { layerForward } from './forward.ts';
import { recordHeadBackward, type HeadGrad } from './head.ts';
import type { LayerOps } from './layer_ops.ts';
import type { Workspace } from './workspace.ts';

/** What arrives at the head: dlogits (rows, V), or per-token dlogp turned into dlogits in chunks of `chunkRows` rows. */
export type HeadInput = { dlogits: GPUBuffer } | { grad: HeadGrad; chunkRows: number };

/** Records the backward of the forward saved in `ws` from the head's gradient; parameter gradients accumulate. */
export function recordBackward(rec: Recorder, ops: LayerOps, ws: Workspace, top: HeadInput): void {
  const cfg = ops.config;
  const { B, T, keep } = ws;
  const N = B * T;
  const { hidden_size: C, vocab_size: V, intermediate_size: I, num_attention_heads: Hq, num_key_value_heads: Hkv, head_dim: D } = cfg;
  const s = ws.shared;
  const g = ws.grads();
  const rows = ws.rows;
  const head = lmHeadName(cfg);
  const hidden = keep ? s.lnf_kept : s.lnf; // (rows, C)
  const dhidden = keep ? g.dlnf_kept : g.dln;

  if ('grad' in top) recordHeadBackward(rec, ops, hidden, dhidden, rows, top.chunkRows, top.grad);
  else {
    matmul_backward(rec, {
      dinp: dhidden, dweight: ops.gBase(head), dout: top.dlogits, inp: hidden, weight: ops.w(head),
      M: rows, K: C, N: V, weightLayout: 'out_in', weightDtype: ops.dt(head), accumulate: true,
    });
  }
  if (keep) {
    rec.clear(g.dln);
    for (let b = 0; b < B; b++) rec.copy(g.dlnf_kept, b * keep * C * 4, g.dln, (b * T + T - keep - 1) * C * 4, keep * C * 4);
  }
  ops.normBackward(rec, ops.normName('final'), g.dresid, g.dln, ws.residOut(cfg.num_hidden_layers - 1), s.lnf_mean, s.lnf_rstd, N, false);

  for (let l = cfg.num_hidden_layers - 1; l >= 0; l--) {
    // g.dresid holds ∂loss/∂(layer l output) on entry and ∂loss/∂(layer l input) on exit.
    if (ws.checkpoint) layerForward(rec, ops, ws, l); // refill the shared activations from the saved layer input
    const a = ws.layers[l];
    const p = ops.layerPrefix(l);
    const gpt2 = cfg.family === 'gpt2';

    if (gpt2) {
      ops.linearBackward(rec, `${p}.mlp.c_proj`, g.dh, g.dresid, a.fch_gelu, N, I, C);
      gelu_backward(rec, { dinp: g.da, inp: a.fch, dout: g.dh, n: N * I });
      ops.linearBackward(rec, `${p}.mlp.c_fc`, g.dln, g.da, a.ln2, N, C, I);
    } else {
      ops.linearBackward(rec, `${p}.mlp.down_proj`, g.dh, g.dresid, a.h, N, I, C);
      silu_gate_backward(rec, { dgate: g.da, dup: g.dup, dout: g.dh, gate: a.gate, up: a.up, n: N * I });
      ops.linearBackward(rec, `${p}.mlp.gate_proj`, g.dln, g.da, a.ln2, N, C, I);
      ops.linearBackward(rec, `${p}.mlp.up_proj`, g.dln, g.dup, a.ln2, N, C, I, true);
    }
    ops.normBackward(rec, ops.normName('ln2', l), g.dresid, g.dln, a.resid_mid, a.ln2_mean, a.ln2_rstd, N, true);

    ops.linearBackward(rec, gpt2 ? `${p}.attn.c_proj` : `${p}.self_attn.o_proj`, g.datty, g.dresid, a.atty, N, Hq * D, C);
    attention_backward(rec, {
      dq: g.dq,
      dk: g.dk,
      dv: g.dv,
      dout: g.datty,
      q: a.q,
      k: a.k,
      v: a.v,
      out: a.atty,
      lse: a.lse,
      attentionMask: s.mask,
      B,
      T,
      Hq,
      Hkv,
      D,
      scale: cfg.attn_scale,
    });
    if (gpt2) {
      [g.dq, g.dk, g.dv].forEach((src, i) => column_copy_forward(rec, { dst: g.dqkv, src, rows: N, cols: C, srcLd: C, srcCol: 0, dstLd: 3 * C, dstCol: i * C }));
      ops.linearBackward(rec, `${p}.attn.c_attn`, g.dln, g.dqkv, a.ln1, N, C, 3 * C);
    } else {
      const rope = { positionIds: s.pos, N, D, theta: cfg.rope_theta!, scaling: cfg.rope_scaling };
      rope_backward(rec, { dx: g.dq, H: Hq, dk: g.dk, Hk: Hkv, ...rope });
      let dq = g.dq;
      let dk = g.dk;
      if (cfg.qk_norm) {
        const qn = `${p}.self_attn.q_norm.weight`;
        const kn = `${p}.self_attn.k_norm.weight`;
        rmsnorm_backward(rec, { dinp: g.dq_raw, dweight: ops.g(qn), dout: g.dq, inp: a.q_raw, weight: ops.w(qn), rstd: a.q_rstd, N: N * Hq, C: D, accumulate: true });
        rmsnorm_backward(rec, { dinp: g.dk_raw, dweight: ops.g(kn), dout: g.dk, inp: a.k_raw, weight: ops.w(kn), rstd: a.k_rstd, N: N * Hkv, C: D, accumulate: true });
        dq = g.dq_raw;
        dk = g.dk_raw;
      }
      ops.linearBackward(rec, `${p}.self_attn.q_proj`, g.dln, dq, a.ln1, N, C, Hq * D);
      ops.linearBackward(rec, `${p}.self_attn.k_proj`, g.dln, dk, a.ln1, N, C, Hkv * D, true);
      ops.linearBackward(rec, `${p}.self_attn.v_proj`, g.dln, g.dv, a.ln1, N, C, Hkv * D, true);
    }
    ops.normBackward(rec, ops.normName('ln1', l), g.dresid, g.dln, ws.residIn(l), a.ln1_mean, a.ln1_rstd, N, true);
  }

  const gpt2 = cfg.family === 'gpt2';
  if (ops.adapter) return; // a frozen embedding: nothing below the first layer needs a gradient
  embedding_backward(rec, {
    dwte: ops.g(gpt2 ? 'transformer.wte.weight' : 'model.embed_tokens.weight'),
    dwpe: gpt2 ? ops.g('transformer.wpe.weight') : undefined,
    dout: g.dresid,
    ids: s.ids,
    positionIds: gpt2 ? s.pos : undefined,
    N,
    C,
    V,
    P: gpt2 ? cfg.max_position_embeddings : undefined,
    accumulate: true,
  });
}
