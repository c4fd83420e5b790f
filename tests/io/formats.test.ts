// Trainer formats (src/io/formats): each fixture of tests/fixtures/formats (made by
// scripts/make_format_fixtures.py from the trainers' documented shapes) converts to the right
// grpo-batch/v1 — boundaries, masks, groups, advantages — and the Doctor flags its planted bug.
// Expected values are written out by hand from the generator's inputs, never taken from our output.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { diagnose } from '../../src/doctor/index.ts';
import { parseBatch, serializeBatch } from '../../src/io/batch.ts';
import { importBatch, mergeImports, readAnyBatch } from '../../src/io/formats/index.ts';
import { writeSafeTensors } from '../../src/io/safetensors.ts';
import { python } from '../helpers/python.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const dir = path.join(root, 'tests/fixtures/formats');
const bytes = (name: string) => new Uint8Array(readFileSync(path.join(dir, name)));
const load = (name: string, opts = {}) => readAnyBatch(bytes(name), name, opts);
/** A safetensors file with `meta` merged into its __metadata__ (the tensors' bytes untouched). */
function withMetadata(file: Uint8Array, meta: Record<string, string>): Uint8Array {
  const n = Number(new DataView(file.buffer, file.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(file.subarray(8, 8 + n)));
  header.__metadata__ = { ...header.__metadata__, ...meta };
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (new TextEncoder().encode(text).length % 8)) % 8);
  const h = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + h.length + file.length - 8 - n);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8);
  out.set(file.subarray(8 + n), 8 + h.length);
  return out;
}
const rules = (b: Parameters<typeof diagnose>[0]) => diagnose(b).findings.map((f) => `${f.severity}:${f.rule}`);

/** TRL's advantages in float64: (r − group mean) / (Bessel std + 1e-4), groups of G consecutive global rows. */
function trlAdvantages(r: number[], G: number): number[] {
  return r.map((x, i) => {
    const g = r.slice(Math.floor(i / G) * G, Math.floor(i / G) * G + G);
    const mean = g.reduce((a, b) => a + b, 0) / G;
    const std = Math.sqrt(g.reduce((a, b) => a + (b - mean) ** 2, 0) / (G - 1));
    return (x - mean) / (std + 1e-4);
  });
}

describe('TRL dict from two processes', () => {
  const rewards = [1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.0, 0.5, 0.5, 0.5, 0.5];
  it('one rank: its rows of the global batch, partial group labelled, TRL padding kept as written', () => {
    const r0 = load('trl-rank0.safetensors');
    expect(r0.format).toBe('trl');
    expect(r0.unknownKeys).toEqual([]);
    const b = r0.batch;
    expect(b.num_generations).toBe(4);
    expect(b.group_ids).toEqual([0, 0, 0, 0, 1, 1]); // process_slice: rows 0..5 of 12
    expect(load('trl-rank1.safetensors').batch.group_ids).toEqual([1, 1, 2, 2, 2, 2]);
    expect(b.prompt_ids[0]).toEqual([0, 0, 11, 12, 13]);
    expect(b.prompt_mask![0]).toEqual([0, 0, 1, 1, 1]);
    expect(b.completion_ids[4]).toEqual([50, 2, 90, 91, 52, 2]); // the tool suffix starts after the EOS
    expect(b.completion_mask[1]).toEqual([1, 1, 0, 0, 0, 0]);
    expect(b.tool_mask![4]).toEqual([1, 1, 0, 0, 1, 1]);
    expect(b.tool_mask![1]).toEqual([1, 1, 1, 1, 1, 1]); // TRL pads tool_mask with 1
    expect(b.sampling_per_token_logps![1].slice(2)).toEqual([0, 0, 0, 0]); // … and sampling log-probs with 0
    expect(b.rewards).toEqual(rewards.slice(0, 6));
    const want = trlAdvantages(rewards, 4).slice(0, 6);
    b.advantages!.forEach((a, i) => expect(Math.abs(a - want[i])).toBeLessThan(1e-5));
    expect(b.config).toMatchObject({ loss_type: 'dapo', beta: 0.04, scale_rewards: 'group', rank: 0, num_processes: 2, gradient_accumulation_steps: 2 });
    // A 6-row slice with G = 4 is no schema error, and the partial group is not judged.
    const found = rules(b);
    expect(found.filter((f) => f.startsWith('error'))).toEqual([]);
    expect(found).not.toContain('warning:zero-std-group');
    // Sampling log-probs are old + 0.001 on sampled tokens and 0 on the tool output (as TRL writes them):
    // even a tight threshold finds no mismatch, because tool tokens were never sampled.
    expect(diagnose(b, { logprob_threshold: 0.002 }).findings.map((f) => f.rule)).not.toContain('logprob-mismatch');
    expect(diagnose(b, { logprob_threshold: 0.0005 }).findings.map((f) => f.rule)).toContain('logprob-mismatch');
  });

  it('both ranks merged: whole groups, the planted zero-std group 2 is flagged, advantages check out', () => {
    const merged = mergeImports(['trl-rank1.safetensors', 'trl-rank0.safetensors'].map((name) => ({ name, result: load(name) })));
    const b = merged.batch;
    expect(b.group_ids).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]); // sorted by rank
    expect(b.rewards).toEqual(rewards);
    const report = diagnose(b);
    const zero = report.findings.find((f) => f.rule === 'zero-std-group');
    expect(zero?.message).toMatch(/1 of 3 groups .*\(groups 2\)/);
    expect(report.findings.map((f) => f.rule)).not.toContain('advantage-mismatch');
    expect(report.skipped.map((s) => s.rule)).not.toContain('advantage-mismatch');
    expect(report.counts.error).toBe(0);
  });
});

describe('TRL dict: nothing is repaired', () => {
  const trl = (maskCols: number, meta: Record<string, string>) => writeSafeTensors({
    prompt_ids: { dtype: 'I64', shape: [2, 2], data: new BigInt64Array([5n, 6n, 5n, 6n]) },
    completion_ids: { dtype: 'I64', shape: [2, 3], data: new BigInt64Array([7n, 2n, 0n, 8n, 9n, 2n]) },
    completion_mask: { dtype: 'I32', shape: [2, maskCols], data: new Int32Array(2 * maskCols).fill(1) },
  }, meta);
  it('a completion_mask wider than completion_ids stays wider and the Doctor reports it', () => {
    const { batch } = readAnyBatch(trl(5, { config: '{"num_generations": 2}', pad_token_id: '0', eos_token_id: '2' }), 'm.safetensors');
    expect(batch.completion_mask[0]).toEqual([1, 1, 1, 1, 1]);
    const f = diagnose(batch).findings.filter((x) => x.rule === 'mask-length-mismatch');
    expect(f.map((x) => x.message)).toEqual(['sample 0: completion_mask has 5 entries, completion_ids has 3 (2 extra)', 'sample 1: completion_mask has 5 entries, completion_ids has 3 (2 extra)']);
  });
  it('without num_generations the groups are unknown: one line naming the metadata key', () => {
    expect(() => readAnyBatch(trl(3, {}), 'n.safetensors')).toThrow(/^n\.safetensors: __metadata__ config has no num_generations/);
  });
  it("keeps TrainingArguments' optimizer fields and the TrainerState the schedule reads (not listed as unknown)", () => {
    const config = { num_generations: 2, learning_rate: 3e-6, optim: 'adamw_torch', adam_beta1: 0.8, adam_beta2: 0.95, adam_epsilon: 1e-6, weight_decay: 0.1, max_grad_norm: 0.2, lr_scheduler_type: 'cosine', warmup_ratio: 0.05, logging_steps: 10 };
    const r = readAnyBatch(trl(3, { config: JSON.stringify(config), global_step: '40', max_steps: '500', pad_token_id: '0', eos_token_id: '2' }), 'o.safetensors');
    const { num_generations: _, logging_steps: __, ...optimizer } = config;
    expect(r.batch.config).toMatchObject({ ...optimizer, num_generations: 2 });
    expect(r.batch.config).not.toHaveProperty('logging_steps');
    expect(r.batch.run).toEqual({ global_step: 40, max_steps: 500, eos_token_id: 2 }); // the hook's eos_token_id: the tokenizer's
    expect(r.unknownKeys).toEqual([]);
  });
});

describe('verl DataProto with groups interleaved by uid', () => {
  const r = load('verl-interleaved.safetensors');
  const b = r.batch;
  it('groups from uid, masks split, scalar advantages from the per-token ones, no std scaling', () => {
    expect(r.format).toBe('verl');
    // uid order: a3f1 c9e2 b7d4 a3f1 b7d4 c9e2 a3f1 b7d4 c9e2
    expect(b.group_ids).toEqual([0, 1, 2, 0, 2, 1, 0, 2, 1]);
    expect(b.num_generations).toBe(3);
    expect(b.config).toMatchObject({ scale_rewards: 'none', advantage_estimator: 'verl' });
    expect(b.prompt_ids[1]).toEqual([31, 32, 33, 34]);
    expect(b.prompt_ids[2]).toEqual([0, 0, 21, 22]);
    expect(b.prompt_mask![2]).toEqual([0, 0, 1, 1]);
    expect(b.completion_ids[0]).toEqual([40, 2, 0, 0, 0]);
    expect(b.completion_mask[0]).toEqual([1, 1, 0, 0, 0]);
    expect(b.completion_mask[4]).toEqual([1, 1, 1, 1, 1]); // multi-turn: the tool token stays in the completion
    expect(b.tool_mask![4]).toEqual([1, 1, 0, 1, 1]); // … and is masked by tool_mask, not completion_mask
    expect(b.rewards).toEqual([1, 0, 1, 0, 0, 0, 0.5, 1, 0]);
    // r − mean(uid): a3f1 mean 0.5, b7d4 mean 2/3, c9e2 mean 0
    const want = [0.5, 0, 1 / 3, -0.5, -2 / 3, 0, 0, 1 / 3, 0];
    b.advantages!.forEach((a, i) => expect(Math.abs(a - want[i])).toBeLessThan(1e-6));
    expect(b.per_token_advantages![0]).toEqual([0.5, 0.5, 0, 0, 0]);
  });
  it('the Doctor groups by uid: the planted flat group c9e2 (rows 1, 5, 8) is flagged, advantages match', () => {
    const report = diagnose(b);
    expect(report.findings.find((f) => f.rule === 'zero-std-group')?.message).toMatch(/1 of 3 groups .*\(groups 1\)/);
    expect(report.findings.map((f) => f.rule)).not.toContain('advantage-mismatch');
    // Control: the same rows grouped by position (what row order alone suggests) disagree with the advantages.
    expect(rules({ ...b, group_ids: undefined })).toContain('error:advantage-mismatch');
  });
  it('the page names groups by label and shows the stats the Doctor computed over the labelled rows', async () => {
    const { groupStats } = await import('../../src/store/derived.ts');
    const { groupLabel } = await import('../../src/io/batch.ts');
    const report = diagnose(b);
    const stats = groupStats({ run: {}, imported: { report }, batchOrigin: 'import', stepFrom: null } as unknown as Parameters<typeof groupStats>[0])!;
    // group 1 = uid c9e2, rows 1, 5, 8: rewards 0, 0, 0
    expect(stats.map((s) => [s.group, s.zero_std])).toEqual([[0, false], [1, true], [2, false]]);
    expect(stats[2].mean).toBeCloseTo(2 / 3, 6); // b7d4: rows 2, 4, 7 → 1, 0, 1
    expect([5, 8].map((i) => groupLabel(b, i))).toEqual([1, 1]);
  });
  it('input_ids that are not prompts ⧺ responses are refused with the row and position', () => {
    const st = writeSafeTensors({
      prompts: { dtype: 'I32', shape: [1, 2], data: new Int32Array([1, 2]) },
      responses: { dtype: 'I32', shape: [1, 2], data: new Int32Array([3, 2]) },
      input_ids: { dtype: 'I32', shape: [1, 4], data: new Int32Array([1, 2, 4, 2]) },
    }, { uid: '["u"]' });
    expect(() => readAnyBatch(st, 'v.safetensors')).toThrow('v.safetensors: input_ids[0][2] = 4, but prompts ⧺ responses has 3 there');
  });
  it('a dump without uid is refused: row order cannot give the groups', () => {
    const st = writeSafeTensors({ prompts: { dtype: 'I32', shape: [1, 2], data: new Int32Array([1, 2]) }, responses: { dtype: 'I32', shape: [1, 2], data: new Int32Array([3, 2]) } });
    expect(() => readAnyBatch(st, 'x.safetensors')).toThrow(/x\.safetensors: __metadata__ has no "uid"/);
  });
});

describe('OpenRLHF Experience', () => {
  it('index → groups, prompt/completion split at the first action of sequences[:, 1:]', () => {
    const r = load('openrlhf-experience.safetensors');
    const b = r.batch;
    expect(r.format).toBe('openrlhf');
    expect(b.group_ids).toEqual([1, 0, 1, 0]); // index [2, 0, 3, 1] // 2
    expect(b.prompt_ids[0]).toEqual([0, 0, 21, 22]);
    expect(b.prompt_mask![0]).toEqual([0, 0, 1, 1]);
    expect(b.prompt_ids[1]).toEqual([0, 11, 12, 13]);
    expect(b.completion_ids[0]).toEqual([40, 41, 2, 0]);
    expect(b.completion_mask[0]).toEqual([1, 1, 1, 0]);
    expect(b.completion_ids[3]).toEqual([44, 45, 46, 2]);
    expect(b.old_per_token_logps![0].length).toBe(4);
    expect(b.rewards).toEqual([1, 0, 0, 1]);
    // group_norm: groups {1, 0} → ±0.5 / (std 0.70711 + 1e-9) = ±0.70711
    b.advantages!.forEach((a, i) => expect(Math.abs(a - [1, -1, -1, 1][i] * Math.SQRT1_2)).toBeLessThan(1e-5));
    const found = rules(b);
    expect(found.filter((f) => f.startsWith('error'))).toEqual([]);
  });
  it("args under OpenRLHF's names before ed62d0e2 are read as today's rows, with a note; a disagreement with today's name fails, naming both", () => {
    const withConfig = (config: Record<string, unknown>) => readAnyBatch(withMetadata(bytes('openrlhf-experience.safetensors'), { config: JSON.stringify(config) }), 'old.safetensors');
    const r = withConfig({ use_kl_loss: true, init_kl_coef: 0.001, kl_estimator: 'k3', eps_clip: 0.28, pretrain: 'Qwen/Qwen3-0.6B' });
    expect(r.batch.config).toMatchObject({ 'algo.kl.use_loss': true, 'algo.kl.init_coef': 0.001, 'algo.kl.estimator': 'k3', 'actor.eps_clip': 0.28, pretrain: 'Qwen/Qwen3-0.6B' });
    expect(r.batch.config).not.toHaveProperty('init_kl_coef');
    expect(r.notes.join('\n')).toMatch(/4 arg\(s\) under OpenRLHF's names before ed62d0e2, read as today's \(use_kl_loss → algo\.kl\.use_loss, init_kl_coef → algo\.kl\.init_coef/);
    expect(r.notes.join('\n')).toMatch(/1 flat arg\(s\) no row of the studio's OpenRLHF table reads, kept as written \(pretrain\)/);
    expect(() => withConfig({ init_kl_coef: 0.001, algo: { kl: { init_coef: 0.05 } } })).toThrow(/init_kl_coef.*algo\.kl\.init_coef|algo\.kl\.init_coef.*init_kl_coef/);
  });
  it("old flat advantage_estimator and reward_clip_range are OpenRLHF's (the studio's advantage_estimator row shares the first name)", () => {
    const withConfig = (config: Record<string, unknown>) => readAnyBatch(withMetadata(bytes('openrlhf-experience.safetensors'), { config: JSON.stringify(config) }), 'old.safetensors');
    const r = withConfig({ advantage_estimator: 'dr_grpo', reward_clip_range: [-5, 5], use_kl_loss: true });
    // Before, the old estimator name was taken as the studio's row: a schema error, and the estimator left at gae.
    expect(r.batch.config).toMatchObject({ 'algo.advantage.estimator': 'dr_grpo', 'reward.clip_range': [-5, 5], 'algo.kl.use_loss': true, advantage_estimator: 'openrlhf', scale_rewards: 'none' });
    expect(diagnose(r.batch).findings.filter((f) => f.rule === 'schema')).toEqual([]);
  });
  it("a grpo-batch/v1 JSON of OpenRLHF's with its former names reads them as today's, with a note; both names disagreeing is one line naming the file", () => {
    const json = (config: Record<string, unknown>) => new TextEncoder().encode(JSON.stringify({
      format: 'grpo-batch/v1', trainer: 'openrlhf', num_generations: 2, pad_token_id: 0, eos_token_ids: [2],
      prompt_ids: [[5], [5]], completion_ids: [[7, 2], [8, 2]], completion_mask: [[1, 1], [1, 1]], advantages: [1, -1], config,
    }));
    const r = readAnyBatch(json({ use_kl_loss: true, init_kl_coef: 0.05, advantage_estimator: 'openrlhf' }), 'b.json');
    // The loss reads today's names: before, init_kl_coef was an unknown key and the KL term took the default 0.01.
    // The old names are the code before ed62d0e2, kept as openrlhf_code (its loss differs: docs/trainers/openrlhf.md).
    expect(r.batch.config).toEqual({ 'algo.kl.use_loss': true, 'algo.kl.init_coef': 0.05, advantage_estimator: 'openrlhf', openrlhf_code: 'before-ed62d0e2' });
    expect(r.notes).toEqual(["config: 2 setting(s) under their former names, read as today's (use_kl_loss → algo.kl.use_loss, init_kl_coef → algo.kl.init_coef)"]);
    expect(() => readAnyBatch(json({ init_kl_coef: 0.05, 'algo.kl.init_coef': 0.01 }), 'b.json')).toThrow(/^b\.json: config\.init_kl_coef = 0\.05 and config\.algo\.kl\.init_coef = 0\.01: one setting under its former name and today's, with different values$/);
    // Both names, even agreeing: no one OpenRLHF wrote both, and which one did decides the loss — unless the config says.
    expect(() => readAnyBatch(json({ init_kl_coef: 0.05, 'algo.kl.init_coef': 0.05 }), 'b.json')).toThrow(/^b\.json: config\.init_kl_coef is OpenRLHF's name before ed62d0e2 \(today's algo\.kl\.init_coef\) and config\.algo\.kl\.init_coef is today's name only: no one OpenRLHF wrote both/);
    expect(readAnyBatch(json({ init_kl_coef: 0.05, 'algo.kl.init_coef': 0.05, openrlhf_code: 'before-ed62d0e2' }), 'b.json').batch.config).toEqual({ 'algo.kl.init_coef': 0.05, openrlhf_code: 'before-ed62d0e2' });
  });
  it('planted: action_mask aligned to sequences[:, :-1] → one token late, the Doctor sees the mask on padding', () => {
    const b = load('openrlhf-action-mask-off-by-one.safetensors').batch;
    expect(b.prompt_ids[0]).toEqual([0, 0, 21, 22, 40]); // the first response token fell into the prompt
    expect(b.completion_mask[0]).toEqual([1, 1, 1]); // and the mask runs onto the pad after the EOS
    const report = diagnose(b);
    expect(report.findings.filter((f) => f.rule === 'mask-covers-padding').map((f) => f.sample)).toEqual([0, 1, 2]);
  });
  it('an action_mask wider than sequences[:, 1:] cannot be aligned: one line naming both', () => {
    const st = writeSafeTensors({
      sequences: { dtype: 'I32', shape: [1, 4], data: new Int32Array([1, 2, 3, 4]) },
      action_mask: { dtype: 'I32', shape: [1, 4], data: new Int32Array([0, 1, 1, 1]) },
    }, { index: '[0]', n_samples_per_prompt: '1' });
    expect(() => readAnyBatch(st, 'exp.safetensors')).toThrow('exp.safetensors: action_mask has 4 columns, sequences[:, 1:] has 3');
  });
});

describe('prime-rl token export', () => {
  const r = load('prime-rl-short-loss-mask.jsonl');
  const b = r.batch;
  it('split at the first trained token, tool tokens in tool_mask, columns sliced like token_ids', () => {
    expect(r.format).toBe('prime-rl');
    expect(b.prompt_ids[1]).toEqual([21, 22]);
    expect(b.completion_ids[1]).toEqual([42, 7, 90, 91, 43, 2]);
    expect(b.completion_mask[1]).toEqual([1, 1, 1, 1, 1, 1]);
    expect(b.tool_mask![1]).toEqual([1, 1, 0, 0, 1, 1]);
    expect(b.advantages).toEqual([0.5, -0.5, 1, -1]);
    expect(b.num_generations).toBe(1);
    expect(b.eos_token_ids).toEqual([2]);
    expect(r.notes.join('\n')).toMatch(/no EOS id in the file: 2 inferred from the last trained token/);
    expect(r.inferred).toEqual({ eos_token_ids: expect.stringMatching(/^inferred from/), pad_token_id: expect.stringMatching(/^inferred as the EOS id, the writer trims padding/) });
    expect(r.notes.join('\n')).toMatch(/no group id/);
    expect(load('prime-rl-short-loss-mask.jsonl', { eos_token_ids: [2], pad_token_id: 0 }).notes.join('\n')).not.toMatch(/inferred/);
  });
  it("rl_weights 0 take tokens out of the loss mask (prime-rl's RL loss trains loss_mask & rl_weights != 0), with notes", () => {
    const rec = (rl: number[], extra: Record<string, unknown> = {}) => JSON.stringify({ schema_version: 1, step: 1, rank: 0, token_ids: [11, 12, 40, 41, 42, 2], loss_mask: [0, 0, 1, 1, 1, 1], rl_weights: rl, ...extra });
    const text = [rec([0, 0, 1, 0, 1, 1]), rec([0, 0, 0, 0, 0, 0], { ce_weights: [0, 0, 1, 1, 1, 1] }), rec([0, 0, 1, 1, 0.5, 1])].join('\n');
    const got = readAnyBatch(new TextEncoder().encode(text), 'w.jsonl', { eos_token_ids: [2], pad_token_id: 0 });
    const bb = got.batch;
    // Row 0: the zero-advantage token 41 leaves the loss; row 1 (a CE sample) has no RL token left; row 2 keeps every token.
    const trained = bb.completion_mask.map((m, i) => m.map((v, t) => v * (bb.tool_mask?.[i]?.[t] ?? 1)));
    expect(trained).toEqual([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]]);
    const notes = got.notes.join('\n');
    expect(notes).toMatch(/rl_weights: 5 trained token\(s\) with rl_weight 0/);
    expect(notes).toMatch(/rl_weights: 1 trained token\(s\) weighted other than 0 or 1/);
    expect(notes).toMatch(/ce_weights: 1 record\(s\) carry a cross-entropy/);
  });
  it('null rl_weights are the default 1 on the loss mask (token_export.py writes None for an absent stream): no weighting said', () => {
    const rec = (rl: unknown) => JSON.stringify({ schema_version: 1, step: 1, rank: 0, token_ids: [11, 12, 40, 41, 42, 2], loss_mask: [0, 0, 1, 1, 1, 1], rl_weights: rl });
    const got = readAnyBatch(new TextEncoder().encode([rec([null, null, null, null, null, null]), rec([0, 0, 1, null, 0, 1])].join('\n')), 'w.jsonl', { eos_token_ids: [2], pad_token_id: 0 });
    const trained = got.batch.completion_mask.map((m, i) => m.map((v, t) => v * (got.batch.tool_mask?.[i]?.[t] ?? 1)));
    expect(trained).toEqual([[1, 1, 1, 1], [1, 1, 0, 1]]);
    expect(got.notes.join('\n')).not.toMatch(/weighted other than 0 or 1/);
    expect(got.notes.join('\n')).toMatch(/rl_weights: 1 trained token\(s\) with rl_weight 0/);
  });
  it('planted: loss_mask 2 shorter than token_ids stays shorter and the Doctor reports it', () => {
    expect(b.completion_ids[2].length - b.completion_mask[2].length).toBe(2);
    const report = diagnose(b);
    const f = report.findings.find((x) => x.rule === 'mask-length-mismatch' && x.field === 'completion_mask');
    expect(f?.sample).toBe(2);
    expect(f?.message).toMatch(/completion_mask has 3 entries, completion_ids has 5/);
  });
});

describe('readAnyBatch', () => {
  it('grpo-batch/v1 stays canonical and round-trips per-token advantages and group labels', () => {
    const text = readFileSync(path.join(root, 'tests/fixtures/batches/clean.json'), 'utf8');
    const r = readAnyBatch(new TextEncoder().encode(text), 'clean.json');
    expect(r.format).toBe('grpo-batch');
    expect(r.unknownKeys).toEqual(['_note']); // the fixture's comment field: listed, not dropped
    const verl = load('verl-interleaved.safetensors').batch;
    const back = parseBatch(serializeBatch(verl));
    expect(back.group_ids).toEqual(verl.group_ids);
    expect(JSON.stringify(back.per_token_advantages)).toBe(JSON.stringify(verl.per_token_advantages)); // JSON has no −0
  });
  it('unknown safetensors content is one line naming the file and its tensors', () => {
    const st = writeSafeTensors({ weight: { dtype: 'F32', shape: [2], data: new Float32Array(2) } });
    expect(() => readAnyBatch(st, 'model.safetensors')).toThrow(/model\.safetensors: .*\[weight\] is none of TRL/);
  });
  it('group labels: a group with more than G rows is a schema error', () => {
    const b = { ...load('verl-interleaved.safetensors').batch, num_generations: 2 };
    expect(diagnose(b).findings.some((f) => f.rule === 'schema' && f.field === 'group_ids')).toBe(true);
  });
});

describe('importBatch (the page worker\'s entry)', () => {
  it('several files of one step → one batch, progress per file, the detected format and trainer', () => {
    const calls: string[] = [];
    const r = importBatch(['trl-rank0.safetensors', 'trl-rank1.safetensors'].map((name) => ({ name, bytes: bytes(name) })), {}, (done, total, name) => calls.push(`${done}/${total} ${name}`));
    expect(calls).toEqual(['0/2 trl-rank0.safetensors', '1/2 trl-rank1.safetensors', '2/2 ']);
    expect([r.format, r.trainer, r.batch.completion_ids.length]).toEqual(['trl', 'TRL GRPOTrainer', 12]);
    expect(() => importBatch([])).toThrow(/no file to import/);
  });
  it('files of different formats are not merged: one line naming the file', () => {
    const files = ['trl-rank0.safetensors', 'verl-interleaved.safetensors'].map((name) => ({ name, bytes: bytes(name) }));
    expect(() => importBatch(files)).toThrow(/^verl-interleaved\.safetensors: cannot merge: format verl, trl-rank0\.safetensors is trl$/);
  });
});

describe('fixtures', () => {
  it('scripts/make_format_fixtures.py reproduces the committed fixtures byte for byte', () => {
    const out = mkdtempSync(path.join(tmpdir(), 'formats-'));
    const r = spawnSync(python(), [path.join(root, 'scripts/make_format_fixtures.py'), out], { encoding: 'utf8', timeout: 120_000 });
    expect(r.stderr).toBe('');
    const names = readdirSync(dir).sort();
    expect(readdirSync(out).sort()).toEqual(names);
    for (const n of names) expect(Buffer.compare(readFileSync(path.join(out, n)), readFileSync(path.join(dir, n))), n).toBe(0);
  });
});
