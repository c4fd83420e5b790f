// Issue 12, the Doctor's trainer rules on crafted batches: which tokens / sequences each trainer's
// importance-sampling correction masks or truncates (TRL vLLM modes, OpenRLHF tis / icepop / seq-mask-tis,
// verl rollout_is / rollout_rs), a dapo batch over several processes without num_items_in_batch, rows no
// reward function scored (and advantage-mismatch following TRL there), and the logged KL against k1/k2/k3;
// the shared IS functions the rule uses against the trainers' own importance_sampling_ratio goldens.
// Every ratio, count and mean is computed here from the batch's numbers, not read from the rule; each rule
// stays silent on a batch where there is nothing to report.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { combineRewards, computeAdvantages, trlAdvantages, withUnscorable } from '../../src/grpo/advantages.ts';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { diagnose, type Finding } from '../../src/doctor/index.ts';
import type { BatchConfig, GrpoBatch } from '../../src/io/batch.ts';
import { importBatch, readAnyBatch } from '../../src/io/formats/index.ts';
import { parseSafeTensors, toF64, writeSafeTensors } from '../../src/io/safetensors.ts';
import { readdirSync } from 'node:fs';
import { readTrainerCase } from '../../src/cli/trainer_case.ts';
import { openrlhfIs, trlVllmIs } from '../../src/grpo/is_correction.ts';
import { parseTrlConfig } from '../../src/grpo/settings/trl.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { expectClose } from '../helpers/close.ts';

const ofRule = (b: GrpoBatch, rule: string): Finding[] => diagnose(b).findings.filter((f) => f.rule === rule);
const skipped = (b: GrpoBatch, rule: string) => diagnose(b).skipped.find((s) => s.rule === rule)?.reason;
/** A ratio as the messages print it (4 significant digits). */
const p4 = (x: number) => Number(x.toPrecision(4)).toString();

/** Four rows in two groups; per-token log-probs given as old and old − diff (so exp(diff) is the token IS ratio). */
function batch(diff: number[][], config: BatchConfig, extra: Partial<GrpoBatch> = {}): GrpoBatch {
  const old = diff.map((r, b) => r.map((_, t) => -0.5 - 0.25 * ((b + t) % 3)));
  return {
    format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
    prompt_ids: diff.map(() => [5, 6]),
    completion_ids: diff.map((r) => r.map((_, t) => (t === r.length - 1 ? 1 : 10 + t))),
    completion_mask: diff.map((r) => r.map(() => 1)),
    old_per_token_logps: old,
    sampling_per_token_logps: old.map((r, b) => r.map((o, t) => o - diff[b][t])),
    config,
    ...extra,
  };
}

const IS = 'importance-sampling-correction';
const DIFF = [
  [0.1, 0.9, -0.05, 0.2], // token 1: exp(0.9) = 2.46
  [-0.8, 0.1, 0.0], // token 0: exp(−0.8) = 0.449
  [0.3, 0.3, 0.3, 0.3, 0.3], // Σ = 1.5, mean 0.3
  [0.05, -0.05], // inside everywhere
];

describe('importance-sampling-correction', () => {
  it('TRL token_mask: each token outside [min, max] is masked, with its own ratio', () => {
    const fs = ofRule(batch(DIFF, { use_vllm: true, vllm_importance_sampling_mode: 'token_mask', vllm_importance_sampling_clip_min: 0.5, vllm_importance_sampling_clip_max: 2 }), IS);
    expect(fs.map((f) => [f.sample, f.span, f.severity])).toEqual([[0, [1, 2], 'warning'], [1, [0, 1], 'warning']]);
    expect(fs[0].message).toContain(`1 of 4 loss tokens masked (weight 0)`);
    expect(fs[0].message).toContain(`worst ${p4(Math.exp(0.9))} at position 1 (> vllm_importance_sampling_clip_max = 2)`);
    expect(fs[1].message).toContain(`worst ${p4(Math.exp(-0.8))} at position 0 (< vllm_importance_sampling_clip_min = 0.5)`);
  });

  it('TRL token_mask on random rows: each sample with a token outside the bounds is reported with its count and first run', () => {
    const diffRow = fc.array(fc.integer({ min: -12, max: 12 }).map((x) => x / 10), { minLength: 1, maxLength: 9 });
    fc.assert(fc.property(fc.array(diffRow, { minLength: 4, maxLength: 4 }), (rows) => {
      const fs = ofRule(batch(rows, { use_vllm: true, vllm_importance_sampling_mode: 'token_mask', vllm_importance_sampling_clip_min: 0.5, vllm_importance_sampling_clip_max: 2 }), IS);
      const out = rows.map((r) => r.flatMap((d, t) => (Math.exp(d) < 0.5 || Math.exp(d) > 2 ? [t] : [])));
      expect(fs.map((f) => f.sample)).toEqual(out.flatMap((o, b) => (o.length ? [b] : [])));
      for (const f of fs) {
        const o = out[f.sample!];
        let end = o[0] + 1;
        while (o.includes(end)) end++;
        expect(f.span).toEqual([o[0], end]);
        expect(f.message).toContain(`${o.length} of ${rows[f.sample!].length} loss tokens masked`);
      }
    }), { numRuns: 300 });
  });

  it('TRL sequence_truncate: the sequence ratio is exp(Σ (old − sampling)), a sum over the mask', () => {
    const fs = ofRule(batch(DIFF, { use_vllm: true, vllm_importance_sampling_mode: 'sequence_truncate', vllm_importance_sampling_clip_max: 3 }), IS);
    // Row sums: 1.15 (3.16 > 3), −0.7, 1.5 (4.48 > 3), 0.
    expect(fs.map((f) => [f.sample, f.span, f.severity])).toEqual([[0, [0, 4], 'info'], [2, [0, 5], 'info']]);
    expect(fs[0].message).toContain(`sequence IS ratio ${p4(Math.exp(0.1 + 0.9 - 0.05 + 0.2))} > vllm_importance_sampling_clip_max = 3: all 4 loss tokens truncated to 3`);
    expect(fs[1].message).toContain(`sequence IS ratio ${p4(Math.exp(1.5))}`);
  });

  it('TRL: tool-output tokens are outside the loss mask; the deprecated cap overrides clip_max; off without use_vllm', () => {
    const tool = DIFF.map((r, b) => r.map((_, t) => (b === 0 && t === 1 ? 0 : 1)));
    const cfg: BatchConfig = { use_vllm: true, vllm_importance_sampling_mode: 'token_truncate', vllm_importance_sampling_clip_max: 10, vllm_importance_sampling_cap: 1.2 };
    const fs = ofRule(batch(DIFF, cfg, { tool_mask: tool }), IS);
    // cap 1.2: exp(0.2) = 1.22 at sample 0 position 3 (position 1 is a tool token), exp(0.3) at every token of sample 2.
    expect(fs.map((f) => [f.sample, f.span])).toEqual([[0, [3, 4]], [2, [0, 5]]]);
    expect(fs[0].message).toContain(`1 of 3 loss tokens truncated`);
    expect(fs[1].message).toContain(`5 of 5 loss tokens truncated`);
    expect(ofRule(batch(DIFF, { ...cfg, use_vllm: false }), IS)).toEqual([]);
    const vespo = ofRule(batch(DIFF, { ...cfg, vllm_importance_sampling_mode: 'token_mask', vllm_importance_sampling_cap: 2, loss_type: 'vespo' }), IS);
    expect(vespo.map((f) => [f.sample, f.severity])).toEqual([[0, 'info']]); // exp(0.9) > 2; no lower bound
    expect(vespo[0].message).toMatch(/vespo folds this ratio into φ/);
    expect(ofRule(batch(DIFF, { ...cfg, vllm_importance_sampling_correction: false }), IS)).toEqual([]);
  });

  it('OpenRLHF icepop, seq-mask-tis (exp of the masked mean) and tis', () => {
    const cfg = (type: string): BatchConfig => ({ 'algo.advantage.is_correction_enable': true, 'algo.advantage.is_correction_type': type, 'algo.advantage.is_correction_threshold': [0.5, 1.3] });
    const orl = { trainer: 'openrlhf' as const };
    const icepop = ofRule(batch(DIFF, cfg('icepop'), orl), IS);
    expect(icepop.map((f) => [f.sample, f.span, f.severity])).toEqual([[0, [1, 2], 'warning'], [1, [0, 1], 'warning'], [2, [0, 5], 'warning']]);
    expect(icepop[2].message).toContain(`5 of 5 loss tokens masked`);
    const seq = ofRule(batch(DIFF, cfg('seq-mask-tis'), orl), IS);
    // Row means: 0.2875 (1.333 > 1.3), −0.233, 0.3 (1.35 > 1.3), 0.
    expect(seq.map((f) => f.sample)).toEqual([0, 2]);
    expect(seq[0].message).toContain(`sequence IS ratio ${p4(Math.exp((0.1 + 0.9 - 0.05 + 0.2) / 4))} > is_correction_threshold[1] = 1.3: all 4 loss tokens masked`);
    const tis = ofRule(batch(DIFF, cfg('tis'), orl), IS);
    expect(tis.map((f) => [f.sample, f.severity])).toEqual([[0, 'info'], [1, 'info'], [2, 'info']]);
    expect(ofRule(batch(DIFF, { ...cfg('icepop'), 'actor.policy_loss_type': 'gspo' }, orl), IS)).toEqual([]);
    expect(ofRule(batch(DIFF, { ...cfg('icepop'), 'algo.advantage.is_correction_enable': false }, orl), IS)).toEqual([]);
    // The same config in a batch stepped as TRL's (no trainer field): the Doctor judges it as the step does, as TRL's.
    expect(ofRule(batch(DIFF, cfg('icepop')), IS)).toEqual([]);
  });

  it('verl: rollout_is weights truncated at the threshold, rollout_rs rejections', () => {
    const verl: BatchConfig = { advantage_estimator: 'verl', rollout_is: 'token', rollout_is_threshold: 2 };
    const v = { trainer: 'verl' as const };
    const fs = ofRule(batch(DIFF, verl, v), IS);
    expect(fs.map((f) => [f.sample, f.span, f.severity])).toEqual([[0, [1, 2], 'info']]);
    expect(fs[0].message).toContain(`worst ${p4(Math.exp(0.9))} at position 1 (> rollout_is_threshold = 2)`);
    // token_k1 with bounds [0.5, 2]: log-ratios outside [log 0.5, log 2] leave the mask.
    const rs = ofRule(batch(DIFF, { ...verl, rollout_is: null, rollout_rs: 'token_k1', rollout_rs_threshold: '0.5_2' }, v), IS);
    expect(rs.map((f) => [f.sample, f.span, f.severity])).toEqual([[0, [1, 2], 'warning'], [1, [0, 1], 'warning']]);
    expect(rs[1].message).toContain(`1 of 3 loss tokens rejected by rollout_rs = token_k1 (threshold 0.5_2); largest token ratio exp(old − rollout) ${p4(Math.exp(-0.8))} at position 0`);
    expect(skipped(batch(DIFF, { ...verl, bypass_mode: true }, v), IS)).toMatch(/bypass_mode/);
  });

  it('silent when every ratio is inside the bounds; a bad setting is named, not guessed', () => {
    const small = DIFF.map((r) => r.map((x) => x / 100));
    for (const [config, trainer] of [
      [{ use_vllm: true, vllm_importance_sampling_mode: 'token_mask', vllm_importance_sampling_clip_min: 0.5 }, undefined],
      [{ use_vllm: true }, undefined], // TRL defaults: sequence_mask, clip_max 3
      [{ rollout_is: 'sequence' }, 'verl'], // threshold 2
      [{ 'algo.advantage.is_correction_enable': true }, 'openrlhf'],
    ] as [BatchConfig, GrpoBatch['trainer']][]) {
      expect(ofRule(batch(small, config, { trainer }), IS), JSON.stringify(config)).toEqual([]);
      expect(skipped(batch(small, config, { trainer }), IS)).toBeUndefined();
    }
    expect(skipped(batch(DIFF, { use_vllm: true, vllm_importance_sampling_mode: 'both' }), IS)).toMatch(/config\.vllm_importance_sampling_mode: expected one of/);
    const noSampling = batch(DIFF, { use_vllm: true });
    delete noSampling.sampling_per_token_logps;
    expect(skipped(noSampling, IS)).toMatch(/sampling_per_token_logps/);
  });
});

describe('the shared IS functions give the trainers’ own ratios (tests/golden/trainers)', () => {
  /** Every golden loss case of `trainer` whose config turns the correction on, with its expected ratio. */
  const cases = (trainer: string, on: (cfg: Record<string, unknown>) => boolean) =>
    readdirSync(path.join(GOLDEN_ROOT, 'trainers', trainer)).filter((f) => f.endsWith('.safetensors')).flatMap((f) => {
      const st = parseSafeTensors(new Uint8Array(readFileSync(path.join(GOLDEN_ROOT, 'trainers', trainer, f))), f);
      if (st.metadata.kind !== 'loss' || !st.tensors.has('importance_sampling_ratio')) return [];
      const c = readTrainerCase(st, f);
      return on(c.config) ? [{ f, c, expected: toF64(st, 'importance_sampling_ratio'), logps: toF64(st, 'per_token_logps') }] : [];
    });

  it('TRL vLLM modes (every case with the correction on)', () => {
    const found = cases('trl', (cfg) => cfg.use_vllm === true && cfg.vllm_importance_sampling_correction !== false);
    expect(found.length).toBeGreaterThanOrEqual(5); // all four modes
    for (const { f, c, expected, logps } of found) {
      const cfg = parseTrlConfig(c.config).values;
      const mask = Float64Array.from(c.completion_mask, (m, i) => m * (c.tool_mask ? c.tool_mask[i] : 1));
      const old = c.old_per_token_logps ?? logps; // TRL: absent old = per_token_logps.detach()
      const r = trlVllmIs(old, c.sampling_per_token_logps!, mask, c.B, c.T, cfg.vllm_importance_sampling_mode, cfg.vllm_importance_sampling_clip_min, cfg.vllm_importance_sampling_clip_max);
      expectClose(r.factor, expected, { rtol: 1e-4, atol: 1e-5, mask: c.completion_mask, label: `${f} importance_sampling_ratio` });
    }
  });

  it('OpenRLHF tis / icepop / seq-mask-tis', () => {
    const found = cases('openrlhf', (cfg) => cfg['algo.advantage.is_correction_enable'] === true && cfg['actor.policy_loss_type'] !== 'gspo');
    expect(found.length).toBeGreaterThanOrEqual(3); // one case per type
    for (const { f, c, expected } of found) {
      const type = (c.config['algo.advantage.is_correction_type'] ?? 'tis') as 'tis' | 'icepop' | 'seq-mask-tis';
      const [lo, hi] = (c.config['algo.advantage.is_correction_threshold'] ?? [0.5, 5]) as [number, number];
      const r = openrlhfIs(c.old_per_token_logps!, c.sampling_per_token_logps!, c.completion_mask, c.B, c.T, type, [lo, hi]);
      expectClose(r.factor, expected, { rtol: 1e-4, atol: 1e-5, mask: c.completion_mask, label: `${f} importance_sampling_ratio (${type})` });
    }
  });
});

describe('num-items-in-batch', () => {
  const R = 'num-items-in-batch';
  const rows = [[1, 1, 1], [1, 1], [1, 1, 1, 1], [1, 1]];
  const b = (config: BatchConfig, extra: Partial<GrpoBatch> = {}) => ({ ...batch(rows.map((r) => r.map(() => 0)), config), ...extra });

  it('one rank of a dapo run without num_items_in_batch: error; TRL’s default loss_type is dapo', () => {
    for (const config of [{ loss_type: 'dapo', num_processes: 4, rank: 2 }, { num_processes: 4, rank: 2 }] as BatchConfig[]) {
      const fs = ofRule(b(config), R);
      expect(fs.map((f) => [f.severity, f.field])).toEqual([['error', 'num_items_in_batch']]);
      expect(fs[0].message).toMatch(/dapo over 4 processes divides by num_items_in_batch \/ 4.* one rank \(11 loss-mask tokens\)/);
    }
    // run overrides config; tool tokens are not counted.
    const tool = rows.map((r, i) => r.map((_, t) => (i === 2 && t < 2 ? 0 : 1)));
    const fs = ofRule(b({ loss_type: 'dapo' }, { run: { num_processes: 2 }, tool_mask: tool }), R);
    expect(fs[0].message).toMatch(/one rank \(9 loss-mask tokens\)/);
  });

  it('every rank present: info with the rebuilt normaliser; silent when given, on one process, or per micro-batch losses', () => {
    const fs = ofRule(b({ loss_type: 'dapo', num_processes: 2, rank: [0, 1] }), R);
    expect(fs.map((f) => f.severity)).toEqual(['info']);
    expect(fs[0].message).toContain(`Σ completion_mask × tool_mask = 11, so TRL divides by 11 / 2 = ${11 / 2}`);
    expect(ofRule(b({ loss_type: 'dapo', num_processes: 2, rank: 0 }, { run: { num_items_in_batch: 30 } }), R)).toEqual([]);
    expect(ofRule(b({ loss_type: 'dapo', num_processes: 2, rank: 0, num_items_in_batch: 30 }), R)).toEqual([]);
    expect(ofRule(b({ loss_type: 'dapo', num_processes: 1 }), R)).toEqual([]);
    expect(ofRule(b({ loss_type: 'grpo', num_processes: 4, rank: 1 }), R)).toEqual([]);
    expect(ofRule(b({ advantage_estimator: 'verl', num_processes: 4 }, { trainer: 'verl' }), R)).toEqual([]);
  });
});

describe('TRL import carries what the rules read', () => {
  const file = (name: string) => ({ name, bytes: new Uint8Array(readFileSync(path.resolve(import.meta.dirname, '..', 'fixtures/formats', name))) });
  it('num_items_in_batch (gathered over both ranks) reaches run: one rank’s file is reproducible', () => {
    const both = importBatch([file('trl-rank0.safetensors'), file('trl-rank1.safetensors')]).batch;
    let items = 0;
    both.completion_mask.forEach((r, b) => r.forEach((m, t) => (items += m * (both.tool_mask?.[b][t] ?? 1))));
    const one = readAnyBatch(file('trl-rank0.safetensors').bytes, 'trl-rank0.safetensors').batch;
    expect(one.run?.num_items_in_batch).toBe(items);
    expect(one.config).toMatchObject({ loss_type: 'dapo', num_processes: 2, rank: 0 });
    expect(ofRule(one, 'num-items-in-batch')).toEqual([]);
    delete one.run;
    expect(ofRule(one, 'num-items-in-batch').map((f) => f.severity)).toEqual(['error']);
  });
});

describe('unscorable-rewards and advantage-mismatch', () => {
  const rpf = [[1, 0], [NaN, NaN], [0, 1], [0.5, NaN], [0, 0], [1, 1]];
  /** TRL by hand: group 0 keeps one scored row (nanstd NaN → 0); groups 1 and 2 as usual, ε = 1e-4. */
  const trlAdv = () => {
    const r = [1, NaN, 1, 0.5, 0, 2];
    const A = [0, 0, 0, 0, 0, 0];
    for (const [i, j] of [[2, 3], [4, 5]]) {
      const mean = (r[i] + r[j]) / 2;
      const std = Math.sqrt((r[i] - mean) ** 2 + (r[j] - mean) ** 2); // Bessel over two
      [A[i], A[j]] = [(r[i] - mean) / (std + 1e-4), (r[j] - mean) / (std + 1e-4)];
    }
    return A;
  };
  const b = (advantages: number[], extra: Partial<GrpoBatch> = {}): GrpoBatch => ({
    format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
    prompt_ids: rpf.map(() => [5]), completion_ids: rpf.map(() => [7, 1]), completion_mask: rpf.map(() => [1, 1]),
    rewards_per_func: rpf, advantages, ...extra,
  });

  it('names the None rows and the group left without two scored samples', () => {
    const fs = ofRule(b(trlAdv()), 'unscorable-rewards');
    expect(fs.map((f) => [f.severity, f.sample])).toEqual([['warning', 1]]);
    expect(fs[0].message).toMatch(/for 1 sample\(s\) \(1\).*group\(s\) 0 keep fewer than 2 scored samples/);
    const two = b(trlAdv(), { num_generations: 3 }); // groups {0,1,2} and {3,4,5}: both keep two scored rows
    expect(ofRule(two, 'unscorable-rewards').map((f) => f.severity)).toEqual(['info']);
    expect(ofRule(b(trlAdv(), { rewards_per_func: rpf.map((r) => r.map((x) => (Number.isNaN(x) ? 0 : x))) }), 'unscorable-rewards')).toEqual([]);
  });

  it('the studio’s advantages with unscorable rows marked equal TRL’s advantage block (trlAdvantages, golden-checked)', () => {
    const cell = fc.oneof(fc.constant(NaN), fc.integer({ min: -4, max: 4 }).map((x) => x / 2));
    const G = 3;
    fc.assert(fc.property(fc.array(fc.array(cell, { minLength: 2, maxLength: 2 }), { minLength: G, maxLength: 4 * G }).filter((r) => r.length % G === 0), fc.constantFrom('group', 'batch', 'none' as const), (rows, scale) => {
      const w = [1, 0.5];
      const ours = computeAdvantages(withUnscorable(combineRewards(rows, w), rows), { num_generations: G, scale_rewards: scale }).advantages;
      const trl = trlAdvantages(rows.flat(), rows.length, 2, { num_generations: G, scale_rewards: scale, multi_objective_aggregation: 'sum_then_normalize', reward_weights: w });
      ours.forEach((a, i) => expect(a).toBeCloseTo(trl[i], 6));
    }), { numRuns: 500 });
  });

  it('TRL’s advantages (None row out of the statistics, advantage 0) are not a mismatch; counting it as reward 0 is', () => {
    const report = diagnose(b(trlAdv(), { rewards: [1, NaN, 1, 0.5, 0, 2] }));
    expect(report.findings.filter((f) => f.severity === 'error')).toEqual([]);
    expect(report.findings.filter((f) => f.rule === 'nonfinite' && f.severity !== 'info')).toEqual([]);
    // The studio's old reading: reward 0 for sample 1, so group 0 = [1, 0] gets ±0.7071.
    const a0 = 0.5 / (Math.sqrt(0.5) + 1e-4);
    const asZero = [a0, -a0, ...trlAdv().slice(2)];
    const fs = ofRule(b(asZero), 'advantage-mismatch');
    expect(fs.map((f) => [f.sample, f.field])).toEqual([[0, 'advantages']]);
    expect(fs[0].message).toMatch(/but the rewards give 0 /);
  });
});

describe('logged-kl', () => {
  const R = 'logged-kl';
  const old = [[-1, -0.5, -2], [-0.25, -1.5], [-0.75, -1.25, -0.5, -3], [-0.5, -1]];
  const ref = [[-1.25, -0.25, -2.5], [-0.75, -1], [-0.5, -1.75, -0.25, -2.5], [-0.25, -1.5]];
  const k = { k1: (d: number) => d, k2: (d: number) => (d * d) / 2, k3: (d: number) => Math.exp(-d) - 1 + d };
  /** Means of estimator e over rows (skipping masked tokens): per token, and per row then over rows. */
  const mean = (e: keyof typeof k, mask = old.map((r) => r.map(() => 1))) => {
    let [tok, n, seq, rows] = [0, 0, 0, 0];
    old.forEach((r, b) => {
      const v = r.flatMap((o, t) => (mask[b][t] ? [k[e](o - ref[b][t])] : []));
      if (!v.length) return;
      tok += v.reduce((a, x) => a + x, 0);
      n += v.length;
      seq += v.reduce((a, x) => a + x, 0) / v.length;
      rows++;
    });
    return { token: tok / n, sequence: seq / rows };
  };
  const b = (metrics: Record<string, number> | undefined, extra: Partial<GrpoBatch> = {}): GrpoBatch => ({
    format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [1],
    prompt_ids: old.map(() => [5]), completion_ids: old.map((r) => r.map((_, t) => (t === r.length - 1 ? 1 : 9))), completion_mask: old.map((r) => r.map(() => 1)),
    old_per_token_logps: old, ref_per_token_logps: ref, metrics, ...extra,
  });

  it('names the estimator and average that reproduce the logged value', () => {
    const trl = ofRule(b({ kl: Math.fround(mean('k3').token) }), R); // logged as float32
    expect(trl.map((f) => [f.severity, f.field])).toEqual([['info', 'metrics.kl']]);
    expect(trl[0].message).toMatch(/is k3 token mean/);
    const openrlhf = ofRule(b({ kl: mean('k1').sequence }), R);
    expect(openrlhf[0].message).toMatch(/is k1 sequence mean/);
    const verl = ofRule(b({ 'actor/kl_loss': mean('k2').token }), R);
    expect(verl.map((f) => f.field)).toEqual(['metrics.actor/kl_loss']);
    expect(verl[0].message).toMatch(/is k2 token mean/);
  });

  it('warns when no estimator matches, and leaves tool tokens out', () => {
    const fs = ofRule(b({ kl: 0.5 }), R);
    expect(fs.map((f) => f.severity)).toEqual(['warning']);
    expect(fs[0].message).toContain(`k3 token mean ${Number(mean('k3').token.toPrecision(5))}`);
    const tool = old.map((r, i) => r.map((_, t) => (i === 2 && t === 3 ? 0 : 1)));
    const withTool = mean('k3', tool).token;
    expect(Math.abs(withTool - mean('k3').token)).toBeGreaterThan(1e-3);
    expect(ofRule(b({ kl: withTool }, { tool_mask: tool }), R)[0].message).toMatch(/is k3 token mean/);
    expect(ofRule(b({ kl: withTool }), R)[0].severity).toBe('warning');
  });

  it('a verl dump’s metadata "metrics" reaches the rule through the importer', () => {
    // Two rows of old / ref log-probs (response_mask all 1), logged actor/kl_loss = the k3 token mean.
    const o = [-1, -0.5, -2, -0.25];
    const r = [-1.25, -0.25, -2.5, -0.75];
    const k3 = o.reduce((a, x, i) => a + k.k3(x - r[i]), 0) / 4;
    const st = writeSafeTensors({
      prompts: { dtype: 'I32', shape: [2, 1], data: new Int32Array([5, 5]) },
      responses: { dtype: 'I32', shape: [2, 2], data: new Int32Array([7, 1, 8, 1]) },
      response_mask: { dtype: 'I32', shape: [2, 2], data: new Int32Array([1, 1, 1, 1]) },
      old_log_probs: { dtype: 'F32', shape: [2, 2], data: new Float32Array(o) },
      ref_log_prob: { dtype: 'F32', shape: [2, 2], data: new Float32Array(r) },
    }, { uid: '["a", "a"]', pad_token_id: '0', eos_token_id: '1', metrics: JSON.stringify({ 'actor/kl_loss': k3, 'actor/pg_loss': 0.1 }) });
    const { batch, unknownKeys } = readAnyBatch(st, 'v.safetensors');
    expect(unknownKeys).toEqual([]);
    expect(batch.metrics).toEqual({ 'actor/kl_loss': k3, 'actor/pg_loss': 0.1 });
    expect(ofRule(batch, R)[0].message).toMatch(/^logged actor\/kl_loss = .* is k3 token mean/);
  });

  it('skips without a logged KL or reference log-probs', () => {
    expect(skipped(b(undefined), R)).toMatch(/no logged KL/);
    expect(skipped(b({ kl: 0.1 }, { ref_per_token_logps: undefined }), R)).toMatch(/ref_per_token_logps/);
    expect(diagnose(b({ kl: 0.1 })).findings.filter((f) => f.rule === 'schema')).toEqual([]);
  });
});

describe('advantage-mismatch judges only the estimators the studio recomputes (rewardAdvantageGap)', () => {
  // Two groups of 4: rewards [1, 0, 0, 0] and [1, 1, 0, 1].
  const rewards = [1, 0, 0, 0, 1, 1, 0, 1];
  const base = (config: BatchConfig, advantages: number[]): GrpoBatch => ({
    format: 'grpo-batch/v1', num_generations: 4, pad_token_id: 0, eos_token_ids: [2], trainer: 'openrlhf', config,
    prompt_ids: rewards.map(() => [5, 6]), completion_ids: rewards.map(() => [7, 2]), completion_mask: rewards.map(() => [1, 1]), rewards, advantages,
  });
  const finding = (b: GrpoBatch) => diagnose(b).findings.filter((f) => f.rule === 'advantage-mismatch');
  const skipped = (b: GrpoBatch) => diagnose(b).skipped.find((s) => s.rule === 'advantage-mismatch')?.reason;

  it("OpenRLHF rloo (r − mean of the others): not judged, the reason names the estimator (it was a false error)", () => {
    const rloo = rewards.map((r, i) => {
      const g = rewards.slice(Math.floor(i / 4) * 4, Math.floor(i / 4) * 4 + 4);
      return r - (g.reduce((a, x) => a + x, 0) - r) / 3;
    });
    expect(rloo.slice(0, 4)).toEqual([1, -1 / 3, -1 / 3, -1 / 3]);
    const b = base({ 'algo.advantage.estimator': 'rloo' }, rloo);
    expect(finding(b)).toEqual([]);
    expect(skipped(b)).toMatch(/^OpenRLHF algo\.advantage\.estimator = "rloo" is not a group-normalised estimator/);
    // No estimator in the config: OpenRLHF's default (gae) is not judged either, and the reason says it was assumed.
    expect(skipped(base({}, rloo))).toMatch(/"gae" \(its default: the batch does not say\)/);
  });

  it('OpenRLHF group_norm: (r − mean) / (std + 1e-9) is judged, and a wrong value is an error naming ε', () => {
    const std = (g: number[]) => { const m = g.reduce((a, x) => a + x, 0) / g.length; return Math.sqrt(g.reduce((a, x) => a + (x - m) ** 2, 0) / (g.length - 1)); };
    const gn = rewards.map((r, i) => { const g = rewards.slice(Math.floor(i / 4) * 4, Math.floor(i / 4) * 4 + 4); return (r - g.reduce((a, x) => a + x, 0) / 4) / (std(g) + 1e-9); });
    const cfg: BatchConfig = { 'algo.advantage.estimator': 'group_norm', 'algo.kl.use_loss': true, advantage_estimator: 'openrlhf', scale_rewards: 'group' };
    expect(finding(base(cfg, gn))).toEqual([]);
    const wrong = [...gn];
    wrong[5] += 0.5;
    const f = finding(base(cfg, wrong));
    expect(f.map((x) => [x.severity, x.sample])).toEqual([['error', 5]]);
    expect(f[0].message).toMatch(/OpenRLHF ε = 1e-9/);
  });

  it("OpenRLHF dr_grpo past ±10: the trainer's clamped advantages are right (a false error before), unclamped ones are wrong", () => {
    // rewards ×100: r − mean = [75, −25, −25, −25] and [25, 25, −75, 25]; OpenRLHF clamps to reward.clip_range [−10, 10].
    const big = rewards.map((r) => 100 * r);
    const dr = big.map((r, i) => r - big.slice(Math.floor(i / 4) * 4, Math.floor(i / 4) * 4 + 4).reduce((a, x) => a + x, 0) / 4);
    expect(dr).toEqual([75, -25, -25, -25, 25, 25, -75, 25]);
    const cfg: BatchConfig = { 'algo.advantage.estimator': 'dr_grpo', 'algo.kl.use_loss': true, advantage_estimator: 'openrlhf', scale_rewards: 'none' };
    const at = (config: BatchConfig, advantages: number[]) => finding({ ...base(config, advantages), rewards: big });
    expect(at(cfg, dr.map((a) => Math.min(Math.max(a, -10), 10)))).toEqual([]);
    const f = at(cfg, dr);
    expect(f.length).toBe(2);
    expect(f[0].message).toMatch(/clamped to \[-10, 10\] \(reward\.clip_range\)/);
    // A run with a wider range: its config says so, and the unclamped values are then right.
    expect(at({ ...cfg, 'reward.clip_range': [-100, 100] }, dr)).toEqual([]);
  });

  it('OpenRLHF with the KL in the reward (no algo.kl.use_loss, init_coef > 0): not judged, the reason names both settings', () => {
    const b = base({ 'algo.advantage.estimator': 'group_norm', advantage_estimator: 'openrlhf', scale_rewards: 'group' }, rewards.map(() => 0));
    expect(finding(b)).toEqual([]);
    expect(skipped(b)).toMatch(/algo\.kl\.use_loss = false and algo\.kl\.init_coef = 0\.01 > 0 \(the KL penalty is in the reward\)/);
  });

  it('verl: adv_estimator grpo is judged, another (or none given: gae) is not', () => {
    const verl = (config: BatchConfig): GrpoBatch => ({ ...base(config, rewards.map(() => 0)), trainer: 'verl' });
    expect(skipped(verl({ adv_estimator: 'rloo', advantage_estimator: 'verl' }))).toMatch(/^verl adv_estimator = "rloo"/);
    expect(finding(verl({ adv_estimator: 'grpo', advantage_estimator: 'verl' })).length).toBeGreaterThan(0); // zeros are wrong for these rewards
  });
});

describe('TRL: reward_weights from the config, normalize_then_sum not judged', () => {
  const rpf = [[1, 0], [0, 10], [1, 1], [0, 0]];
  const base = (config: BatchConfig, extra: Partial<GrpoBatch> = {}): GrpoBatch => ({
    format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 0, eos_token_ids: [2], config,
    prompt_ids: rpf.map(() => [5, 6]), completion_ids: rpf.map(() => [7, 2]), completion_mask: rpf.map(() => [1, 1]), rewards_per_func: rpf, ...extra,
  });
  it('config.reward_weights weigh rewards_per_func when the batch has no reward_weights of its own (no false rewards error)', () => {
    const weights = [2, 0.5];
    const rewards = combineRewards(rpf, weights);
    expect(Array.from(rewards)).toEqual([2, 5, 2.5, 0]);
    const f = (b: GrpoBatch) => diagnose(b).findings.filter((x) => x.rule === 'advantage-mismatch' && x.field === 'rewards');
    expect(f(base({ reward_weights: weights }, { rewards: Array.from(rewards) }))).toEqual([]);
    expect(f(base({}, { rewards: Array.from(rewards) })).length).toBe(1); // weights 1: Σ = 1 ≠ 2 for sample 0
  });
  it('normalize_then_sum: the advantages are not judged against the sum-then-normalise formula (a false error before)', () => {
    const b = base({ multi_objective_aggregation: 'normalize_then_sum' }, { advantages: [-1e-4, 1e-4, 0, 0] });
    expect(diagnose(b).findings.filter((x) => x.rule === 'advantage-mismatch')).toEqual([]);
    expect(diagnose(b).skipped.find((s) => s.rule === 'advantage-mismatch')?.reason).toMatch(/normalize_then_sum/);
  });
});
