// verl's and OpenRLHF's settings tables and the objectives' refusals: an unknown or invalid config field, a
// setting the trainer itself rejects or cannot reproduce, and a missing input are SettingsErrors naming the
// field — never a silently different number. The docs list every setting of both tables.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readTrainerCase, TRAINER_GOLDEN } from '../helpers/trainer_case.ts';
import { twinBackend } from '../helpers/ppo_twin.ts';
import { expectClose } from '../helpers/close.ts';
import { verlObjective } from '../../src/grpo/trainers/verl.ts';
import { openrlhfObjective } from '../../src/grpo/trainers/openrlhf.ts';
import { resolveSettings } from '../../src/grpo/settings/resolve.ts';
import { VERL_RUN, VERL_SETTINGS } from '../../src/grpo/settings/verl.ts';
import { OPENRLHF_RUN, OPENRLHF_SETTINGS } from '../../src/grpo/settings/openrlhf.ts';
import { SettingsError } from '../../src/grpo/settings/types.ts';
import type { TrainerLossCase } from '../../src/grpo/trainers/types.ts';

const verlCase = (n: string) => readTrainerCase(path.join(TRAINER_GOLDEN, 'verl', `case_${n}.safetensors`)).c;
const orlCase = (n: string) => readTrainerCase(path.join(TRAINER_GOLDEN, 'openrlhf', `case_${n}.safetensors`)).c;
const withConfig = (c: TrainerLossCase, patch: Record<string, unknown>): TrainerLossCase => ({ ...c, config: { ...c.config, ...patch } });

async function rejects(p: Promise<unknown>, field: RegExp): Promise<void> {
  const e = await p.then(() => null, (x: unknown) => x);
  expect(e, 'expected a SettingsError').toBeInstanceOf(SettingsError);
  expect((e as Error).message).toMatch(field);
}

describe('settings tables', () => {
  it('fill defaults and check types, ranges and allowed values, naming the field', () => {
    const v = resolveSettings(VERL_SETTINGS, { loss_mode: 'gspo' }, 'config');
    expect(v.loss_mode).toBe('gspo');
    expect(v.clip_ratio_c).toBe(3);
    expect(v.rollout_is).toBe(null); // verl/trainer/config/algorithm/rollout_correction.yaml (the dataclass's "sequence" is not what the driver reads)
    expect(() => resolveSettings(VERL_SETTINGS, { clip_ratio_c: 1 }, 'config')).toThrow(/config\.clip_ratio_c: 1 is out of range/);
    expect(() => resolveSettings(VERL_SETTINGS, { loss_agg_mode: 'mean' }, 'config')).toThrow(/config\.loss_agg_mode: expected one of/);
    expect(() => resolveSettings(VERL_SETTINGS, { clip_ratio: '0.2' }, 'config')).toThrow(/config\.clip_ratio: expected a finite number/);
    expect(() => resolveSettings(VERL_SETTINGS, { clip_ratio_hi: 0.3 }, 'config')).toThrow(/config\.clip_ratio_hi: not a verl setting/);
    expect(() => resolveSettings(OPENRLHF_RUN, { num_processes: 1.5 }, 'run')).toThrow(/run\.num_processes: expected an integer/);
    expect(() => resolveSettings(OPENRLHF_SETTINGS, { 'actor.dual_clip': null }, 'config')).not.toThrow();
  });

  it('are listed, every field, in docs/trainers', () => {
    for (const [doc, tables] of [['verl.md', [VERL_SETTINGS, VERL_RUN]], ['openrlhf.md', [OPENRLHF_SETTINGS, OPENRLHF_RUN]]] as const) {
      const text = readFileSync(path.resolve(__dirname, '..', '..', 'docs', 'trainers', doc), 'utf8');
      for (const t of tables) for (const s of t) expect(text, `${doc} lists ${s.name}`).toContain(`\`${s.name}\``);
    }
  });
});

describe('verl objective refusals', () => {
  it('rejects the "+" KL types verl itself raises on', async () => {
    await rejects(verlObjective(twinBackend(verlCase('00')), withConfig(verlCase('00'), { kl_loss_type: 'k3+' }), { backward: false }), /config\.kl_loss_type/);
  });
  it('refuses a clip_cov draw verl makes with torch.randperm', async () => {
    // case 08 has 5 candidates for 6 slots; a ratio of 0.05 leaves 1 slot for them.
    await rejects(verlObjective(twinBackend(verlCase('08')), withConfig(verlCase('08'), { clip_cov_ratio: 0.05 }), { backward: false }), /config\.clip_cov_ratio: 5 clip_cov candidates for 1 slots/);
  });
  it('needs the inputs its settings read', async () => {
    const c = verlCase('00');
    await rejects(verlObjective(twinBackend(c), { ...c, ref_per_token_logps: null }, { backward: false }), /ref_per_token_logps: required \(use_kl_loss\)/);
    await rejects(verlObjective(twinBackend(c), withConfig(c, { bypass_mode: true }), { backward: false }), /sampling_per_token_logps .*bypass_mode/);
  });
  it('rejects an invalid rejection-sampling option naming it', async () => {
    const c = verlCase('05');
    await rejects(verlObjective(twinBackend(c), withConfig(c, { rollout_rs: 'token_k4' }), { backward: false }), /config\.rollout_rs: unknown option token_k4/);
    await rejects(verlObjective(twinBackend(c), withConfig(c, { rollout_rs_threshold: '0.6_1.6,2' }), { backward: false }), /config\.rollout_rs_threshold/);
  });
});

describe('OpenRLHF objective refusals', () => {
  it('refuses entropy_coef ≠ 0 with temperature ≠ 1 (OpenRLHF fails in backward)', async () => {
    const c = withConfig(orlCase('02'), { 'rollout.temperature': 0.9 });
    await rejects(openrlhfObjective(twinBackend(c), c, { backward: false }), /config\.actor\.entropy_coef/);
  });
  it('checks eps_clip_low_high and loss_batch_info', async () => {
    const c = orlCase('00');
    await rejects(openrlhfObjective(twinBackend(c), withConfig(c, { 'actor.eps_clip_low_high': [0.2] }), { backward: false }), /config\.actor\.eps_clip_low_high: expected a list of 2 numbers or null, got \[0\.2\]$/);
    await rejects(openrlhfObjective(twinBackend(c), { ...c, run: { ...c.run, loss_batch_info: { dp_size: 1, batch_num_tokens: 0, global_batch_size: 4 } } }, { backward: false }), /run\.loss_batch_info\.batch_num_tokens/);
  });
  it('derives loss_batch_info from the window as _optimizer_step_loss_norm does', async () => {
    // case 01: 2 ranks × 2 accumulation steps; its stored loss_batch_info is (20 + 58) / 2 tokens, (4 + 12) / 2 samples.
    const c = orlCase('01');
    const given = await openrlhfObjective(twinBackend(c), c, { backward: false });
    const { loss_batch_info: _, ...window } = c.run;
    const derived = await openrlhfObjective(twinBackend(c), { ...c, run: window }, { backward: false });
    expect(derived.loss).toBeCloseTo(given.loss, 12);
    expect(c.run.loss_batch_info).toEqual({ batch_num_tokens: 39, dp_size: 2, global_batch_size: 8 });
  });
});

describe('verl rollout correction defaults (the trainer config, not the dataclass)', () => {
  it('a config without rollout_is applies no IS weights to a batch with rollout log-probs; a golden case reads the dataclass default', async () => {
    const { c } = readTrainerCase(path.join(TRAINER_GOLDEN, 'verl/case_07.safetensors')); // rollout_is sequence, batch-normalised
    expect(c.config.rollout_is).toBe('sequence');
    const { rollout_is: _is, rollout_is_batch_normalize: _n, ...rest } = c.config;
    const plain = await verlObjective(twinBackend(c), { ...c, config: rest }, { backward: false });
    const without = await verlObjective(twinBackend(c), { ...c, config: rest, sampling_per_token_logps: null }, { backward: false });
    const weighted = await verlObjective(twinBackend(c), c, { backward: false });
    expect(plain.importance_sampling_ratio).toBeNull();
    expect(plain.loss).toBe(without.loss);
    expect(weighted.importance_sampling_ratio).not.toBeNull();
    expect(Math.abs(weighted.loss - plain.loss)).toBeGreaterThan(1e-6);
    // A case file without rollout_is (case_05: rejection sampling only) is read with RolloutCorrectionConfig's "sequence".
    expect(readTrainerCase(path.join(TRAINER_GOLDEN, 'verl/case_05.safetensors')).c.config.rollout_is).toBe('sequence');
  });
});

describe('verl: the objective is one micro-batch of dp_actor.py update_policy', () => {
  it('with the loss scale derived from the sizes, rows past one mini-batch are refused, naming the size', async () => {
    const { c } = readTrainerCase(path.join(TRAINER_GOLDEN, 'verl/case_07.safetensors'));
    const run = { on_policy: false }; // no micro_batch_loss_scale: an imported batch's case
    const at = (config: Record<string, unknown>) => verlObjective(twinBackend(c), { ...c, config: { ...c.config, ...config }, run }, { backward: false });
    const B = c.B;
    expect(B).toBeGreaterThan(1);
    await expect(at({ ppo_mini_batch_size: B - 1, ppo_micro_batch_size_per_gpu: 1 })).rejects.toThrow(/^config\.ppo_mini_batch_size: \d+ rows per optimizer step/);
    await expect(at({ use_dynamic_bsz: true, ppo_mini_batch_size: B - 1, ppo_micro_batch_size_per_gpu: null })).rejects.toThrow(/^config\.ppo_mini_batch_size/);
    // One micro-batch: the loop's scale 1 / (mini // micro), here 1/2.
    const one = await at({ ppo_mini_batch_size: 2 * B, ppo_micro_batch_size_per_gpu: B });
    const stated = await verlObjective(twinBackend(c), { ...c, config: { ...c.config, ppo_mini_batch_size: 2 * B, ppo_micro_batch_size_per_gpu: B }, run: { ...run, micro_batch_loss_scale: 0.5 } }, { backward: false });
    expect(one.loss).toBe(stated.loss);
    // A case that states its micro-batch's scale is one micro-batch whatever the sizes say.
    await expect(verlObjective(twinBackend(c), { ...c, config: { ...c.config, ppo_mini_batch_size: 2 * B, ppo_micro_batch_size_per_gpu: 1 }, run: { ...run, micro_batch_loss_scale: 0.5 } }, { backward: false })).resolves.toBeDefined();
  });

  it("rows past one micro-batch: verl's loop, each micro-batch of ppo_micro_batch_size_per_gpu rows (in order) aggregated on its own × 1/GA", async () => {
    // The loop's loss and gradient are the sum of its micro-batches', each one as a case stating its scale (the path
    // the golden cases check): dp_actor.py update_policy splits the mini-batch in order and scales each by 1/GA.
    const { c: golden } = readTrainerCase(path.join(TRAINER_GOLDEN, 'verl/case_07.safetensors'));
    // Decoupled IS weights are the trainer's over the whole batch: left out. A reference for the KL term.
    const c = { ...golden, sampling_per_token_logps: null, ref_per_token_logps: Float32Array.from(golden.old_per_token_logps!, (x) => 1.1 * x - 0.05) };
    const { B, T, V } = c;
    const micro = 3; // micro-batches of 3 and 1 rows
    expect(B).toBeGreaterThan(micro);
    const rows = <A extends Float32Array | Int32Array>(a: A, r0: number, r1: number, w: number) => a.slice(r0 * w, r1 * w) as A;
    const slice = (r0: number, r1: number, run: Record<string, unknown>, config: Record<string, unknown>): TrainerLossCase => ({
      ...c, B: r1 - r0, config, run,
      logits: rows(c.logits, r0, r1, T * V), completion_ids: rows(c.completion_ids, r0, r1, T), completion_mask: rows(c.completion_mask, r0, r1, T),
      tool_mask: c.tool_mask && rows(c.tool_mask, r0, r1, T), advantages: rows(c.advantages, r0, r1, T),
      old_per_token_logps: c.old_per_token_logps && rows(c.old_per_token_logps, r0, r1, T), ref_per_token_logps: c.ref_per_token_logps && rows(c.ref_per_token_logps, r0, r1, T), sampling_per_token_logps: null,
    });
    for (const loss_agg_mode of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum', 'seq-mean-token-sum-norm']) {
      for (const loss_mode of ['vanilla', 'geo_mean']) {
        const config = { ...c.config, rollout_is: null, loss_agg_mode, loss_mode, use_kl_loss: loss_mode === 'vanilla', entropy_coeff: 0.01, ppo_mini_batch_size: 6, ppo_micro_batch_size_per_gpu: micro };
        const whole = await verlObjective(twinBackend(slice(0, B, { on_policy: false }, config)), slice(0, B, { on_policy: false }, config), { backward: true });
        let loss = 0;
        for (let r0 = 0; r0 < B; r0 += micro) {
          const part = slice(r0, Math.min(B, r0 + micro), { on_policy: false, micro_batch_loss_scale: 1 / 2 }, config); // GA = 6 // 3
          const p = await verlObjective(twinBackend(part), part, { backward: true });
          loss += p.loss;
          expectClose(whole.dlogits!.slice(r0 * T * V, Math.min(B, r0 + micro) * T * V), p.dlogits!, { rtol: 1e-12, atol: 1e-15, label: `${loss_agg_mode} ${loss_mode} rows ${r0}…` });
        }
        expect(whole.loss, `${loss_agg_mode} ${loss_mode}`).toBeCloseTo(loss, 12);
      }
    }
    // A batch of two mini-batches (rows 0-1, 2-3): run.mini_batch_index k takes update_policy's k-th optimizer step,
    // the mini-batch's rows alone (off-policy: several mini-batches), the other rows weighing nothing.
    const two = { ...c.config, rollout_is: null, loss_agg_mode: 'seq-mean-token-mean', use_kl_loss: true, entropy_coeff: 0.01, ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 1 };
    await expect(verlObjective(twinBackend(c), slice(0, B, {}, two), { backward: false })).rejects.toThrow(/^config\.ppo_mini_batch_size: 2 rows per optimizer step .*set run\.mini_batch_index to 0 \(the batch file's "run", or the page's trainer settings\) to take verl's first/);
    for (const k of [0, 1]) {
      const whole = await verlObjective(twinBackend(c), slice(0, B, { mini_batch_index: k, data_parallel_size: 1 }, two), { backward: true });
      const alone = slice(2 * k, 2 * k + 2, { on_policy: false }, two);
      const a = await verlObjective(twinBackend(alone), alone, { backward: true });
      expect(whole.loss, `mini-batch ${k}`).toBeCloseTo(a.loss, 12);
      const d = whole.dlogits!;
      expectClose(d.slice(2 * k * T * V, (2 * k + 2) * T * V), a.dlogits!, { rtol: 1e-12, atol: 1e-15, label: `mini-batch ${k}` });
      expect(Array.from(d).filter((_, i) => Math.floor(i / (T * V)) < 2 * k || Math.floor(i / (T * V)) >= 2 * k + 2).every((x) => x === 0)).toBe(true);
      expect(Array.from(whole.loss_mask).slice(0, 2 * k * T).every((x) => x === 0)).toBe(true);
    }
    await expect(verlObjective(twinBackend(c), slice(0, B, { mini_batch_index: 2, data_parallel_size: 1 }, two), { backward: false })).rejects.toThrow(/^run\.mini_batch_index: 2, but each rank's 4 rows \(4 over data_parallel_size 1\) hold 2 mini-batch\(es\) of ppo_mini_batch_size 2 \(0 … 1\)$/);
    // Two ranks (DataProto.chunk: rows 0-1 and 2-3), mini-batches of one row: step 0 is each rank's first row, the
    // ranks' losses averaged (FSDP averages their gradients).
    const perRank = { ...two, ppo_mini_batch_size: 1 };
    const both = await verlObjective(twinBackend(c), slice(0, B, { mini_batch_index: 0, data_parallel_size: 2 }, perRank), { backward: true });
    let mean = 0;
    for (const row of [0, 2]) {
      const one = slice(row, row + 1, { on_policy: false }, perRank);
      const o = await verlObjective(twinBackend(one), one, { backward: true });
      mean += o.loss / 2;
      expectClose(both.dlogits!.slice(row * T * V, (row + 1) * T * V), o.dlogits!.map((x) => x / 2), { rtol: 1e-12, atol: 1e-15, label: `rank row ${row}` });
    }
    expect(both.loss).toBeCloseTo(mean, 12);
    await expect(verlObjective(twinBackend(c), slice(0, B, { mini_batch_index: 0, data_parallel_size: 3 }, perRank), { backward: false })).rejects.toThrow(/^run\.data_parallel_size: 3 ranks, but the batch's 4 rows do not chunk evenly/);
    // Not given, the ranks are not assumed (one rank would take the first rows of a multi-GPU dump): named.
    await expect(verlObjective(twinBackend(c), slice(0, B, { mini_batch_index: 0 }, perRank), { backward: false })).rejects.toThrow(/^run\.data_parallel_size: needed with run\.mini_batch_index/);
    // A selection over the micro-batch's tokens (kl_cov) on part of the batch — with dynamic micro-batches too — is refused.
    for (const extra of [{}, { use_dynamic_bsz: true, ppo_micro_batch_size_per_gpu: null }]) {
      const kl = { ...slice(0, B, { mini_batch_index: 0, data_parallel_size: 1 }, { ...two, loss_mode: 'kl_cov', ...extra }), sequence_lengths: new Int32Array(B).fill(T) };
      await expect(verlObjective(twinBackend(kl), kl, { backward: false })).rejects.toThrow(/^run\.mini_batch_index: 0 takes 2 of the batch's 4 rows, and loss_mode kl_cov \(its token selection\) spans each micro-batch's rows/);
    }
    // A selection over one micro-batch's tokens (clip_cov) is not split: refused naming the size.
    const cov = slice(0, B, { on_policy: false }, { ...c.config, rollout_is: null, loss_mode: 'clip_cov', ppo_mini_batch_size: 6, ppo_micro_batch_size_per_gpu: micro });
    await expect(verlObjective(twinBackend(cov), cov, { backward: false })).rejects.toThrow(/^config\.ppo_micro_batch_size_per_gpu: 3 rows per micro-batch, of the batch's 4, and loss_mode clip_cov \(its token selection\) spans/);
  });

  it("use_dynamic_bsz: the rows share micro-batches as verl's own karmarkar_karp packs them, each aggregated alone × its rows / ppo_mini_batch_size", async () => {
    // Expected partitions: verl's seqlen_balancing.py functions run unchanged (scripts/make_verl_dynamic_golden.py).
    // Each micro-batch is then a case stating its scale (the path the golden cases check), its rows gathered.
    const { c: golden } = readTrainerCase(path.join(TRAINER_GOLDEN, 'verl/case_07.safetensors'));
    const c = { ...golden, sampling_per_token_logps: null, ref_per_token_logps: Float32Array.from(golden.old_per_token_logps!, (x) => 1.1 * x - 0.05) };
    const { B, T, V } = c;
    const tokens = (b: number) => Array.from(c.completion_mask.subarray(b * T, (b + 1) * T)).reduce((a, m) => a + m, 0);
    const pick = <A extends Float32Array | Int32Array>(a: A, rows: number[], w: number) => {
      const out = new (a.constructor as { new (n: number): A })(rows.length * w);
      rows.forEach((r, k) => out.set(a.subarray(r * w, (r + 1) * w), k * w));
      return out;
    };
    const part = (rows: number[], run: Record<string, unknown>, config: Record<string, unknown>, lengths: Int32Array | null): TrainerLossCase => ({
      ...c, B: rows.length, config, run, sequence_lengths: lengths && pick(lengths, rows, 1),
      logits: pick(c.logits, rows, T * V), completion_ids: pick(c.completion_ids, rows, T), completion_mask: pick(c.completion_mask, rows, T),
      tool_mask: null, advantages: pick(c.advantages, rows, T), old_per_token_logps: pick(c.old_per_token_logps!, rows, T), ref_per_token_logps: pick(c.ref_per_token_logps, rows, T),
    });
    const all = Array.from({ length: B }, (_, b) => b);
    const mini = 6;
    const cases = (JSON.parse(readFileSync(path.join(TRAINER_GOLDEN, 'verl_dynamic.json'), 'utf8')) as { cases: { lengths: number[]; k: number; partitions: number[][] }[] }).cases
      .filter((g) => g.lengths.length === B && g.k >= 2 && g.lengths.every((n, b) => n >= tokens(b)))
      .map((g) => ({ ...g, budget: Math.max(...g.lengths, Math.ceil(g.lengths.reduce((a, n) => a + n, 0) / g.k)) }))
      .filter((g) => Math.min(B, Math.ceil(g.lengths.reduce((a, n) => a + n, 0) / g.budget)) === g.k);
    expect(cases.length).toBeGreaterThanOrEqual(8);
    // Some partitions are not the in-order split mini_batch.split would give.
    expect(cases.some((g) => g.partitions.some((p) => p.some((r, i) => i > 0 && r !== p[i - 1] + 1)))).toBe(true);
    for (const g of cases) {
      const lengths = Int32Array.from(g.lengths);
      for (const loss_agg_mode of ['token-mean', 'seq-mean-token-mean']) {
        const config = { ...c.config, rollout_is: null, loss_agg_mode, use_kl_loss: true, entropy_coeff: 0.01, ppo_mini_batch_size: mini, ppo_micro_batch_size_per_gpu: null, use_dynamic_bsz: true, ppo_max_token_len_per_gpu: g.budget };
        const whole = await verlObjective(twinBackend(c), part(all, { on_policy: false }, config, lengths), { backward: true });
        let loss = 0;
        for (const rows of g.partitions) {
          const one = part(rows, { on_policy: false, micro_batch_loss_scale: rows.length / mini }, config, null);
          const o = await verlObjective(twinBackend(one), one, { backward: true });
          loss += o.loss;
          rows.forEach((r, k) => expectClose(whole.dlogits!.slice(r * T * V, (r + 1) * T * V), o.dlogits!.slice(k * T * V, (k + 1) * T * V), { rtol: 1e-12, atol: 1e-15, label: `${g.lengths} ${loss_agg_mode} row ${r}` }));
        }
        expect(whole.loss, `${g.lengths} budget ${g.budget} ${loss_agg_mode}`).toBeCloseTo(loss, 12);
      }
    }
    // The count is maxed over the ranks (an all_reduce MAX): rank 0's two rows fit one micro-batch, rank 1's need two,
    // so rank 0 packs two as well, one row each (each × 1 / ppo_mini_batch_size 2, the ranks averaged).
    const two = { ...c.config, rollout_is: null, loss_agg_mode: 'seq-mean-token-mean', use_kl_loss: true, entropy_coeff: 0.01, ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: null, use_dynamic_bsz: true, ppo_max_token_len_per_gpu: 20 };
    const lengths = Int32Array.from([8, 9, 18, 17]);
    const ranks = await verlObjective(twinBackend(c), part(all, { mini_batch_index: 0, data_parallel_size: 2, on_policy: false }, two, lengths), { backward: true });
    let mean = 0;
    for (const r of all) {
      const one = part([r], { on_policy: false, micro_batch_loss_scale: 1 / 2 }, two, null);
      const o = await verlObjective(twinBackend(one), one, { backward: true });
      mean += o.loss / 2;
      expectClose(ranks.dlogits!.slice(r * T * V, (r + 1) * T * V), o.dlogits!.map((x) => x / 2), { rtol: 1e-12, atol: 1e-15, label: `rank row ${r}` });
    }
    expect(ranks.loss).toBeCloseTo(mean, 12);
    // Rank 0 alone (one rank of two rows) is one micro-batch: a different loss.
    const first = part([0, 1], { on_policy: false }, two, lengths);
    const alone = await verlObjective(twinBackend(first), first, { backward: false });
    const rank0 = part([0, 1], { on_policy: false, micro_batch_loss_scale: 1 }, two, null);
    expect(alone.loss).toBeCloseTo((await verlObjective(twinBackend(rank0), rank0, { backward: false })).loss, 12);
    // A row longer than the budget (verl asserts the budget covers a sequence), and no lengths at all, are refused.
    await rejects(verlObjective(twinBackend(c), part(all, { on_policy: false }, { ...two, ppo_mini_batch_size: mini }, Int32Array.from([8, 21, 9, 9])), { backward: false }), /^config\.ppo_max_token_len_per_gpu: 20 × ulysses_sequence_parallel_size 1: 20 tokens per dynamic micro-batch, but a row holds 21 \(prompt \+ response\): verl asserts/);
    await rejects(verlObjective(twinBackend(c), part(all, { on_policy: false }, { ...two, ppo_mini_batch_size: mini }, null), { backward: false }), /^sequence_lengths: required with use_dynamic_bsz/);
    // The budget is per sequence-parallel group: 10 × sp 2 packs as 20.
    const sp = await verlObjective(twinBackend(c), part(all, { mini_batch_index: 0, data_parallel_size: 2, on_policy: false }, { ...two, ppo_max_token_len_per_gpu: 10, ulysses_sequence_parallel_size: 2 }, lengths), { backward: false });
    expect(sp.loss).toBe(ranks.loss);
  });

  it('a dump over data_parallel_size > 1 ranks is chunked over them without mini_batch_index: each rank its own loss, the ranks averaged', async () => {
    const { c: golden } = readTrainerCase(path.join(TRAINER_GOLDEN, 'verl/case_07.safetensors'));
    const c = { ...golden, sampling_per_token_logps: null, ref_per_token_logps: Float32Array.from(golden.old_per_token_logps!, (x) => 1.1 * x - 0.05) };
    const { T, V } = c;
    const rows = <A extends Float32Array | Int32Array>(a: A, r0: number, r1: number, w: number) => a.slice(r0 * w, r1 * w) as A;
    const rank = (r0: number, r1: number, run: Record<string, unknown>, config: Record<string, unknown>): TrainerLossCase => ({
      ...c, B: r1 - r0, config, run,
      logits: rows(c.logits, r0, r1, T * V), completion_ids: rows(c.completion_ids, r0, r1, T), completion_mask: rows(c.completion_mask, r0, r1, T),
      tool_mask: null, advantages: rows(c.advantages, r0, r1, T), old_per_token_logps: rows(c.old_per_token_logps!, r0, r1, T), ref_per_token_logps: rows(c.ref_per_token_logps, r0, r1, T),
    });
    const config = { ...c.config, rollout_is: null, loss_agg_mode: 'token-mean', use_kl_loss: true, entropy_coeff: 0.01, ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 2 };
    const both = await verlObjective(twinBackend(c), { ...c, config, run: { data_parallel_size: 2, on_policy: false } }, { backward: true });
    let mean = 0;
    for (const r0 of [0, 2]) {
      const one = rank(r0, r0 + 2, { on_policy: false }, config);
      const o = await verlObjective(twinBackend(one), one, { backward: true });
      mean += o.loss / 2;
      expectClose(both.dlogits!.slice(r0 * T * V, (r0 + 2) * T * V), o.dlogits!.map((x) => x / 2), { rtol: 1e-12, atol: 1e-15, label: `rank rows ${r0}…` });
    }
    expect(both.loss).toBeCloseTo(mean, 12);
    // Pooled as one rank's four rows the token-mean would differ (the ranks hold different token counts).
    const pooled = await verlObjective(twinBackend(c), { ...c, config: { ...config, ppo_mini_batch_size: 4, ppo_micro_batch_size_per_gpu: 4 }, run: { on_policy: false } }, { backward: false });
    expect(pooled.loss).not.toBeCloseTo(both.loss, 6);
    // Each rank's rows past one mini-batch: several optimizer steps, refused unless one is named.
    await rejects(verlObjective(twinBackend(c), { ...c, config: { ...config, ppo_mini_batch_size: 1, ppo_micro_batch_size_per_gpu: 1 }, run: { data_parallel_size: 2 } }, { backward: false }), /^config\.ppo_mini_batch_size: 1 rows per optimizer step .*each rank's 2 rows \(4 over data_parallel_size 2\) hold 2 mini-batches/);
  });

  it('rollout_rs_threshold may be a number (Optional[str | float]), read as its decimal text', () => {
    const v = resolveSettings<Record<string, unknown>>(VERL_SETTINGS, { rollout_rs: 'token_k1', rollout_rs_threshold: 1.6 }, 'config');
    expect(v.rollout_rs_threshold).toBe('1.6');
    expect(() => resolveSettings(VERL_SETTINGS, { rollout_rs_threshold: true }, 'config')).toThrow(/rollout_rs_threshold: expected a string or a number/);
  });
});

describe('verl use_rollout_log_probs', () => {
  it("keeps the stored old_log_probs on-policy: the loss of the off-policy path, not the ratio-1 one", async () => {
    const c = verlCase('02'); // on-policy: one mini-batch, one epoch
    const run = (config: Record<string, unknown>, r: Record<string, unknown>) => verlObjective(twinBackend(c), { ...c, config: { ...c.config, ...config }, run: { ...c.run, ...r } }, { backward: true });
    const onPolicy = await run({}, {});
    const kept = await run({ use_rollout_log_probs: true }, {});
    const offPolicy = await run({}, { on_policy: false });
    expect(kept.loss).toBe(offPolicy.loss);
    expect(Array.from(kept.dlogits!)).toEqual(Array.from(offPolicy.dlogits!));
    expect(kept.loss).not.toBeCloseTo(onPolicy.loss, 6);
    // It wins over a stated run.on_policy too (dp_actor.py tests it first).
    expect((await run({ use_rollout_log_probs: true }, { on_policy: true })).loss).toBe(offPolicy.loss);
  });
});
