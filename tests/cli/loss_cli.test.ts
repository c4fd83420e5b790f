// `grpo-studio loss`: end to end on a golden case (a spawned `node bin/grpo-studio.mjs loss ...`, the JSON
// checked against the golden float64 values at EVERY position, since the CLI scores masked rows too), and
// malformed inputs → one-line reason, exit code 2.
import { describe, expect, it, vi } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expectClose } from '../helpers/close.ts';
import { parseSafeTensors, toF32, toF64, toI32 } from '../../src/io/safetensors.ts';
import { caseWith, type CaseEdit } from '../helpers/edit_case.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';
import { AGGREGATIONS } from '../../src/grpo/loss.ts';
import { main } from '../../src/cli/main.ts';

const ROOT = path.resolve(__dirname, '..', '..');
const GOLDEN = path.resolve(ROOT, 'tests', 'golden', 'loss');
const tmp = mkdtempSync(path.join(tmpdir(), 'grpo-loss-cli-'));

function cli(args: string[]) {
  return spawnSync(process.execPath, [path.join(ROOT, 'bin', 'grpo-studio.mjs'), 'loss', ...args], { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28 });
}

const flat = (a: unknown): number[] => (Array.isArray(a) ? a.flatMap(flat) : [a as number]);

describe('grpo-studio loss', () => {
  it('runs a golden case end to end and matches the float64 golden at every position', () => {
    const file = path.join(GOLDEN, 'case_10.safetensors'); // has a fully masked row
    const out = path.join(tmp, 'result.json');
    const p = cli([file, '--out', out]);
    expect(p.status, p.stderr).toBe(0);
    const r = JSON.parse(readFileSync(out, 'utf8'));
    const st = parseSafeTensors(new Uint8Array(readFileSync(file)));
    const [B, T, V] = st.tensors.get('logits')!.shape;
    expect(r.per_token_logps.length).toBe(B);
    expect(r.per_token_logps[0].length).toBe(T);
    expect(r.dlogits.length).toBe(B);
    expect(r.dlogits[0].length).toBe(T);
    expect(r.dlogits[0][0].length).toBe(V);
    expect(Object.keys(r.losses)).toEqual([...AGGREGATIONS]);
    expect(typeof r.adapter.description).toBe('string');
    // README tolerances; logits here are within ±10, so zmax-scaled atol 1e-6·zmax ≤ 1e-5.
    const logits = toF32(st, 'logits');
    let zmax = 1;
    for (const x of logits) zmax = Math.max(zmax, Math.abs(x));
    expectClose(flat(r.per_token_logps), toF64(st, 'per_token_logps'), { rtol: 1e-5, atol: 1e-6 * zmax, label: 'per_token_logps' });
    expectClose(flat(r.per_token_entropy), toF64(st, 'per_token_entropy'), { rtol: 1e-5, atol: 1e-6 * zmax, label: 'per_token_entropy' });
    expectClose(flat(r.per_token_kl), toF64(st, 'per_token_kl'), { rtol: 1e-4, atol: 1e-5, label: 'per_token_kl' });
    expectClose(flat(r.per_token_loss), toF64(st, 'per_token_loss'), { rtol: 1e-4, atol: 1e-5, label: 'per_token_loss' });
    expect(flat(r.is_low_clipped)).toEqual(Array.from(toI32(st, 'is_low_clipped')));
    expect(flat(r.is_high_clipped)).toEqual(Array.from(toI32(st, 'is_high_clipped')));
    for (const a of AGGREGATIONS) expectClose([r.losses[a]], toF64(st, `loss.${a}`), { rtol: 1e-4, atol: 1e-6, label: `loss.${a}` });
    expectClose([r.loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: 'loss' });
    const dl = toF64(st, 'dlogits');
    const g = dl.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    expectClose(flat(r.dlogits), dl, { rtol: 1e-4, atol: 1e-5 * g, label: 'dlogits' });
  });

  it('without --out writes the JSON to stdout', () => {
    const file = path.join(GOLDEN, 'case_13.safetensors'); // sequence level
    const p = cli([file]);
    expect(p.status, p.stderr).toBe(0);
    const r = JSON.parse(p.stdout);
    const st = parseSafeTensors(new Uint8Array(readFileSync(file)));
    expect(r.loss_type).toBe('grpo');
    expectClose([r.loss], toF64(st, 'loss'), { rtol: 1e-4, atol: 1e-6, label: 'loss' });
  });

  it('a file that is not safetensors: one-line reason, exit 2', () => {
    const bad = path.join(tmp, 'bad.safetensors');
    writeFileSync(bad, 'this is not a safetensors file');
    const p = cli([bad]);
    expect(p.status).toBe(2);
    expect(p.stdout).toBe('');
    expect(p.stderr.trim().split('\n')).toHaveLength(1);
    expect(p.stderr).toMatch(/^grpo-studio loss: .*header/);
  });

  // The rest run in-process through main() (same code path as the binary, no GPU needed: they fail first).
  const edited = (edit: CaseEdit) => caseWith(path.join(GOLDEN, 'case_00.safetensors'), edit);

  const malformed: Array<[string, CaseEdit, RegExp]> = [
    ['missing tensor', (t) => delete t.advantages, /missing tensor "advantages"/],
    ['wrong shape', (t) => (t.completion_mask = { dtype: 'I32', shape: [3, 4], data: new Int32Array(12) }), /"completion_mask" has shape \[3,4\], expected \[3,5\]/],
    ['bad config', (_, m) => (m.config = JSON.stringify({ ...JSON.parse(m.config), loss_type: 'ppo' })), /config\.loss_type: expected one of grpo/],
    ['no config', (_, m) => delete m.config, /no "config"/],
    ['id outside the vocabulary', (t) => ((t.completion_ids.data as Int32Array)[7] = 37), /completion_ids at sample 1, position 2 is 37, outside the vocabulary \[0, 37\)/],
    ['mask not 0/1', (t) => ((t.completion_mask.data as Int32Array)[3] = 2), /completion_mask at sample 0, position 3 is 2/],
    // Issue 13: a NaN old log-prob under mask 1 used to give a finite loss; TRL's is NaN.
    ['NaN old log-prob', (t) => ((t.old_per_token_logps.data as Float32Array | Float64Array)[6] = NaN), /old_per_token_logps at sample 1, position 1 is NaN: the loss would be NaN/],
    ['Inf advantage', (t) => ((t.advantages.data as Float32Array | Float64Array)[2] = -Infinity), /advantages at sample 2 is -Infinity/],
    ['NaN logit', (t) => ((t.logits.data as Float32Array | Float64Array)[40] = NaN), /logits at sample 0, position 1, token 3 is NaN/],
  ];
  for (const [what, edit, msg] of malformed) {
    it(`${what}: one-line reason naming it, exit 2`, async () => {
      await expectRefusal(['loss', edited(edit)], msg);
    });
  }

  it('usage errors exit 2', async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main(['loss'])).toBe(2);
      expect(await main(['loss', path.join(tmp, 'nope.safetensors')])).toBe(2);
      expect(String(err.mock.calls[1][0])).toMatch(/cannot read .*nope\.safetensors: ENOENT/);
    } finally {
      err.mockRestore();
    }
  });
});
