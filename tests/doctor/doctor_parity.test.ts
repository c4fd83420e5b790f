// One batch, one answer (issue 20): for every fixture batch `grpo-studio doctor` reads, the page's Doctor and the
// CLI's give the same findings (rule + severity) and skip the same rules. The page's path is run in-process as
// the studio worker runs it: the import worker reads the file (src/worker/import_job.ts), then inspectBatch
// (src/worker/inspect.ts, what the runner's inspect calls) with the loaded model — at import with the
// tokenizer rules deferred, then the deferred tokenizer checks. The CLI's path is `run` of src/cli/doctor.ts
// with --tokenizer on the same model's folder (tokenizer + config.json). Models: the embedded tiny-adder (the
// page's default; it fits no fixture) and Qwen3 (fits the fixtures with Qwen3 ids), and no model at all.
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { run } from '../../src/cli/doctor.ts';
import { RULES, type DoctorReport, type KnownModel } from '../../src/doctor/index.ts';
import { parseConfig } from '../../src/model/config.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import { parseInWorker } from '../../src/worker/import_job.ts';
import { inspectBatch, loadedModel } from '../../src/worker/inspect.ts';
import { fakeWorker } from '../helpers/import_worker.ts';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const FIXTURES = ['batches', 'formats'].flatMap((d) => readdirSync(path.join(root, 'tests/fixtures', d)).map((f) => path.join(root, 'tests/fixtures', d, f)));
const TOKENIZER_RULES = RULES.filter((r) => r.needsTokenizer).map((r) => r.id);

/** A model folder as the CLI's --tokenizer and the page both know it, and the page's loaded model made from it. */
interface Model {
  dir: string;
  page: KnownModel;
}

async function model(dir: string, name: string): Promise<Model> {
  const config = parseConfig(JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')));
  return { dir, page: loadedModel(await loadTokenizerDir(dir), config, name) };
}

let tiny: Model;
let qwen3: Model;
beforeAll(async () => {
  // Qwen3's tokenizer with Qwen3-0.6B's config.json beside it: a model folder, as a Hub download is.
  const dir = mkdtempSync(path.join(tmpdir(), 'qwen3-'));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(path.join(QWEN3_DIR, f), path.join(dir, f));
  // save_pretrained records the Hub id the model came from as _name_or_path.
  const config = { ...JSON.parse(readFileSync(path.join(root, 'tests/fixtures/configs/Qwen3-0.6B.json'), 'utf8')), _name_or_path: 'Qwen/Qwen3-0.6B' };
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  [tiny, qwen3] = await Promise.all([model(path.join(root, 'public/models/tiny-adder'), 'tiny-adder'), model(dir, 'Qwen/Qwen3-0.6B')]);
});
afterEach(() => void vi.restoreAllMocks());

/** What the page ends with: the import's report, then the deferred tokenizer checks' when there are any. */
async function page(file: string, m: Model | null): Promise<{ atImport: DoctorReport; final: DoctorReport }> {
  const job = { file: new Blob([readFileSync(file)]), name: path.basename(file), doctor: m === null };
  const { read, report } = await parseInWorker(job, () => {}, () => fakeWorker('run').w).done;
  if (!m) return { atImport: report!, final: report! };
  // With the ids the reader inferred, as studio.worker.ts passes them to the runner's inspect.
  const quick = inspectBatch(read.batch, m.page, { deferTokenizerRules: true, inferred: read.inferred });
  return { atImport: quick.report, final: quick.deferred ? inspectBatch(read.batch, m.page, { inferred: read.inferred }).report : quick.report };
}

async function cli(file: string, m: Model | null): Promise<DoctorReport> {
  const out: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((s: string) => void out.push(s));
  await run([file, ...(m ? ['--tokenizer', m.dir] : []), '--json']);
  vi.restoreAllMocks();
  return JSON.parse(out.join('\n')) as DoctorReport;
}

const findings = (r: DoctorReport) => r.findings.map((f) => `${f.rule} ${f.severity}`).sort();
const skipped = (r: DoctorReport) => r.skipped.map((s) => s.rule).sort();

describe('the page\'s Doctor and grpo-studio doctor agree on every fixture', () => {
  it('reads at least every rule fixture and every format fixture', () => {
    expect(FIXTURES.length).toBeGreaterThanOrEqual(28);
  });

  for (const which of ['none', 'tiny-adder', 'Qwen3'] as const) {
    it(`with ${which === 'none' ? 'no model' : which}`, async () => {
      const m = which === 'none' ? null : which === 'tiny-adder' ? tiny : qwen3;
      let applied = 0;
      for (const file of FIXTURES) {
        const name = path.relative(root, file);
        const [p, c] = [await page(file, m), await cli(file, m)];
        expect(findings(p.final), name).toEqual(findings(c));
        expect(skipped(p.final), name).toEqual(skipped(c));
        // At import the tokenizer rules wait (with a model loaded); everything else is already the final answer.
        expect(findings(p.atImport), name).toEqual(findings(p.final).filter((f) => !(m && TOKENIZER_RULES.includes(f.split(' ')[0]))));
        if (!p.final.skipped.some((s) => s.rule === 'template-mismatch')) applied++;
      }
      // tiny-adder is no fixture's model; Qwen3 is the model of the six with Qwen3 ids but token-out-of-vocabulary's.
      expect(applied).toBe({ none: 0, 'tiny-adder': 0, Qwen3: 5 }[which]);
    }, 120_000);
  }
});

describe('a batch that records its model name: the same answer with the same model files', () => {
  // The batch fixtures with Qwen3 ids the tokenizer rules apply to, saved as if a trainer recorded the model.
  const named = (file: string, value: string): string => {
    const b = JSON.parse(readFileSync(file, 'utf8'));
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'named-')), path.basename(file));
    writeFileSync(out, JSON.stringify({ ...b, config: { ...b.config, model_name_or_path: value } }));
    return out;
  };
  it.each([
    ['its own name (last part, any case)', 'qwen3-0.6b', true],
    ["another model's name", 'Qwen/Qwen2.5-7B-Instruct', false],
    ['a path on the training machine (names nothing)', '/scratch/ckpt/step-500', true],
  ])('%s', async (_what, value, decodes) => {
    // Strict JSON only: the nonfinite fixtures write NaN, which JSON.parse (and so this rewrite) does not read.
    const strict = (f: string) => {
      try {
        return !!JSON.parse(readFileSync(f, 'utf8'));
      } catch {
        return false;
      }
    };
    const files = FIXTURES.filter((f) => f.includes(`${path.sep}batches${path.sep}`) && f.endsWith('.json') && strict(f));
    let applied = 0;
    for (const file of files) {
      const copy = named(file, value);
      const [p, c] = [await page(copy, qwen3), await cli(copy, qwen3)];
      expect(findings(p.final), file).toEqual(findings(c));
      expect(skipped(p.final), file).toEqual(skipped(c));
      const skip = c.skipped.find((x) => x.rule === 'template-mismatch');
      if (!skip) applied++;
      else if (!decodes) expect(skip.reason).toContain(`the batch's config.model_name_or_path is "${value}", not Qwen/Qwen3-0.6B (its config.json's _name_or_path)`);
    }
    expect(applied > 0).toBe(decodes);
  }, 120_000);
});
