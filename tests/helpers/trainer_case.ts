// Trainer-parity golden cases (tests/golden/trainers, README there): reading a loss case into a
// TrainerLossCase and checking an objective's outputs against the case's float64 tensors with the README's
// tolerances (per-token values where completion_mask = 1; masks exact; dlogits everywhere).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseSafeTensors, shapeOf, toF32, toF64, toI32, type SafeTensors } from '../../src/io/safetensors.ts';
import type { TrainerId } from '../../src/grpo/settings/types.ts';
import type { TrainerLossCase, TrainerLossOutputs } from '../../src/grpo/trainers/types.ts';
import { expectClose, maxAbs } from './close.ts';
import { GOLDEN_ROOT } from './golden.ts';

export const TRAINER_GOLDEN = path.join(GOLDEN_ROOT, 'trainers');

export function readTrainerCase(file: string): { st: SafeTensors; c: TrainerLossCase } {
  const st = parseSafeTensors(new Uint8Array(readFileSync(file)), file);
  const [B, T, V] = shapeOf(st, 'logits');
  const opt = (name: string): Float32Array | null => (st.tensors.has(name) ? toF32(st, name) : null);
  const c: TrainerLossCase = {
    trainer: st.metadata.trainer as TrainerId,
    config: JSON.parse(st.metadata.config),
    run: JSON.parse(st.metadata.run),
    B,
    T,
    V,
    logits: toF32(st, 'logits'),
    completion_ids: toI32(st, 'completion_ids'),
    completion_mask: toI32(st, 'completion_mask'),
    tool_mask: st.tensors.has('tool_mask') ? toI32(st, 'tool_mask') : null,
    advantages: toF32(st, 'advantages'),
    old_per_token_logps: opt('old_per_token_logps'),
    ref_per_token_logps: opt('ref_per_token_logps'),
    sampling_per_token_logps: opt('sampling_per_token_logps'),
  };
  return { st, c };
}

/** Every F64 output of the case checked against `r`; returns the worst fraction of the tolerance per output. */
export function checkTrainerOutputs(file: string, st: SafeTensors, c: TrainerLossCase, r: TrainerLossOutputs, temperature: number, rawEntropy: boolean): Record<string, number> {
  const { B, T, V } = c;
  const zmax = new Float64Array(B * T).fill(1);
  const entZ = new Float64Array(B * T).fill(1);
  for (let n = 0; n < B * T; n++) {
    for (let v = 0; v < V; v++) {
      const x = Math.abs(c.logits[n * V + v]);
      zmax[n] = Math.max(zmax[n], x / temperature);
      entZ[n] = Math.max(entZ[n], x / temperature, rawEntropy ? x : 0);
    }
  }
  const M = c.completion_mask;
  const worst: Record<string, number> = {};
  for (const [name, info] of st.tensors) {
    if (info.dtype !== 'F64') continue;
    const golden = toF64(st, name);
    const label = `${path.basename(file)} ${name}`;
    if (name === 'loss') {
      worst[name] = expectClose([r.loss], golden, { rtol: 1e-4, atol: 1e-6, label }).worst;
      continue;
    }
    const actual = (r as unknown as Record<string, ArrayLike<number> | null>)[name];
    if (!actual) throw new Error(`${label}: the objective did not produce ${name}`);
    if (name === 'loss_mask' || name === 'entropy_mask' || name === 'off_policy_mask') {
      worst[name] = expectClose(actual, golden, { rtol: 0, atol: 0, label }).worst;
    } else if (name === 'dlogits') {
      worst[name] = expectClose(actual, golden, { rtol: 1e-4, atol: 1e-5 * maxAbs(golden), label }).worst;
    } else if (name === 'per_token_logps' || name === 'per_token_entropy') {
      const z = name === 'per_token_entropy' ? entZ : zmax;
      worst[name] = expectClose(actual, golden, { rtol: 1e-5, atol: 1e-6, atolAt: (i) => 1e-6 * z[i], mask: M, label }).worst;
    } else {
      worst[name] = expectClose(actual, golden, { rtol: 1e-4, atol: 1e-5, mask: M, label }).worst;
    }
  }
  return worst;
}
