// TRL's objective (src/grpo/trainers/trl.ts on the GPU) against every tests/golden/trainers/trl case — float64
// runs of TRL's own `_compute_loss` — every output the case holds, with the README's tolerances (masks exact).
// The float64 twin chain (src/oracle/logprob_gather.ts + src/oracle/trl_loss.ts) is checked against the same files
// at near-float64 precision, since it is the oracle of the kernel tests.
import { afterAll, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { testGpu } from '../helpers/gpu.ts';
import { GOLDEN_ROOT } from '../helpers/golden.ts';
import { expectClose, type CloseOptions } from '../helpers/close.ts';
import { trlTwinChain } from '../helpers/trl_twin.ts';
import { parseSafeTensors, toF64, type SafeTensors } from '../../src/io/safetensors.ts';
import { readTrainerCase } from '../../src/cli/trainer_case.ts';
import { trlLoss } from '../../src/grpo/trainers/trl.ts';
import type { TrainerLossCase, TrainerLossOutputs } from '../../src/grpo/trainers/types.ts';

const DIR = path.join(GOLDEN_ROOT, 'trainers', 'trl');
const CASES = readdirSync(DIR).filter((f) => /^case_\d+\.safetensors$/.test(f)).sort();
const OUTPUTS = ['per_token_logps', 'per_token_entropy', 'per_token_kl', 'importance_sampling_ratio', 'per_token_loss', 'loss_mask', 'entropy_mask', 'off_policy_mask'] as const;

const worst: Record<string, number> = {};
afterAll(() => {
  if (Object.keys(worst).length) console.log('trl goldens, worst fraction of the tolerance:\n' + Object.entries(worst).map(([k, v]) => `  ${k.padEnd(26)} ${v.toFixed(4)}`).join('\n'));
});

function load(file: string): { st: SafeTensors; c: TrainerLossCase } {
  const st = parseSafeTensors(new Uint8Array(readFileSync(path.join(DIR, file))), file);
  return { st, c: readTrainerCase(st, file) };
}

/** README tolerances: (rtol, atol) per output; logps/entropy use atol 1e-6·zmax of the row, dlogits 1e-5·gmax. */
function tolerance(out: string, c: TrainerLossCase, expected: Float64Array): CloseOptions {
  const temperature = (c.config.temperature as number) ?? 1;
  if (out === 'per_token_logps' || out === 'per_token_entropy') {
    const zmax = new Float64Array(c.B * c.T).fill(1);
    for (let n = 0; n < c.B * c.T; n++) for (let v = 0; v < c.V; v++) zmax[n] = Math.max(zmax[n], Math.abs(c.logits[n * c.V + v] / temperature));
    return { rtol: 1e-5, atol: 1e-6, atolAt: (i) => 1e-6 * zmax[i], mask: c.completion_mask };
  }
  if (out === 'dlogits') return { rtol: 1e-4, atol: 1e-5 * expected.reduce((m, x) => Math.max(m, Math.abs(x)), 0) };
  if (out === 'loss') return { rtol: 1e-4, atol: 1e-6 };
  return { rtol: 1e-4, atol: 1e-5, mask: c.completion_mask };
}

function compare(file: string, st: SafeTensors, c: TrainerLossCase, r: TrainerLossOutputs, scale = 1): void {
  const f64 = [...st.tensors.entries()].filter(([, t]) => t.dtype === 'F64').map(([n]) => n);
  expect(f64.length).toBeGreaterThan(4);
  for (const name of f64) {
    const expected = toF64(st, name);
    const actual = name === 'loss' ? [r.loss] : name === 'dlogits' ? r.dlogits : r[name as (typeof OUTPUTS)[number]];
    expect(actual, `${file}: ${name} not formed`).toBeTruthy();
    if (name.endsWith('_mask')) {
      expect(Array.from(actual!), `${file} ${name}`).toEqual(Array.from(expected));
      continue;
    }
    const o = tolerance(name, c, expected);
    const rep = expectClose(actual!, expected, { ...o, rtol: o.rtol * scale, atol: o.atol * scale, atolAt: o.atolAt && ((i) => o.atolAt!(i) * scale), label: `${file} ${name}` });
    if (scale === 1) worst[name] = Math.max(worst[name] ?? 0, rep.worst);
  }
}

describe('TRL golden cases (GPU)', () => {
  it('are all there', () => expect(CASES.length).toBe(17));
  for (const file of CASES) {
    it(`${file}: every output within the README tolerances`, async () => {
      const gpu = await testGpu();
      const { st, c } = load(file);
      const r = await trlLoss(gpu, c, { backward: true });
      expect(r.unknown_settings, 'every config / run key of the case is in the TRL table').toEqual([]);
      compare(file, st, c, r);
      // The effective mask from the golden's own masks: loss_mask × entropy × off-policy × (IS ≠ 0 in a *_mask mode, not vespo).
      const g = (n: string) => (st.tensors.has(n) ? toF64(st, n) : null);
      const [lm, em, om, is] = [g('loss_mask')!, g('entropy_mask'), g('off_policy_mask'), g('importance_sampling_ratio')];
      const drops = String(c.config.vllm_importance_sampling_mode).endsWith('mask') && c.config.loss_type !== 'vespo';
      const expected = Array.from(lm, (m, i) => m * (em ? em[i] : 1) * (om ? om[i] : 1) * (is && drops && is[i] === 0 ? 0 : 1));
      expect(Array.from(r.effective_loss_mask!), `${file} effective_loss_mask`).toEqual(expected);
    }, 120_000);
  }
});

describe('TRL golden cases (float64 twin)', () => {
  for (const file of CASES.filter((f) => f !== 'case_16.safetensors')) {
    it(`${file}: the twin chain matches at 1e-3 of the tolerance`, () => {
      const { st, c } = load(file);
      const { g, mask, f, dlogits } = trlTwinChain(c);
      // The twin's dlogits stay float64 (the outputs type names the GPU's Float32Array).
      compare(file, st, c, { ...f, per_token_logps: g.logp, per_token_entropy: g.entropy, loss_mask: mask, dlogits: dlogits as unknown as Float32Array }, 1e-3);
    });
  }
});
