// shaders/trl_loss_{forward,backward}.wgsl against their float64 twin (src/oracle/trl_loss.ts), and the twin's
// gradient against central differences of its own loss. Covers setting combinations the goldens do not
// (every loss type at both IS levels, vLLM modes × loss types, entropy bonus with dapo's global divisor, δ,
// bias-corrected KL, off-policy and entropy masks together), odd shapes and extreme values.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { testGpu } from '../helpers/gpu.ts';
import { closeReport, expectClose } from '../helpers/close.ts';
import { centralDiff } from '../helpers/fd.ts';
import { TRL_ROW_STATS, trl_loss_backward as gpuBackward, trl_loss_forward as gpuForward, trl_loss_value } from '../../src/kernels/trl_loss.ts';
import type { TrlLossParams } from '../../src/kernels/types.ts';
import { trl_loss_backward, trl_loss_forward, type TrlLossInputs } from '../../src/oracle/trl_loss.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../src/oracle/logprob_gather.ts';

function params(B: number, T: number, o: Partial<TrlLossParams>): TrlLossParams {
  return {
    B, T, loss_type: 'grpo', importance_sampling_level: 'token', beta: 0, use_bias_correction_kl: false, epsilon_low: 0.2, epsilon_high: 0.28,
    delta: null, vllm_is_mode: 'off', vllm_is_min: null, vllm_is_max: null, off_policy_mask_threshold: null, entropy_threshold: null,
    sapo_temperature_pos: 1, sapo_temperature_neg: 1.05, vespo_k_pos: 2, vespo_lambda_pos: 3, vespo_k_neg: 3, vespo_lambda_neg: 2,
    max_completion_length: T + 3, gradient_accumulation_steps: 2, num_items_in_batch: 3 * B * T, num_processes: 2, ranks: 1, entropy_coef: 0, ...o,
  };
}

/** Setting combinations, each checked by finite differences and GPU vs twin. */
const VARIANTS: Array<[string, Partial<TrlLossParams>]> = [
  ['grpo token, β + bias-corrected KL, δ', { beta: 0.05, use_bias_correction_kl: true, delta: 1.2 }],
  ['bnpo sequence, β, entropy bonus', { loss_type: 'bnpo', importance_sampling_level: 'sequence', beta: 0.04, entropy_coef: 0.03 }],
  ['dr_grpo token, vLLM token_truncate', { loss_type: 'dr_grpo', vllm_is_mode: 'token_truncate', vllm_is_min: 0.8, vllm_is_max: 1.25 }],
  ['dapo token, vLLM sequence_mask, entropy bonus + mask', { loss_type: 'dapo', vllm_is_mode: 'sequence_mask', vllm_is_min: 0.5, vllm_is_max: 1.6, entropy_coef: 0.02, entropy_threshold: 1.2 }],
  ['cispo sequence, vLLM token_mask, off-policy mask', { loss_type: 'cispo', importance_sampling_level: 'sequence', epsilon_high: 1.1, vllm_is_mode: 'token_mask', vllm_is_min: 0.7, vllm_is_max: 1.4, off_policy_mask_threshold: 0.02 }],
  ['sapo sequence, β, entropy mask', { loss_type: 'sapo', importance_sampling_level: 'sequence', beta: 0.02, entropy_threshold: 1.0 }],
  ['sapo token, vLLM sequence_truncate', { loss_type: 'sapo', vllm_is_mode: 'sequence_truncate', vllm_is_max: 1.3 }],
  ['luspo token, β (mean over B·T)', { loss_type: 'luspo', beta: 0.03 }],
  ['luspo sequence, vLLM sequence_truncate', { loss_type: 'luspo', importance_sampling_level: 'sequence', vllm_is_mode: 'sequence_truncate', vllm_is_min: 0.9, vllm_is_max: 1.2 }],
  ['vespo token, vLLM token_truncate, entropy bonus', { loss_type: 'vespo', vllm_is_mode: 'token_truncate', vllm_is_min: 0.8, vllm_is_max: 1.5, entropy_coef: 0.01 }],
  ['vespo sequence level, vLLM sequence_mask', { loss_type: 'vespo', importance_sampling_level: 'sequence', vllm_is_mode: 'sequence_mask', vllm_is_max: 2 }],
];

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A micro-batch of logits plus old / ref / sampling log-probs near the policy's, some masked tokens, mixed-sign A. */
function batch(B: number, T: number, V: number, seed: number) {
  const r = rng(seed);
  const g = (s: number) => (r() + r() + r() - 1.5) * s;
  const N = B * T;
  const logits = Float64Array.from({ length: N * V }, () => g(3));
  const ids = Int32Array.from({ length: N }, () => Math.floor(r() * V));
  const mask = Float64Array.from({ length: N }, (_, i) => (i % T === T - 1 && i % 3 === 0 ? 0 : r() < 0.85 ? 1 : 0));
  const lp = logprob_gather_forward(logits, ids, null, N, V, 1).logp;
  return {
    logits, ids, mask,
    old: Float64Array.from(lp, (x) => x + g(0.3)),
    ref: Float64Array.from(lp, (x) => x + g(0.5)),
    sampling: Float64Array.from(lp, (x) => x + g(0.3)),
    advantages: Float64Array.from({ length: B }, (_, b) => (b % 2 ? 1 : -1) * (0.2 + r())),
  };
}

describe('trl_loss twin: gradient by central differences', () => {
  const [B, T, V] = [3, 5, 7];
  for (const [name, o] of VARIANTS) {
    it(name, () => {
      const d = batch(B, T, V, name.length * 7919);
      const p = params(B, T, o);
      const N = B * T;
      const inputs = (logits: Float64Array): TrlLossInputs & { lse: Float64Array } => {
        const gf = logprob_gather_forward(logits, d.ids, null, N, V, 1);
        return { logp: gf.logp, entropy: gf.entropy, lse: gf.lse, old: d.old, ref: d.ref, sampling: d.sampling, advantages: d.advantages, mask: d.mask };
      };
      const x = inputs(d.logits);
      const f = trl_loss_forward(x, p);
      const b = trl_loss_backward(x, f, p);
      const dlogits = logprob_gather_backward(d.logits, d.ids, new Int32Array(N).fill(1), x.lse, b.dlogp, N, V, 1, b.dentropy && { dentropy: b.dentropy, entropy: x.entropy });
      // cispo's clamped ratio and vespo's φ are detached in TRL: held at their base values while differencing.
      const loss = () => trl_loss_forward(inputs(d.logits), p, { ratio: f.ratio, phi: f.phi }).loss;
      const fd = Float64Array.from(dlogits, (_, i) => centralDiff(loss, d.logits, i, 1e-6));
      expect(dlogits.some((v) => v !== 0)).toBe(true);
      expectClose(dlogits, fd, { rtol: 1e-5, atol: 1e-8, label: `${name} dlogits` });
    });
  }
});

/** Distance of every decision quantity from its threshold (relative), so a float32 run takes the twin's branches. */
function margin(x: TrlLossInputs, f: ReturnType<typeof trl_loss_forward>, p: TrlLossParams): number {
  const rel = (a: number, b: number) => Math.abs(a - b) / Math.max(1, Math.abs(b));
  let m = Infinity;
  const bounds = [1 - p.epsilon_low, 1 + p.epsilon_high, ...(p.delta !== null ? [p.delta] : [])];
  for (let i = 0; i < p.B * p.T; i++) {
    for (const c of bounds) m = Math.min(m, rel(f.ratio[i], c));
    if (p.entropy_threshold !== null && x.mask[i]) m = Math.min(m, rel(x.entropy[i], p.entropy_threshold));
    const lr = x.logp[i] - (x.old ?? x.logp)[i];
    if (p.loss_type === 'vespo') m = Math.min(m, rel(Math.abs(lr), 20));
  }
  if (p.vllm_is_mode !== 'off') {
    const seq = p.vllm_is_mode.startsWith('sequence');
    for (let b = 0; b < p.B; b++) {
      let s = 0;
      for (let t = 0; t < p.T; t++) s += ((x.old ?? x.logp)[b * p.T + t] - x.sampling![b * p.T + t]) * x.mask[b * p.T + t];
      for (let t = 0; t < p.T; t++) {
        const i = b * p.T + t;
        const r = Math.exp(seq ? s : ((x.old ?? x.logp)[i] - x.sampling![i]) * x.mask[i]);
        for (const c of [p.vllm_is_min, p.vllm_is_max]) if (c !== null) m = Math.min(m, rel(r, c));
      }
    }
  }
  if (p.off_policy_mask_threshold !== null) {
    for (let b = 0; b < p.B; b++) {
      let s = 0;
      let n = 0;
      for (let t = 0; t < p.T; t++) (s += (x.sampling![b * p.T + t] - x.logp[b * p.T + t]) * x.mask[b * p.T + t]), (n += x.mask[b * p.T + t]);
      m = Math.min(m, rel(s / Math.max(1, n), p.off_policy_mask_threshold));
    }
  }
  return m;
}

async function gpuRun(x: TrlLossInputs & { hasOld: boolean }, p: TrlLossParams) {
  const gpu = await testGpu();
  const N = p.B * p.T;
  const aux = new Float32Array(4 * N);
  for (let i = 0; i < N; i++) aux.set([x.old?.[i] ?? 0, x.ref?.[i] ?? 0, x.sampling?.[i] ?? 0, x.mask[i]], 4 * i);
  const bufs = {
    logp: gpu.upload('logp', Float32Array.from(x.logp)),
    entropy: gpu.upload('entropy', Float32Array.from(x.entropy)),
    aux: gpu.upload('aux', aux),
    advantages: gpu.upload('advantages', Float32Array.from(x.advantages)),
    tok: gpu.createBuffer('tok', 16 * N),
    rows: gpu.createBuffer('rows', 4 * TRL_ROW_STATS * p.B),
    dlogp: gpu.createBuffer('dlogp', 4 * N),
    dentropy: gpu.createBuffer('dentropy', 4 * N),
    totals: gpu.createBuffer('totals', 8 * p.ranks),
    hasOld: x.hasOld,
    hasSampling: !!x.sampling,
  };
  const rec = gpu.recorder('trl_loss_test');
  gpuForward(rec, bufs, p);
  gpuBackward(rec, bufs, p);
  await rec.submit();
  const [tok, rows, dlogp, dentropy] = await Promise.all([gpu.readF32(bufs.tok, 4 * N), gpu.readF32(bufs.rows, TRL_ROW_STATS * p.B), gpu.readF32(bufs.dlogp, N), gpu.readF32(bufs.dentropy, N)]);
  for (const b of Object.values(bufs)) if (typeof b === 'object') b.destroy();
  return { tok, rows, dlogp, dentropy };
}

const col = (tok: Float32Array, j: number) => Float32Array.from({ length: tok.length / 4 }, (_, i) => tok[4 * i + j]);
const scaleOf = (a: ArrayLike<number>) => Array.from(a).reduce((m, v) => Math.max(m, Math.abs(v)), 0);

/**
 * One batch of B = Br·ranks rows through the GPU kernels and the twin, compared; false where a token sits within the
 * kernels' float32 reach of a clip or mask boundary (the twin's branch could differ: margin), so nothing is compared.
 */
async function againstTwin(name: string, o: Partial<TrlLossParams>, Br: number, ranks: number, T: number, seed: number, spread: number, aScale: number, hasOld: boolean): Promise<boolean> {
  const B = Br * ranks;
  const r = rng(seed);
  const g = (s: number) => (r() + r() + r() - 1.5) * s;
  const N = B * T;
  const logp = Float64Array.from({ length: N }, () => (r() < 0.1 ? -60 - 30 * r() : -r() * 6));
  const x: TrlLossInputs & { hasOld: boolean } = {
    logp: Float64Array.from(logp, (v) => Math.fround(v)),
    entropy: Float64Array.from({ length: N }, () => Math.fround(r() * 3)),
    old: hasOld ? Float64Array.from(logp, (v) => Math.fround(v + g(spread))) : null,
    ref: Float64Array.from(logp, (v) => Math.fround(v + g(2 * spread))),
    sampling: Float64Array.from(logp, (v) => Math.fround(v + g(spread))),
    advantages: Float64Array.from({ length: B }, () => Math.fround(g(aScale))),
    mask: Float64Array.from({ length: N }, () => (r() < 0.8 ? 1 : 0)),
    hasOld,
  };
  const p = params(B, T, { ...o, num_items_in_batch: N + 5, ranks, num_processes: Math.max(2, ranks) });
  const f = trl_loss_forward(x, p);
  if (!(margin(x, f, p) > 1e-3)) return false;
  const b = trl_loss_backward(x, f, p);
  const out = await gpuRun(x, p);
  const close = (label: string, a: ArrayLike<number>, e: ArrayLike<number>, mask?: ArrayLike<number>) => {
    const atol = 1e-5 * Math.max(1, scaleOf(e));
    const rep = closeReport(a, e, { rtol: 2e-4, atol, mask });
    if (rep.worst > 1) expectClose(a, e, { rtol: 2e-4, atol, mask, label: `${name} B=${B} (${ranks} ranks) T=${T} seed=${seed} ${label}` });
  };
  close('per_token_loss', col(out.tok, 0), f.per_token_loss);
  if (f.per_token_kl) close('per_token_kl', col(out.tok, 1), f.per_token_kl);
  if (f.importance_sampling_ratio) close('importance_sampling_ratio', col(out.tok, 2), f.importance_sampling_ratio);
  if (f.entropy_mask) expect(Array.from(col(out.tok, 3))).toEqual(Array.from(f.entropy_mask));
  if (f.off_policy_mask) expect(Array.from({ length: B }, (_, k) => out.rows[k * TRL_ROW_STATS + 5])).toEqual(Array.from({ length: B }, (_, k) => f.off_policy_mask![k * T]));
  close('loss', [trl_loss_value(out.rows, p)], [f.loss]);
  close('dlogp', out.dlogp, b.dlogp);
  close('dentropy', out.dentropy, b.dentropy ?? new Float64Array(N));
  return true;
}

describe('trl_loss kernels: GPU vs float64 twin', () => {
  for (const [name, o] of VARIANTS) {
    it(`${name}: odd shapes, extreme values`, async () => {
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 5 }), // rows per process
          fc.constantFrom(1, 1, 2, 3), // processes whose rows the batch holds (merged rank files)
          fc.integer({ min: 1, max: 37 }),
          fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          fc.constantFrom(0.05, 0.4, 3), // log-ratio spread: near on-policy … far off-policy
          fc.constantFrom(1, 1e3), // advantage scale
          fc.boolean(), // old_per_token_logps given
          async (Br, ranks, T, seed, spread, aScale, hasOld) => {
            const compared = await againstTwin(name, o, Br, ranks, T, seed, spread, aScale, hasOld);
            fc.pre(compared);
            runs++;
          },
        ),
        { numRuns: 6, seed: 12345 },
      );
      expect(runs).toBeGreaterThan(0);
    }, 120_000);
  }

  // A process's totals (bnpo's N, the entropy bonus's Σ M') are one workgroup's strided sum over its rows
  // (shaders/trl_loss_totals.wgsl): more rows than its 256 threads, an odd count, one process and three.
  for (const [Br, ranks] of [[701, 1], [333, 3]]) {
    it(`bnpo with an entropy bonus over ${Br} rows per process × ${ranks}: the totals past one workgroup's threads`, async () => {
      const bnpo = VARIANTS.find(([n]) => n.startsWith('bnpo'))!;
      let compared = false;
      for (let seed = 1; !compared && seed < 40; seed++) compared = await againstTwin(bnpo[0], bnpo[1], Br, ranks, 2, seed, 0.05, 1, true);
      expect(compared).toBe(true);
    }, 120_000);
  }
});

describe('trl_loss twin over several processes\' rows (merged rank files)', () => {
  // DDP: each process aggregates its own micro-batch and the gradients are averaged, so the merged batch's loss
  // is the mean of each rank's loss on its rows alone, and each row's gradient is its rank's ÷ ranks.
  const [Br, T, V] = [3, 6, 7];
  for (const [name, o] of VARIANTS) {
    for (const ranks of [2, 3]) {
      it(`${name}: ${ranks} ranks = the mean of each rank alone`, () => {
        const B = Br * ranks;
        const d = batch(B, T, V, name.length * 104729 + ranks);
        const gf = logprob_gather_forward(d.logits, d.ids, null, B * T, V, 1);
        const slice = (a: ArrayLike<number> | null, k: number, w: number) => (a ? Float64Array.from({ length: Br * w }, (_, i) => a[k * Br * w + i]) : null);
        const inputs = (k: number | null): TrlLossInputs => {
          const rows = (a: ArrayLike<number>, w = T) => (k === null ? a : slice(a, k, w)!);
          return { logp: rows(gf.logp), entropy: rows(gf.entropy), old: rows(d.old), ref: rows(d.ref), sampling: rows(d.sampling), advantages: rows(d.advantages, 1), mask: rows(d.mask) };
        };
        const common = { ...o, num_processes: 4, num_items_in_batch: 53 };
        const all = trl_loss_forward(inputs(null), params(B, T, { ...common, ranks }));
        const dAll = trl_loss_backward(inputs(null), all, params(B, T, { ...common, ranks }));
        let mean = 0;
        for (let k = 0; k < ranks; k++) {
          const p1 = params(Br, T, { ...common, ranks: 1 });
          const f = trl_loss_forward(inputs(k), p1);
          mean += f.loss / ranks;
          const g = trl_loss_backward(inputs(k), f, p1);
          expectClose(slice(dAll.dlogp, k, T)!, g.dlogp.map((v) => v / ranks), { rtol: 1e-12, atol: 1e-15, label: `${name} rank ${k} dlogp` });
          if (g.dentropy) expectClose(slice(dAll.dentropy, k, T)!, g.dentropy.map((v) => v / ranks), { rtol: 1e-12, atol: 1e-15, label: `${name} rank ${k} dentropy` });
        }
        expect(all.loss).toBeCloseTo(mean, 12);
      });
    }
  }
});
