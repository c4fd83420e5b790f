// The mismatch explorer's corrections (src/grpo/mismatch/corrections.ts) against a float64 re-derivation
// written here from the trainers' formulas, on odd-shaped batches with planted sampler–trainer gaps: TRL's
// vLLM IS ratio exp(old − sampling) per token or exp(Σ) per sequence, truncated or masked at [clip_min,
// clip_max] (huggingface/trl grpo_trainer.py); OpenRLHF's tis / icepop / seq-mask-tis on exp(old − rollout)
// (openrlhf/models/loss.py PolicyLoss); verl's truncated IS weights and seq_mean_k1 / seq_mean_k3 rejection
// (verl/trainer/ppo/rollout_corr_helper.py). Checked: masked / truncated counts, wholly masked rows, the
// weights, ESS and mean weight; the trainer's loss with and without the correction at ratio 1 (TRL / OpenRLHF
// token-mean: −Σ A·w·M / Σ M; verl: over the tokens rejection sampling keeps) and the per-token gradient
// factor; a setting the trainer refuses is the effect's error; every control is a row of its trainer's table.
import { describe, expect, it } from 'vitest';
import { CORRECTIONS, correctionEffects, type CorrectionEffect } from '../../src/grpo/mismatch/corrections.ts';
import { rowOf } from '../../src/grpo/settings/effective.ts';
import type { GrpoBatch } from '../../src/io/batch.ts';
import { expectClose } from '../helpers/close.ts';
import { testGpu } from '../helpers/gpu.ts';
import { plantedBatch } from '../helpers/mismatch_fixtures.ts';

/** Planted d = trainer − sampler per token: beyond TRL's 3 and OpenRLHF's [0.5, 5], hidden under the EOS and tool masks, near 0. */
const D = [
  [0.05, -0.9, 1.7, 0.0, 2.0], // position 4 is past EOS (mask 0)
  [0.2, -0.1, 0.4, 1.6, -1.0, 1.5, 0.01], // positions 2, 3 are tool output
  [0.0005, -0.0005, 0.0003], // within verl's geometric ±0.1 %
];
const ADV = [1.2, -0.7, 0.4];

function oddBatch(): GrpoBatch {
  const old = D.map((r, b) => r.map((_, t) => -0.3 - 0.1 * t - 0.05 * b));
  return {
    format: 'grpo-batch/v1',
    num_generations: 3,
    pad_token_id: 0,
    eos_token_ids: [3],
    prompt_ids: [[5, 6], [5, 6], [5, 6]],
    completion_ids: D.map((r, b) => r.map((_, t) => (b === 0 && t === 3 ? 3 : 4 + ((b * 7 + t) % 50)))),
    completion_mask: D.map((r, b) => r.map((_, t) => (b === 0 && t === 4 ? 0 : 1))),
    tool_mask: D.map((r, b) => r.map((_, t) => (b === 1 && (t === 2 || t === 3) ? 0 : 1))),
    advantages: ADV,
    old_per_token_logps: old,
    sampling_per_token_logps: old.map((r, b) => r.map((o, t) => o - D[b][t])),
  };
}

/** The defaults of the correction rows, from the trainers' configs (TRL GRPOConfig, OpenRLHF argparse, verl RolloutCorrectionConfig). */
const DEFAULTS = {
  trl: { vllm_importance_sampling_clip_min: null, vllm_importance_sampling_clip_max: 3 },
  openrlhf: { 'algo.advantage.is_correction_threshold': [0.5, 5.0] },
  verl: { rollout_is_threshold: 2.0 },
};

interface Expected {
  w: number[][]; // per token, NaN off the loss mask
  masked: number;
  truncated: number;
  rowsMasked: number;
}

/** The trainers' formulas, row by row, in float64. `s`: the correction's values (mode, bounds). */
function expected(id: string, batch: GrpoBatch, s: Record<string, unknown>, trainer = batch.old_per_token_logps!): Expected {
  const out: Expected = { w: [], masked: 0, truncated: 0, rowsMasked: 0 };
  batch.completion_ids.forEach((ids, b) => {
    const M = ids.map((_, t) => batch.completion_mask[b][t] * (batch.tool_mask?.[b][t] ?? 1));
    const d = ids.map((_, t) => trainer[b][t] - batch.sampling_per_token_logps![b][t]);
    const loss = M.map((m, t) => (m ? t : -1)).filter((t) => t >= 0);
    const sum = loss.reduce((a, t) => a + d[t], 0);
    const mean = sum / loss.length;
    const w = ids.map(() => NaN);
    const mark = (t: number, weight: number, how: 'masked' | 'truncated' | null) => {
      w[t] = weight;
      if (how) out[how]++;
    };
    const [family, which] = id.split(':');
    for (const t of loss) {
      if (family === 'trl') {
        const [lo, hi] = [(s.vllm_importance_sampling_clip_min as number | null) ?? -Infinity, (s.vllm_importance_sampling_clip_max as number | null) ?? Infinity];
        const r = Math.exp(which.startsWith('sequence') ? sum : d[t]);
        const off = r < lo || r > hi;
        if (which.endsWith('truncate')) mark(t, Math.min(Math.max(r, lo), hi), off ? 'truncated' : null);
        else mark(t, off ? 0 : r, off ? 'masked' : null);
      } else if (family === 'openrlhf') {
        const [lo, hi] = s['algo.advantage.is_correction_threshold'] as number[];
        const e = Math.exp(d[t]);
        const g = which === 'seq-mask-tis' ? Math.exp(mean) : e;
        const off = g < lo || g > hi;
        if (which === 'tis') mark(t, Math.min(Math.max(e, lo), hi), off ? 'truncated' : null);
        else mark(t, off ? 0 : e, off ? 'masked' : null);
      } else if (which === 'token' || which === 'sequence') {
        const clamp20 = (x: number) => Math.min(Math.max(x, -20), 20);
        const r = Math.exp(clamp20(which === 'token' ? d[t] : sum));
        const hi = s.rollout_is_threshold as number;
        mark(t, Math.min(r, hi), r > hi ? 'truncated' : null);
      } else {
        // Rejection sampling: the row's mean of k1 = −d within [log lo, log hi], or of k3 = e^d − 1 − d under the bound.
        const spec = String(s.rollout_rs_threshold);
        const keep = which === 'seq_mean_k1'
          ? mean * -1 >= Math.log(Number(spec.split('_')[0])) && -mean <= Math.log(Number(spec.split('_')[1]))
          : loss.reduce((a, u) => a + Math.exp(d[u]) - 1 - d[u], 0) / loss.length <= Number(spec);
        mark(t, keep ? 1 : 0, keep ? null : 'masked');
      }
    }
    if (loss.length && loss.every((t) => w[t] === 0)) out.rowsMasked++;
    out.w.push(w);
  });
  return out;
}

/** Padded (B, T) view of ragged rows, NaN on padding. */
const padded = (rows: number[][], T: number) => rows.flatMap((r) => [...r, ...new Array<number>(T - r.length).fill(NaN)]);

function checkEffect(e: CorrectionEffect, x: Expected): void {
  expect(e.error, `${e.id}: ${e.error}`).toBeNull();
  expect([e.masked, e.truncated, e.rows_masked], e.id).toEqual([x.masked, x.truncated, x.rowsMasked]);
  const w = x.w.flat().filter((v) => !Number.isNaN(v));
  const n = w.length;
  const sw = w.reduce((a, v) => a + v, 0);
  const sw2 = w.reduce((a, v) => a + v * v, 0);
  expect(e.tokens, e.id).toBe(n);
  // Every weight 0 (every row rejected): no effective sample at all.
  expectClose([e.ess!, e.mean_weight!], [sw2 > 0 ? (sw * sw) / (n * sw2) : 0, sw / n], { rtol: 1e-12, atol: 1e-12, label: `${e.id} ess, mean weight` });
  const want = padded(x.w, e.T);
  expect(Array.from(e.weights!, Number.isNaN), `${e.id} loss tokens`).toEqual(want.map(Number.isNaN));
  expectClose(e.weights!, want, { rtol: 1e-12, atol: 1e-12, mask: want.map((v) => !Number.isNaN(v)), label: `${e.id} weights` });
}

describe('CORRECTIONS', () => {
  it('offers every TRL vLLM IS mode, verl IS levels and RS presets, OpenRLHF correction types; ids unique, controls and settings rows of the trainer', () => {
    const ids = CORRECTIONS.map((c) => c.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining(['trl:token_truncate', 'trl:token_mask', 'trl:sequence_truncate', 'trl:sequence_mask', 'verl:token', 'verl:sequence', 'openrlhf:tis', 'openrlhf:icepop', 'openrlhf:seq-mask-tis']));
    expect(ids.filter((id) => id.startsWith('verl:seq_mean_k'))).toHaveLength(2);
    for (const c of CORRECTIONS) {
      for (const name of [...c.controls, ...Object.keys(c.settings)]) expect(rowOf(c.trainer, 'config', name), `${c.id} ${name}`).toBeDefined();
      expect(c.source, c.id).toMatch(/^(huggingface\/trl|volcengine\/verl|OpenRLHF\/OpenRLHF) \S+\.py/);
    }
  });
});

describe('correctionEffects', () => {
  it('odd batch: counts, weights, ESS and mean weight of every correction equal the trainers’ formulas in float64', async () => {
    const gpu = await testGpu();
    const batch = oddBatch();
    const effects = await correctionEffects(gpu, batch, batch.old_per_token_logps!, CORRECTIONS.map((c) => ({ id: c.id })));
    expect(effects.map((e) => e.id)).toEqual(CORRECTIONS.map((c) => c.id));
    for (const e of effects) {
      // The correction's own values, and the trainer's defaults for the bounds it leaves.
      const own = CORRECTIONS.find((c) => c.id === e.id)!.settings;
      expect(e.settings, e.id).toMatchObject({ ...Object.fromEntries(Object.entries(DEFAULTS[e.trainer]).filter(([k]) => k in e.settings)), ...own });
      checkEffect(e, expected(e.id, batch, e.settings));
    }
    // The planted gaps reach each kind of decision (else the comparison above proves little).
    const by = Object.fromEntries(effects.map((e) => [e.id, e]));
    expect(by['trl:token_truncate'].truncated).toBe(2); // 1.7 and 1.5 (1.6 and 2.0 are under the tool and EOS masks)
    expect(by['openrlhf:icepop'].masked).toBe(3); // e^-0.9, e^1.7, e^-1.0 outside [0.5, 5]
    expect(by['verl:seq_mean_k3:0.01'].rows_masked).toBe(2);
    // verl's rules need a micro-batch size a TRL batch does not carry: the rule's offer, named.
    expect(by['verl:token'].assumed).toEqual({ ppo_micro_batch_size_per_gpu: 256 });
    expect(by['trl:token_truncate'].assumed).toBeNull();
  });

  it('planted batches (top_p, stale, divergence): the same agreement on every correction', async () => {
    const gpu = await testGpu();
    for (const pattern of ['top_p', 'stale', 'divergence'] as const) {
      const { batch } = plantedBatch(pattern, { B: 4, C: 13, seed: 3 });
      const effects = await correctionEffects(gpu, batch, batch.old_per_token_logps!, CORRECTIONS.map((c) => ({ id: c.id })));
      for (const e of effects) checkEffect(e, expected(e.id, batch, e.settings));
      expect(effects.some((e) => (e.masked ?? 0) + (e.truncated ?? 0) > 0), pattern).toBe(true);
    }
  });

  it('edits: a tighter TRL sequence bound masks a whole row; a bound from the edits is in `settings`', async () => {
    const gpu = await testGpu();
    const batch = oddBatch();
    const [e] = await correctionEffects(gpu, batch, batch.old_per_token_logps!, [{ id: 'trl:sequence_mask', edits: { vllm_importance_sampling_clip_max: 2 } }]);
    expect(e.settings.vllm_importance_sampling_clip_max).toBe(2);
    const x = expected(e.id, batch, e.settings);
    expect(x.rowsMasked).toBe(1); // row 0: exp(0.85) > 2
    checkEffect(e, x);
  });

  it('loss and gradient: TRL and OpenRLHF −Σ A·w·M / Σ M at ratio 1 (on − off too), dlogp factor = w; verl averages over the kept tokens', async () => {
    const gpu = await testGpu();
    const batch = oddBatch();
    const ids = ['trl:token_truncate', 'trl:sequence_truncate', 'openrlhf:icepop', 'openrlhf:seq-mask-tis', 'verl:seq_mean_k3:0.01'];
    const effects = await correctionEffects(gpu, batch, batch.old_per_token_logps!, ids.map((id) => ({ id })));
    for (const e of effects) {
      expect(e.error, `${e.id}: ${e.error}`).toBeNull();
      const x = expected(e.id, batch, e.settings);
      const tok = x.w.flatMap((r, b) => r.map((w, t) => ({ b, t, w }))).filter((v) => !Number.isNaN(v.w));
      const n = tok.length;
      const off = -tok.reduce((a, v) => a + ADV[v.b], 0) / n;
      let on: number;
      let dOn: (v: { b: number; w: number }) => number;
      if (e.trainer === 'verl') {
        // Rejection sampling leaves the response mask: the token mean runs over the kept tokens only.
        const kept = tok.filter((v) => v.w !== 0);
        on = -kept.reduce((a, v) => a + ADV[v.b], 0) / kept.length;
        dOn = (v) => (v.w ? -ADV[v.b] / kept.length : 0);
      } else {
        on = -tok.reduce((a, v) => a + ADV[v.b] * v.w, 0) / n;
        dOn = (v) => (-ADV[v.b] * v.w) / n;
      }
      expectClose([e.loss_off!, e.loss_on!], [off, on], { rtol: 1e-4, atol: 1e-6, label: `${e.id} loss off, on` });
      expectClose([e.loss_on! - e.loss_off!], [on - off], { rtol: 1e-4, atol: 2e-6, label: `${e.id} loss on − off` });
      expect(Math.abs(on - off), `${e.id} moves the loss`).toBeGreaterThan(1e-3);
      const change = tok.map((v) => Math.abs(dOn(v) - -ADV[v.b] / n));
      expectClose([e.gradient!.mean_abs, e.gradient!.max_abs], [change.reduce((a, c) => a + c, 0) / n, Math.max(...change)], { rtol: 1e-4, atol: 1e-6, label: `${e.id} |Δ dlogp|` });
      const factor = padded(x.w.map((r, b) => r.map((w) => (Number.isNaN(w) ? NaN : dOn({ b, w }) / (-ADV[b] / n)))), e.T);
      expectClose(e.gradient_factor!, factor, { rtol: 1e-4, atol: 1e-6, mask: factor.map((v) => !Number.isNaN(v)), label: `${e.id} dlogp factor` });
    }
  });

  it('a setting the trainer refuses is the effect’s error, not a throw; the other variants still run', async () => {
    const gpu = await testGpu();
    const batch = oddBatch();
    const effects = await correctionEffects(gpu, batch, batch.old_per_token_logps!, [
      { id: 'trl:token_mask', edits: { vllm_importance_sampling_clip_min: 3, vllm_importance_sampling_clip_max: 2 } },
      { id: 'openrlhf:tis', edits: { 'algo.advantage.is_correction_threshold': 'wide' } },
      { id: 'verl:seq_mean_k1:0.999_1.001', edits: { rollout_rs: 'seq_mean_k9' } },
      { id: 'trl:token_mask' },
    ]);
    expect(effects[0].error).toMatch(/vllm_importance_sampling_clip_min \(3\) must be less than vllm_importance_sampling_clip_max \(2\)/);
    expect(effects[1].error).toMatch(/config\.algo\.advantage\.is_correction_threshold: expected a list of 2 numbers/);
    expect(effects[2].error).toMatch(/rollout_rs: unknown option seq_mean_k9/);
    for (const e of effects.slice(0, 3)) expect([e.tokens, e.loss_on], e.id).toEqual([null, null]);
    expect(effects[3].error).toBeNull();
    expect(effects[3].loss_on).not.toBeNull();
  });

  it('no advantages: the step’s group advantages of the rewards, (r − mean) / (std + 1e-4) with the unbiased std (TRL)', async () => {
    const gpu = await testGpu();
    const batch = oddBatch();
    delete batch.advantages;
    batch.rewards = [1, 0, 0.5];
    const mean = 0.5;
    const std = Math.sqrt((0.25 + 0.25 + 0) / 2);
    const adv = batch.rewards.map((r) => (r - mean) / (std + 1e-4));
    const [e] = await correctionEffects(gpu, batch, batch.old_per_token_logps!, [{ id: 'trl:token_truncate' }]);
    const x = expected(e.id, batch, e.settings);
    const tok = x.w.flatMap((r, b) => r.map((w) => ({ b, w }))).filter((v) => !Number.isNaN(v.w));
    const loss = (f: (w: number) => number) => -tok.reduce((a, v) => a + adv[v.b] * f(v.w), 0) / tok.length;
    expect(e.loss_note).toBeNull();
    expectClose([e.loss_off!, e.loss_on!], [loss(() => 1), loss((w) => w)], { rtol: 1e-4, atol: 1e-6, label: 'loss from rewards' });
  });

  it('no advantages and no rewards: counts, and the loss is null with the reason', async () => {
    const gpu = await testGpu();
    const batch = oddBatch();
    delete batch.advantages;
    const [e] = await correctionEffects(gpu, batch, batch.old_per_token_logps!, [{ id: 'trl:token_truncate' }]);
    expect(e.truncated).toBe(2);
    expect([e.loss_off, e.loss_on]).toEqual([null, null]);
    expect(e.loss_note).toMatch(/neither "advantages" nor "rewards"/);
  });
});
