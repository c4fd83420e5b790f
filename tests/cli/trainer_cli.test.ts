// `grpo-studio loss` on trainer cases and `grpo-studio advantages`: spawned end to end on golden cases (every
// F64 tensor of the case written under its own name, within the README tolerances), and malformed inputs →
// one-line reason naming the field / sample / position, exit 2.
import { describe, expect, it, vi } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expectClose } from '../helpers/close.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { parseSafeTensors, toF64, toI32 } from '../../src/io/safetensors.ts';
import { caseWith, type CaseEdit } from '../helpers/edit_case.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';
import { main } from '../../src/cli/main.ts';

const ROOT = path.resolve(__dirname, '..', '..');
const DIR = path.join(GOLDEN_ROOT, 'trainers');
const tmp = mkdtempSync(path.join(tmpdir(), 'grpo-trainer-cli-'));

function cli(verb: string, args: string[]) {
  return spawnSync(process.execPath, [path.join(ROOT, 'bin', 'grpo-studio.mjs'), verb, ...args], { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28 });
}
const flat = (a: unknown): number[] => (Array.isArray(a) ? a.flatMap(flat) : [a as number]);

/** Every F64 tensor of the case is a key of the result; values within loose-but-failing bounds (exact tolerances: the golden tests). */
function checkAll(file: string, r: Record<string, unknown>): void {
  const st = parseSafeTensors(new Uint8Array(readFileSync(file)));
  const M = st.tensors.has('completion_mask') ? toI32(st, 'completion_mask') : undefined;
  for (const [name, info] of st.tensors) {
    if (info.dtype !== 'F64') continue;
    expect(r, `${file}: key ${name}`).toHaveProperty(name);
    const expected = toF64(st, name);
    const got = flat(r[name]);
    expect(got.length, name).toBe(expected.length);
    if (name.endsWith('mask')) expect(got).toEqual(Array.from(expected));
    else if (name === 'dlogits') expectClose(got, expected, { rtol: 1e-4, atol: 1e-5 * expected.reduce((m, x) => Math.max(m, Math.abs(x)), 0), label: name });
    else expectClose(got, expected, { rtol: 1e-4, atol: 1e-5, mask: name.startsWith('per_token') || name === 'importance_sampling_ratio' ? M : undefined, label: name });
  }
}

describe('grpo-studio loss (trainer cases)', () => {
  it('trl case_12 (dapo, vLLM sequence_mask, tool_mask, 2 processes): every output, exit 0', () => {
    const file = path.join(DIR, 'trl', 'case_12.safetensors');
    const out = path.join(tmp, 'trl12.json');
    const p = cli('loss', [file, '--out', out]);
    expect(p.status, p.stderr).toBe(0);
    checkAll(file, JSON.parse(readFileSync(out, 'utf8')));
  });
});

describe('grpo-studio advantages', () => {
  for (const c of ['case_00', 'case_03', 'case_07']) {
    it(`${c}: advantages (and verl returns) written, exit 0`, () => {
      const file = path.join(DIR, 'advantages', `${c}.safetensors`);
      const out = path.join(tmp, `${c}.json`);
      const p = cli('advantages', [file, '--out', out]);
      expect(p.status, p.stderr).toBe(0);
      checkAll(file, JSON.parse(readFileSync(out, 'utf8')));
    });
  }
});

const setConfig = (m: Record<string, string>, o: Record<string, unknown>) => (m.config = JSON.stringify({ ...JSON.parse(m.config), ...o }));

describe('unknown settings', () => {
  it('are listed on stderr and in the result, not silently dropped; the case still runs', async () => {
    const f = caseWith(path.join(DIR, 'trl', 'case_00.safetensors'), (_, m) => setConfig(m, { log_completions: true }));
    const out = path.join(tmp, 'unknown.json');
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main(['loss', f, '--out', out])).toBe(0);
      expect(String(err.mock.calls[0][0])).toMatch(/does not know, not used: config\.log_completions/);
    } finally {
      err.mockRestore();
    }
    expect(JSON.parse(readFileSync(out, 'utf8')).unknown_settings).toEqual(['config.log_completions']);
  });

  it('a TRL advantage case lists them too (args.to_dict() holds keys no row has)', async () => {
    const f = caseWith(path.join(DIR, 'advantages', 'case_00.safetensors'), (_, m) => setConfig(m, { scale_reward: 'none' }));
    const out = path.join(tmp, 'unknown_adv.json');
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main(['advantages', f, '--out', out])).toBe(0);
      expect(String(err.mock.calls[0][0])).toMatch(/does not know, not used: config\.scale_reward/);
    } finally {
      err.mockRestore();
    }
    expect(JSON.parse(readFileSync(out, 'utf8')).unknown_settings).toEqual(['config.scale_reward']);
  });
});

describe('malformed trainer cases: one line naming the field, exit 2', () => {
  const trl08 = path.join(DIR, 'trl', 'case_08.safetensors');
  const adv00 = path.join(DIR, 'advantages', 'case_00.safetensors');
  const adv04 = path.join(DIR, 'advantages', 'case_04.safetensors');
  const cases: Array<[string, string, string, CaseEdit, RegExp]> = [
    ['unknown loss_type', 'loss', trl08, (_, m) => setConfig(m, { loss_type: 'ppo' }), /config\.loss_type: expected one of grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo, got "ppo"/],
    ['vLLM correction without sampling log-probs', 'loss', trl08, (_, m) => setConfig(m, { use_vllm: true }), /needs tensor "sampling_per_token_logps"/],
    ['truncate mode without bounds', 'loss', trl08, (t, m) => ((t.sampling_per_token_logps = t.old_per_token_logps), setConfig(m, { use_vllm: true, vllm_importance_sampling_mode: 'token_truncate', vllm_importance_sampling_clip_max: null })), /config\.vllm_importance_sampling_clip_max: a \*_truncate mode needs/],
    ['tool_mask not 0/1', 'loss', trl08, (t) => ((t.tool_mask.data as Int32Array)[10] = 3), /tool_mask at sample 1, position 1 is 3, expected 0 or 1/],
    ['advantages of the wrong shape', 'loss', trl08, (t) => (t.advantages = { dtype: 'F32', shape: [4, 9], data: new Float32Array(36) }), /"advantages" has shape \[4,9\], expected \[4\]/],
    ['unknown trainer', 'loss', trl08, (_, m) => (m.trainer = 'trlx'), /metadata "trainer" is "trlx"/],
    ['scale_rewards "median"', 'advantages', adv00, (_, m) => setConfig(m, { scale_rewards: 'median' }), /config\.scale_rewards: expected one of group, batch, none, got "median"/],
    ['rows not a multiple of num_generations', 'advantages', adv00, (_, m) => setConfig(m, { num_generations: 5 }), /12 rows, not a multiple of config\.num_generations = 5/],
    ['a list of ranks (a merged batch names no one slice)', 'advantages', adv00, (_, m) => (m.run = JSON.stringify({ num_processes: 2, rank: [0, 1] })), /run\.rank = \[0,1\]: an advantage case is one process's slice, give its rank/],
    ['unknown verl estimator', 'advantages', adv04, (_, m) => setConfig(m, { adv_estimator: 'gae' }), /config\.adv_estimator: expected one of grpo, rloo, reinforce_plus_plus/],
    ['verl estimator not given (verl defaults to gae)', 'advantages', adv04, (_, m) => (m.config = '{}'), /config\.adv_estimator: missing/],
    // verl's norm_adv_by_std_in_grpo false given any other way than its leaf name left the std division in force.
    ['verl setting nested as its config holds it', 'advantages', adv04, (_, m) => (m.config = JSON.stringify({ adv_estimator: 'grpo', algorithm: { norm_adv_by_std_in_grpo: false } })), /config\.algorithm: not a verl setting the studio knows \(a verl advantage case takes the leaf names/],
    ['verl setting as a dotted path', 'advantages', adv04, (_, m) => setConfig(m, { 'algorithm.norm_adv_by_std_in_grpo': false }), /config\.algorithm\.norm_adv_by_std_in_grpo: not a verl setting the studio knows/],
    ['verl setting misspelt', 'advantages', adv04, (_, m) => setConfig(m, { norm_adv_by_std: false }), /config\.norm_adv_by_std: not a verl setting the studio knows/],
    ['response_mask not 0/1', 'advantages', adv04, (t) => ((t.response_mask.data as Int32Array)[6] = 2), /response_mask at sample 1, position 1 is 2/],
  ];
  for (const [what, verb, file, edit, msg] of cases) {
    it(`${verb}: ${what}`, async () => {
      await expectRefusal([verb, caseWith(file, edit)], msg);
    });
  }
});
