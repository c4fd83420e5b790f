// `grpo-studio loss CASE --out R.json` on the verl and OpenRLHF golden cases (tests/golden/trainers): one
// spawned binary end to end, every case through main() in-process (the same code path), R.json checked
// against the case's float64 tensors with the README tolerances; a bad setting is one line naming the
// field, exit 2.
import { describe, expect, it, vi } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkTrainerOutputs, readTrainerCase, TRAINER_GOLDEN } from '../helpers/trainer_case.ts';
import { writeSafeTensors, type TensorOut } from '../../src/io/safetensors.ts';
import type { TrainerLossOutputs } from '../../src/grpo/trainers/types.ts';
import { main } from '../../src/cli/main.ts';

const ROOT = path.resolve(__dirname, '..', '..');
const tmp = mkdtempSync(path.join(tmpdir(), 'grpo-trainer-cli-'));
const flat = (a: unknown): number[] => (Array.isArray(a) ? a.flatMap(flat) : [a as number]);

/** R.json as the outputs record checkTrainerOutputs reads (nested lists flattened row-major). */
function outputsOf(json: Record<string, unknown>): TrainerLossOutputs {
  const o: Record<string, unknown> = { loss: json.loss };
  for (const [k, v] of Object.entries(json)) if (Array.isArray(v)) o[k] = Float64Array.from(flat(v));
  return o as unknown as TrainerLossOutputs;
}

function check(trainer: string, file: string, out: string): void {
  const full = path.join(TRAINER_GOLDEN, trainer, file);
  const { st, c } = readTrainerCase(full);
  const json = JSON.parse(readFileSync(out, 'utf8'));
  const temperature = Number(trainer === 'verl' ? c.config.temperature : c.config['rollout.temperature']);
  checkTrainerOutputs(file, st, c, outputsOf(json), temperature, trainer === 'openrlhf');
}

describe('grpo-studio loss on verl / OpenRLHF cases', () => {
  it('the binary runs verl case_11 (bypass, IS, rejection sampling) end to end', () => {
    const out = path.join(tmp, 'spawned.json');
    const p = spawnSync(process.execPath, [path.join(ROOT, 'bin', 'grpo-studio.mjs'), 'loss', path.join(TRAINER_GOLDEN, 'verl', 'case_11.safetensors'), '--out', out], { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28 });
    expect(p.status, p.stderr).toBe(0);
    check('verl', 'case_11.safetensors', out);
  }, 120_000);

  for (const trainer of ['verl', 'openrlhf']) {
    for (const file of readdirSync(path.join(TRAINER_GOLDEN, trainer)).filter((f) => f.endsWith('.safetensors')).sort()) {
      it(`${trainer}/${file}: every F64 tensor of the case, within the README tolerances`, async () => {
        const out = path.join(tmp, `${trainer}_${file}.json`);
        expect(await main(['loss', path.join(TRAINER_GOLDEN, trainer, file), '--out', out])).toBe(0);
        check(trainer, file, out);
      }, 120_000);
    }
  }

  it('a setting the trainer rejects: one line naming the field, exit 2', async () => {
    const { st } = readTrainerCase(path.join(TRAINER_GOLDEN, 'verl', 'case_00.safetensors'));
    const tensors: Record<string, TensorOut> = {};
    for (const name of ['logits', 'completion_ids', 'completion_mask', 'advantages', 'old_per_token_logps', 'ref_per_token_logps']) {
      const info = st.tensors.get(name)!;
      const bytes = st.data.slice(info.data_offsets[0], info.data_offsets[1]);
      tensors[name] = { dtype: info.dtype as 'F32' | 'I32', shape: info.shape, data: info.dtype === 'I32' ? new Int32Array(bytes.buffer) : new Float32Array(bytes.buffer) };
    }
    const config = { ...JSON.parse(st.metadata.config), kl_loss_type: 'low_var_kl+' };
    const f = path.join(tmp, 'bad.safetensors');
    writeFileSync(f, writeSafeTensors(tensors, { ...st.metadata, config: JSON.stringify(config) }));
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await main(['loss', f])).toBe(2);
      expect(err).toHaveBeenCalledTimes(1);
      expect(String(err.mock.calls[0][0])).toMatch(/^grpo-studio loss: .*config\.kl_loss_type: expected one of/);
    } finally {
      err.mockRestore();
    }
  });
});
