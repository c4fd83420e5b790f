// NeMo-RL's train_data_step{N}.jsonl and slime's rollout dump (as JSON) → grpo-batch/v1 (src/io/formats/nemo_rl.ts,
// slime.ts). Fixtures: tests/fixtures/formats/nemo-rl-*.jsonl, slime-*.json, written by scripts/make_format_fixtures.py
// in each trainer's own layout. Clean fixtures import with the right groups, ids, masks, advantages and log-probs and
// no error finding; the planted bugs are found with their rows; `convert` runs on both in process.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import { parseBatch } from '../../src/io/batch.ts';
import { readAnyBatch, type ImportOptions, type ImportResult } from '../../src/io/formats/index.ts';
import { nemoAdvantages } from '../../src/io/formats/nemo_rl.ts';
import { effectiveSettings, fileLayer } from '../../src/grpo/settings/effective.ts';
import { stepConfigOf } from '../../src/grpo/step_config.ts';
import { rewardAdvantages } from '../../src/grpo/step_prepare.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const fixture = (name: string) => path.join(root, 'tests/fixtures/formats', name);
const text = (name: string) => readFileSync(fixture(name), 'utf8');
const imp = (body: string, name: string, opts: ImportOptions = {}) => readAnyBatch(new TextEncoder().encode(body), name, opts);
const report = (r: ImportResult) => diagnose(r.batch, doctorOptions(r.batch, undefined, r.inferred));
const errors = (r: ImportResult) => report(r).findings.filter((f) => f.severity === 'error');

/** The NeMo-RL fixture's lines as objects, edited by `edit`, back to JSONL. */
function nemoEdited(edit: (rec: Record<string, any>, b: number) => void, name = 'nemo-rl-train_data_step3.jsonl'): string {
  return text(name).trim().split('\n').map((l, b) => {
    const rec = JSON.parse(l);
    edit(rec, b);
    return JSON.stringify(rec);
  }).join('\n');
}

describe('NeMo-RL train_data_step{N}.jsonl', () => {
  const clean = () => imp(text('nemo-rl-train_data_step3.jsonl'), 'train_data_step3.jsonl');

  it('clean dump: groups by prompt, prompt/completion from the loss mask, log-probs sliced, LOO advantages, no error', () => {
    const r = clean();
    const b = r.batch;
    expect(r.format).toBe('nemo-rl');
    expect(r.unknownKeys).toEqual([]);
    expect(b.group_ids).toEqual([0, 0, 0, 1, 1, 1]);
    expect(b.num_generations).toBe(3);
    expect(b.prompt_ids[0]).toEqual([11, 12, 13]);
    expect(b.prompt_ids[3]).toEqual([21, 22]);
    // Completion = the rest of the right-padded row (S = 12), pads included.
    expect(b.completion_ids[0]).toEqual([40, 41, 2, 0, 0, 0, 0, 0, 0]);
    expect(b.completion_mask[0]).toEqual([1, 1, 1, 0, 0, 0, 0, 0, 0]);
    // Row 1 is multi-turn: token_loss_mask 0 on the tool turn → tool_mask.
    expect(b.completion_ids[1]).toEqual([42, 7, 90, 91, 43, 2, 0, 0, 0]);
    expect(b.tool_mask![1]).toEqual([1, 1, 0, 0, 1, 1, 1, 1, 1]);
    expect(b.completion_mask[1].map((m, t) => m * b.tool_mask![1][t])).toEqual([1, 1, 0, 0, 1, 1, 0, 0, 0]);
    // Log-probs aligned with token_ids: a plain slice from the prompt's end.
    const line0 = JSON.parse(text('nemo-rl-train_data_step3.jsonl').split('\n')[0]);
    expect(b.sampling_per_token_logps![0]).toEqual(line0.generation_logprobs[0].slice(3));
    expect(b.old_per_token_logps![0]).toEqual(line0.prev_logprobs[0].slice(3));
    // Advantages: NeMo-RL's default (leave-one-out baseline, normalised), one per row; rewards not carried (said so).
    const lines = text('nemo-rl-train_data_step3.jsonl').trim().split('\n').map((l) => JSON.parse(l));
    expect(b.advantages).toEqual(lines.map((l) => l.advantages[0][0]));
    const loo = nemoAdvantages([1, 0, 0.5, 1, 1, 0], b.group_ids!, true, true);
    b.advantages!.forEach((a, i) => expect(a).toBeCloseTo(loo[i], 5));
    expect(b.rewards).toBeUndefined();
    expect(r.notes.join('\n')).toMatch(/rewards not carried: the advantages follow NeMo-RL's leave-one-out baseline/);
    expect(b.config?.step).toBe(3);
    // Pad from the ids past input_lengths, EOS voted: both inferred and named.
    expect(b.pad_token_id).toBe(0);
    expect(b.eos_token_ids).toEqual([2]);
    expect(r.inferred?.pad_token_id).toMatch(/past input_lengths, all id 0/);
    expect(errors(r)).toEqual([]);
  });

  it('with the tokenizer\'s ids nothing is inferred and the clean dump still has no error', () => {
    const r = imp(text('nemo-rl-train_data_step3.jsonl'), 'train_data_step3.jsonl', { pad_token_id: 0, eos_token_ids: [2] });
    expect(r.inferred).toBeUndefined();
    expect(errors(r)).toEqual([]);
  });

  it('planted: token_loss_mask 1 on a pad → mask-covers-padding on row 0 (a warning naming the inference, an error with the ids)', () => {
    const inferred = imp(text('nemo-rl-mask-on-pad.jsonl'), 'nemo-rl-mask-on-pad.jsonl');
    const w = report(inferred).findings.filter((f) => f.rule === 'mask-covers-padding');
    expect(w).toHaveLength(1);
    expect(w[0]).toMatchObject({ severity: 'warning', sample: 0 });
    expect(w[0].message).toMatch(/not certain: pad id 0 inferred/);
    const sure = imp(text('nemo-rl-mask-on-pad.jsonl'), 'nemo-rl-mask-on-pad.jsonl', { pad_token_id: 0, eos_token_ids: [2] });
    const e = errors(sure);
    expect(e.map((f) => [f.rule, f.sample])).toEqual([['mask-covers-padding', 0]]);
  });

  it('planted: prev_logprobs shifted by one (scored as logits[:, :-1] without the leading 0) → logprob-mismatch', () => {
    const shifted = nemoEdited((rec) => {
      rec.prev_logprobs[0] = [...rec.prev_logprobs[0].slice(1), 0];
    });
    const r = imp(shifted, 'shifted.jsonl');
    const f = report(r).findings.filter((x) => x.rule === 'logprob-mismatch');
    expect(f).toHaveLength(1);
    // The explorer's diagnosis names the shift where the rows hold enough tokens to show it: rows 2 and 4
    // (4 compared tokens, sampler[t] = old[t − 1] + 0.002 in the fixture's values); row 0 has 2 pairs only.
    expect(f[0].message).toMatch(/off-by-one: samples 2, 4\)/);
    const clean = report(imp(text('nemo-rl-train_data_step3.jsonl'), 'c.jsonl')).findings.filter((x) => x.rule === 'logprob-mismatch');
    expect(clean).toEqual([]);
  });

  it('advantages without leave-one-out are verl\'s formula: rewards carried and checked by the Doctor; a wrong one is an error', () => {
    const rewards = [1, 0, 0.5, 1, 1, 0];
    const plain = nemoAdvantages(rewards, [0, 0, 0, 1, 1, 1], false, true);
    const r = imp(nemoEdited((rec, b) => {
      rec.advantages[0] = rec.advantages[0].map(() => plain[b]);
    }), 'plain.jsonl');
    expect(r.batch.rewards).toEqual(rewards);
    expect(r.batch.config).toMatchObject({ advantage_estimator: 'verl', scale_rewards: 'group' });
    expect(errors(r)).toEqual([]);
    const wrong = imp(nemoEdited((rec, b) => {
      rec.advantages[0] = rec.advantages[0].map(() => (b === 4 ? 5 : plain[b]));
    }), 'wrong.jsonl');
    expect(errors(wrong).map((f) => [f.rule, f.sample])).toEqual([['advantage-mismatch', 4]]);
  });

  it("leave-one-out over equal rows has std 0, as NeMo-RL's float32 one-pass form gives it (a 6e5 advantage and a false error before)", () => {
    // [0.3, 0.3, 0.3, 0.9]: row 3's others are equal (std 0, no division): 0.9 − 0.3; rows 0-2: others {0.3, 0.3, 0.9},
    // mean 0.5, Bessel std √0.12. Two rows (k = 1): NeMo-RL's (0 · 1/0 = NaN) → 0, so r − the other's reward.
    const loo = nemoAdvantages([0.3, 0.3, 0.3, 0.9, 0.1, 0.7], [0, 0, 0, 0, 1, 1], true, true);
    const a = -0.2 / (Math.sqrt(0.12) + 1e-6);
    [a, a, a, 0.6, -0.6, 0.6].forEach((x, i) => expect(loo[i]).toBeCloseTo(x, 12));
    // The reader then finds the setting (leave-one-out, normalized) and the Doctor has nothing to report.
    const rewards = [0.3, 0.3, 0.9, 1, 1, 0];
    const want = nemoAdvantages(rewards, [0, 0, 0, 1, 1, 1], true, true);
    expect(want[2]).toBeCloseTo(0.6, 12);
    const r = imp(nemoEdited((rec, b) => {
      rec.filtered_rewards = [rewards[b]];
      rec.advantages[0] = rec.advantages[0].map(() => Math.fround(want[b]));
    }), 'loo.jsonl');
    expect(r.notes.join('\n')).toMatch(/leave-one-out baseline \(use_leave_one_out_baseline = true, normalize_rewards = true/);
    expect(errors(r)).toEqual([]);
    // NeMo-RL's float32 one pass over equal others (0.9, 0.9) can leave a cancellation residue (~1e-4..1e-3) it then
    // divides by: an advantage far above r − baseline, of its sign, which the trainer did train on. The reader still
    // finds the setting, and says what happened.
    const rewards2 = [0.9, 0.9, 0.1, 1, 1, 0];
    const ref = nemoAdvantages(rewards2, [0, 0, 0, 1, 1, 1], true, true);
    expect(ref[2]).toBeCloseTo(-0.8, 12);
    const amplified = ref.map((x, b) => (b === 2 ? -800 : x)); // −0.8 / (a residue of 1e-3)
    const g = imp(nemoEdited((rec, b) => {
      rec.filtered_rewards = [rewards2[b]];
      rec.advantages[0] = rec.advantages[0].map(() => Math.fround(amplified[b]));
    }), 'blown.jsonl');
    expect(g.notes.join('\n')).toMatch(/leave-one-out baseline \(use_leave_one_out_baseline = true, normalize_rewards = true/);
    expect(g.notes.join('\n')).toMatch(/row\(s\) 2: the other rewards of the group are all equal.*the advantage is -800 where r − baseline is -0\.8.*cancellation residue/);
    expect(errors(g)).toEqual([]);
    // Of the other sign, or smaller than r − baseline, it is no residue: no setting fits, the Doctor reports it.
    const wrong = imp(nemoEdited((rec, b) => {
      rec.filtered_rewards = [rewards2[b]];
      rec.advantages[0] = rec.advantages[0].map(() => Math.fround(b === 2 ? 0.5 : ref[b]));
    }), 'wrong.jsonl');
    expect(wrong.notes.join('\n')).toMatch(/follow no NeMo-RL GRPO setting/);
  });

  it('sample_loss_mask is 0 or 1: another value (a weight on the row in NeMo-RL\'s loss) is refused naming line and sample, never read as 0', () => {
    for (const v of [0.5, 2, -1]) {
      const bad = () => imp(nemoEdited((rec, b) => b === 1 && (rec.sample_loss_mask = [v])), 'w.jsonl');
      expect(bad).toThrow(new RegExp(`^w\\.jsonl: line 2: sample_loss_mask \\(sample 1\\) = ${v}: NeMo-RL weights the row's loss tokens by it`));
    }
    expect(imp(nemoEdited((rec, b) => b === 1 && (rec.sample_loss_mask = [1])), 'one.jsonl').batch.completion_mask[1]).toContain(1);
  });

  it('ids are exact: a fraction, a boolean or a string among token_ids is refused naming line and position; unknown keys listed', () => {
    const bad = (v: unknown) => () => imp(nemoEdited((rec, b) => {
      if (b === 2) rec.token_ids[0][4] = v;
    }), 'bad.jsonl');
    expect(bad(41.5)).toThrow(/bad\.jsonl: line 3: token_ids \(sample 2\)\[4\] \(position 4\) = 41\.5 is not an integer/);
    expect(bad(true)).toThrow(/= true is a boolean, not an integer/);
    expect(bad('41')).toThrow(/= "41" is a string, not an integer/);
    expect(bad(2 ** 31)).toThrow(/is not a token id in \[0, 2\^31\)/);
    const extra = imp(nemoEdited((rec) => {
      rec.reward_breakdown = [{ acc: 1 }];
    }), 'x.jsonl');
    expect(extra.unknownKeys).toEqual(['reward_breakdown']);
  });

  it('an unwrapped line (values not in one-element lists) reads the same; NaN log-probs as Python writes them are kept', () => {
    const unwrapped = nemoEdited((rec) => {
      for (const k of Object.keys(rec)) if (k !== 'idx') rec[k] = rec[k][0];
      rec.generation_logprobs[4] = 'NAN_HERE';
    }).replaceAll('"NAN_HERE"', 'NaN');
    const a = imp(unwrapped, 'u.jsonl').batch;
    expect(a.sampling_per_token_logps![0][1]).toBeNaN();
    const c = clean().batch;
    expect(a.completion_ids).toEqual(c.completion_ids);
    expect(a.advantages).toEqual(c.advantages);
    expect(a.group_ids).toEqual(c.group_ids);
  });
});

describe('NeMo-RL: a row with no trained token keeps its prompt\'s group and its advantage', () => {
  // NeMo-RL groups by the initial prompt messages (grpo.py extract_initial_prompt_messages → calculate_baseline_and_std_per_prompt)
  // and writes each sample's advantage in every column (advantage_estimator.py advantages.expand(mask.shape)), whatever
  // the token mask. Row 0 of the fixture (prompt [11, 12, 13], reward 1; its group's others 0 and 0.5) loses every
  // trained token: leave-one-out, normalised, its advantage is (1 − 0.25) / (Bessel std of {0, 0.5} + 1e-6).
  const row0 = 0.75 / (Math.sqrt(((0 - 0.25) ** 2 + (0.5 - 0.25) ** 2) / 1) + 1e-6);
  const untrained = (rec: Record<string, any>) => {
    rec.token_loss_mask[0] = rec.token_loss_mask[0].map(() => 0);
    rec.sample_loss_mask = [0];
  };

  it('untrained generation after the prompt (row 0 mask all 0): 2 groups, prompt [11, 12, 13], advantage from its columns, no error', () => {
    const r = imp(nemoEdited((rec, b) => b === 0 && untrained(rec)), 'zero_row_train_data_step3.jsonl');
    const b = r.batch;
    expect(b.group_ids).toEqual([0, 0, 0, 1, 1, 1]);
    expect(b.num_generations).toBe(3);
    expect(b.prompt_ids[0]).toEqual([11, 12, 13]);
    expect(b.completion_ids[0]).toEqual([40, 41, 2, 0, 0, 0, 0, 0, 0]);
    expect(b.completion_mask[0]).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(b.advantages![0]).toBeCloseTo(row0, 5);
    expect(r.notes.join('\n')).toMatch(/sample\(s\) 0: no trained token; grouped with the rows whose prompt ids begin theirs/);
    expect(r.notes.join('\n')).toMatch(/leave-one-out baseline \(use_leave_one_out_baseline = true, normalize_rewards = true; .* checked by the reader on all 6 rows/);
    expect(errors(r)).toEqual([]);
  });

  it('an empty generation (the row is its prompt, then padding) groups the same way', () => {
    const r = imp(nemoEdited((rec, b) => {
      if (b !== 0) return;
      untrained(rec);
      rec.token_ids[0] = rec.token_ids[0].map((id: number, t: number) => (t < 3 ? id : 0));
      rec.input_lengths = [3];
    }), 'empty_gen.jsonl');
    expect(r.batch.group_ids).toEqual([0, 0, 0, 1, 1, 1]);
    expect(r.batch.prompt_ids[0]).toEqual([11, 12, 13]);
    expect(r.batch.advantages![0]).toBeCloseTo(row0, 5);
    expect(errors(r)).toEqual([]);
  });

  it('a row with no trained token whose advantages are not one value is kept per token only, naming it', () => {
    const r = imp(nemoEdited((rec, b) => {
      if (b !== 0) return;
      untrained(rec);
      rec.advantages[0][5] = -1;
    }), 'varying.jsonl');
    expect(r.batch.advantages).toBeUndefined();
    expect(r.batch.per_token_advantages![0][2]).toBe(-1);
    expect(r.notes.join('\n')).toMatch(/sample 0 has no trained token and its advantages are not one value \(2\.12\d* at position 0, -1 at 5;/);
  });

  it('no other row\'s prompt begins it: the row is its own group (any group-mate would have shown the prompt)', () => {
    const r = imp(nemoEdited((rec, b) => {
      if (b !== 0) return;
      untrained(rec);
      rec.token_ids[0][0] = 31;
    }), 'alone.jsonl');
    expect(r.batch.group_ids).toEqual([0, 1, 1, 2, 2, 2]);
    expect(r.batch.prompt_ids[0]).toEqual([31, 12, 13, 40, 41, 2]); // its ids before input_lengths (6)
    expect(r.notes.join('\n')).toMatch(/sample\(s\) 0: no trained token, and no other row's prompt begins theirs/);
  });

  it('undeterminable prompts are refused in one line naming the file, line, field and samples', () => {
    // Row 2's prompt becomes [11, 12, 13, 40], which begins row 0 as [11, 12, 13] does: two candidate prompts.
    const nested = () => imp(nemoEdited((rec, b) => {
      if (b === 0) untrained(rec);
      if (b === 2) {
        rec.token_ids[0][3] = 40;
        rec.token_loss_mask[0][3] = 0;
      }
    }), 'nested.jsonl');
    expect(nested).toThrow(/^nested\.jsonl: line 1: token_loss_mask \(sample 0\) has no trained token, and its ids begin with the prompts of samples 1, 2 \(3 ids, 4 ids\): which is its prompt, so its group .* cannot be told$/);
    // Rows 0 and 3 both untrained, no trained prompt begins either, they share their first id and differ after.
    const pair = () => imp(nemoEdited((rec, b) => {
      if (b === 0 || b === 3) untrained(rec);
      if (b === 0 || b === 3) rec.token_ids[0][0] = 31;
    }), 'pair.jsonl');
    expect(pair).toThrow(/^pair\.jsonl: line 4: token_loss_mask \(sample 3\) has no trained token, nor has sample 0, and no other row's prompt begins either: they share id 31 at position 0 but differ after/);
  });

  it('convert (in process) says 2 groups and writes the trainer\'s advantage for row 0', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nemo-zero-'));
    const file = path.join(dir, 'train_data_step3.jsonl');
    writeFileSync(file, nemoEdited((rec, b) => b === 0 && untrained(rec)) + '\n');
    const err: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
    const out = path.join(dir, 'batch.json');
    try {
      expect(await main(['convert', file, '--out', out])).toBe(0);
    } finally {
      spy.mockRestore();
    }
    expect(err[0]).toMatch(/6 samples, 2 group\(s\) of up to 3/);
    const batch = parseBatch(readFileSync(out, 'utf8'));
    expect(batch.advantages![0]).toBeCloseTo(row0, 5);
  });
});

describe('slime rollout dump (the torch.save dict as JSON)', () => {
  it('clean dump: groups by group_index, response = last response_length tokens, loss_mask / rollout_log_probs over it, no error', () => {
    const r = imp(text('slime-rollout-3.json'), 'slime-rollout-3.json');
    const b = r.batch;
    expect(r.format).toBe('slime');
    expect(r.unknownKeys).toEqual([]);
    expect(b.group_ids).toEqual([0, 0, 0, 1, 1, 1]);
    expect(b.num_generations).toBe(3);
    expect(b.prompt_ids[1]).toEqual([11, 12, 13]);
    expect(b.completion_ids[1]).toEqual([42, 7, 90, 91, 43, 2]);
    expect(b.completion_mask[1]).toEqual([1, 1, 1, 1, 1, 1]);
    expect(b.tool_mask![1]).toEqual([1, 1, 0, 0, 1, 1]);
    expect(b.prompt_ids[4]).toEqual([21, 22]);
    expect(b.completion_ids[4]).toEqual([48, 49, 50, 2]);
    const dump = JSON.parse(text('slime-rollout-3.json'));
    expect(b.sampling_per_token_logps).toEqual(dump.samples.map((s: { rollout_log_probs: number[] }) => s.rollout_log_probs));
    expect(b.old_per_token_logps).toBeUndefined();
    expect(b.rewards).toEqual([1, 0, 0.5, 1, 0, 0]);
    expect(b.advantages).toBeUndefined();
    expect(b.config).toMatchObject({ advantage_estimator: 'verl', scale_rewards: 'group', step: 3 });
    expect(r.inferred?.eos_token_ids).toMatch(/inferred from the last trained token/);
    expect(errors(r)).toEqual([]);
  });

  it('planted: a loss_mask 2 shorter than response_length (slime asserts they are equal) → mask-length-mismatch on sample 1', () => {
    const r = imp(text('slime-short-loss-mask.json'), 'slime-short-loss-mask.json');
    expect(errors(r).map((f) => [f.rule, f.sample])).toEqual([['mask-length-mismatch', 1]]);
    expect(errors(r)[0].message).toMatch(/completion_mask has 4 entries, completion_ids has 6/);
  });

  it('loss_mask None = all 1, remove_sample = all 0, a dict reward is not guessed, unknown keys listed, ids exact', () => {
    const dump = JSON.parse(text('slime-rollout-3.json'));
    dump.samples[0].loss_mask = null;
    dump.samples[2].remove_sample = true;
    dump.samples[3].extra_field = 1;
    dump.step_info = {};
    const r = imp(JSON.stringify(dump), 'd.json');
    expect(r.batch.completion_mask[0]).toEqual([1, 1, 1]);
    expect(r.batch.completion_mask[2]).toEqual([0, 0, 0, 0]);
    expect(r.unknownKeys).toEqual(['step_info', 'samples[].extra_field']);
    dump.samples[5].reward = { acc: 1, fmt: 0 };
    const d = imp(JSON.stringify(dump), 'd.json');
    expect(d.batch.rewards).toBeUndefined();
    expect(d.notes.join('\n')).toMatch(/samples\[5\]\.reward \(sample 5\) is a dict \(acc, fmt\).*--reward-key/);
    dump.samples[1].tokens[2] = 13.25;
    expect(() => imp(JSON.stringify(dump), 'd.json')).toThrow(/d\.json: samples\[1\]\.tokens \(sample 1\)\[2\] \(position 2\) = 13\.25 is not an integer/);
  });

  describe("groups as slime's _post_process_rewards normalises them (not group_index)", () => {
    // 8 samples: 2 prompts × 2 rollouts, each rollout split into 2 training samples (sharing its rollout_id).
    const sample = (g: number, i: number, reward: number, rollout_id: number | null) => ({ group_index: g, index: i, rollout_id, tokens: [5, 6, 7, 2], response_length: 2, loss_mask: [1, 1], reward });
    const dump = (samples: unknown[]) => JSON.stringify({ rollout_id: 1, samples });
    const rewards = [1, 1, 0, 0, 1, 0, 0, 0];
    const stepAdvantages = (b: ReturnType<typeof imp>['batch']) => Array.from(rewardAdvantages(b, b.num_generations, b.group_ids, stepConfigOf(effectiveSettings('trl', [fileLayer(b, 'd.json')]), 2)).advantages);
    it('a rollout split into samples sharing a rollout_id: the count is not n × rollout_batch_size, so one group over the batch', () => {
      const r = imp(dump(rewards.map((x, i) => sample(i < 4 ? 0 : 1, i, x, Math.floor(i / 2)))), 'd.json');
      expect(r.batch.group_ids).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
      expect(r.batch.num_generations).toBe(8);
      expect(r.notes.join('\n')).toMatch(/groups: one over the whole batch of 8, .*sharing its rollout_id/);
      // slime: (r − 0.375) / (Bessel std 0.517549 + 1e-6); by group_index (the studio before) row 0 was 0.866.
      const m = 3 / 8;
      const sd = Math.sqrt(rewards.reduce((a, x) => a + (x - m) ** 2, 0) / 7);
      expect(stepAdvantages(r.batch)[0]).toBeCloseTo((1 - m) / (sd + 1e-6), 12);
      expect(stepAdvantages(r.batch)[0]).toBeCloseTo(1.2076, 4);
    });
    it('groups of unequal size: one group; equal groups out of order: consecutive blocks of n, as slime forms them', () => {
      const uneven = imp(dump(rewards.slice(0, 5).map((x, i) => sample(i < 3 ? 0 : 1, i, x, null))), 'd.json');
      expect(uneven.batch.group_ids).toEqual([0, 0, 0, 0, 0]);
      expect(uneven.notes.join('\n')).toMatch(/unequal size, 2 \/ 3/);
      const shuffled = imp(dump(rewards.slice(0, 4).map((x, i) => sample(i % 2, i, x, null))), 'd.json');
      expect(shuffled.batch.group_ids).toEqual([0, 0, 1, 1]);
      expect(shuffled.notes.join('\n')).toMatch(/not in group_index order: a block mixes prompts/);
    });
  });

  it('a grpo-batch/v1 file and a prime-rl export are not taken for either format', () => {
    expect(imp(text('prime-rl-short-loss-mask.jsonl'), 'p.jsonl').format).toBe('prime-rl');
    const g = JSON.stringify({ format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [2], prompt_ids: [[5]], completion_ids: [[2]], completion_mask: [[1]] });
    expect(imp(g, 'g.json').format).toBe('grpo-batch');
  });
});

describe('dumps without loss settings', () => {
  it('NeMo-RL, slime and prime-rl say what a step then computes and what the trainer usually does', () => {
    for (const [file, usual] of [['nemo-rl-train_data_step3.jsonl', /reference_policy_kl_penalty 0\.01/], ['slime-rollout-3.json', /--calculate-per-token-loss/], ['prime-rl-short-loss-mask.jsonl', /DPPO-Binary TV/]] as const) {
      const notes = imp(text(file), file).notes.join('\n');
      expect(notes, file).toMatch(/no loss settings in the file: a step takes the studio's \(TRL defaults: loss_type dapo, beta 0\) and scores at temperature 1 \(the file carries no sampling temperature, which the trainer divides the logits by\) unless a config says otherwise/);
      expect(notes, file).toMatch(usual);
    }
  });
});

describe('grpo-studio convert (in process)', () => {
  afterEach(() => void vi.restoreAllMocks());

  for (const [file, trainer, summary] of [
    ['nemo-rl-train_data_step3.jsonl', 'NeMo-RL GRPO', /6 samples, 2 group\(s\) of up to 3/],
    ['slime-rollout-3.json', 'slime', /6 samples, 2 group\(s\) of up to 3/],
  ] as const) {
    it(`${file} → grpo-batch/v1, exit 0, the trainer and notes on stderr`, async () => {
      const err: string[] = [];
      vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
      const out = path.join(mkdtempSync(path.join(tmpdir(), 'convert-')), 'batch.json');
      expect(await main(['convert', fixture(file), '--out', out])).toBe(0);
      expect(err[0]).toContain(trainer);
      expect(err[0]).toMatch(summary);
      expect(err.join('\n')).toMatch(/note: no EOS id in the file/);
      const b = parseBatch(readFileSync(out, 'utf8'));
      expect(b.group_ids).toEqual([0, 0, 0, 1, 1, 1]);
      expect(b.completion_ids[1].slice(0, 6)).toEqual([42, 7, 90, 91, 43, 2]);
    });
  }
});
