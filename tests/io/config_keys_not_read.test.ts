// A grpo-batch/v1 file's config and run keys that no settings row of its trainer reads are listed as not read
// (ImportResult.unknownKeys: `doctor`, `convert`, the page's import notes, and a `note:` from `score` / `step`),
// so a misspelt setting is never taken silently for the default it leaves in place. Keys that describe the batch
// (BATCH_FACT_KEYS: the model's name, a dump's step, verl's rollout_n) are not: every fixture converted reads back clean.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { serializeBatch } from '../../src/io/batch.ts';

const clean = JSON.parse(readFileSync('tests/fixtures/batches/clean.json', 'utf8'));
const read = (b: unknown, name = 'b.json') => readAnyBatch(new TextEncoder().encode(JSON.stringify(b)), name);

describe('config keys no settings row reads', () => {
  it('a misspelt TRL setting is listed, the rows and the batch facts are not', () => {
    const r = read({ ...clean, config: { epsilom: 0.5, loss_typ: 'dr_grpo', epsilon: 0.2, model_name_or_path: 'Qwen/Qwen3-0.6B' }, run: { num_proceses: 2, num_processes: 1 } });
    expect(r.unknownKeys.filter((k) => k.includes('.'))).toEqual(['config.epsilom', 'config.loss_typ', 'run.num_proceses']);
  });

  it("another trainer's key is not read under this one: TRL's beta in an OpenRLHF batch is listed", () => {
    const r = read({ ...clean, trainer: 'openrlhf', config: { beta: 0.05, 'algo.kl.init_coef': 0.05 } });
    expect(r.unknownKeys.filter((k) => k.includes('.'))).toEqual(['config.beta']);
  });

  it('every format fixture, converted to grpo-batch/v1, reads back with no key left unread', () => {
    const dir = 'tests/fixtures/formats';
    for (const f of readdirSync(dir)) {
      const first = readAnyBatch(new Uint8Array(readFileSync(join(dir, f))), f);
      const back = readAnyBatch(new TextEncoder().encode(serializeBatch({ ...first.batch, ...(first.inferred ? { inferred_ids: first.inferred } : {}) })), `${f}.json`);
      expect(back.unknownKeys, f).toEqual([]);
    }
  });
});
