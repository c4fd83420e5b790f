// Issue 20 item 4, a tokenizer is applied to a batch only when it fits (src/doctor/tokenizer_fit.ts): another
// model's tokenizer (the embedded tiny-adder on Qwen3 ids, Qwen3's on the hand-made toy ids) is skipped with the
// reason and finds nothing, the batch's own runs the tokenizer rules; pad / EOS / model name / vocabulary each
// decide on their own; the model that fits bounds the ids (token-out-of-vocabulary, checked against a direct
// definition on random rows and on odd cases) and the batch's own config comes before the model's type.
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { diagnose, doctorOptions, modelFacts, tokenizerFit, type KnownModel } from '../../src/doctor/index.ts';
import { parseBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { QWEN3_DIR } from '../helpers/tokenizers.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const TINY_DIR = path.join(root, 'public/models/tiny-adder');
const fixture = (name: string) => parseBatch(readFileSync(path.join(root, 'tests/fixtures/batches', `${name}.json`), 'utf8'), name);
const TOKENIZER_RULES = ['retokenization-mismatch', 'template-mismatch'];

let tiny: Tokenizer;
let qwen: Tokenizer;
beforeAll(async () => {
  [tiny, qwen] = await Promise.all([loadTokenizerDir(TINY_DIR), loadTokenizerDir(QWEN3_DIR)]);
});

const known = (tokenizer: Tokenizer, more: Partial<KnownModel> = {}): KnownModel => ({ tokenizer, label: 'the test tokenizer', ...more });
const rulesOf = (b: GrpoBatch, k?: KnownModel) => new Set(diagnose(b, doctorOptions(b, k)).findings.map((f) => f.rule));

describe('another model\'s tokenizer is skipped with the reason', () => {
  it('tiny-adder on a Qwen3 batch: pad, EOS and ids all disagree; no template or retokenization findings', () => {
    const b = fixture('template-mismatch');
    const fit = tokenizerFit(b, known(tiny));
    expect(fit).toMatchObject({ fits: false, sameModel: false });
    expect(fit.reasons.join('\n')).toMatch(/^pad_token_id 151643 is not its pad \(302 "<\|endoftext\|>"\).*\neos_token_ids \[151645\] are not .*\n\d+ id\(s\) outside its 328 tokens \(first prompt_ids\[0\]\[0\] = 151644\)$/);
    const options = doctorOptions(b, known(tiny));
    expect(options.tokenizer).toBeUndefined();
    const report = diagnose(b, options);
    expect(report.findings.filter((f) => TOKENIZER_RULES.includes(f.rule))).toEqual([]);
    // The tokenizer rules and the vocabulary bound are skipped, each with the same reason.
    for (const rule of [...TOKENIZER_RULES, 'token-out-of-vocabulary']) {
      expect(report.skipped.find((s) => s.rule === rule)?.reason).toBe(`the test tokenizer does not fit this batch: ${fit.reasons.join('; ')}`);
    }
  });

  it('Qwen3 on the toy-id fixtures (pad 0, EOS 1: ordinary text in Qwen3) is skipped; the same batches alone give the same findings', () => {
    for (const name of ['clean', 'advantage-mismatch', 'eos-inside-completion']) {
      const b = fixture(name);
      const fit = tokenizerFit(b, known(qwen));
      expect(fit.fits).toBe(false);
      // Every toy id is inside Qwen3's vocabulary: pad and EOS alone decide.
      expect(fit.reasons.map((r) => r.split(' ')[0])).toEqual(['pad_token_id', 'eos_token_ids']);
      expect(rulesOf(b, known(qwen))).toEqual(rulesOf(b));
    }
  });

  it('the batch\'s own tokenizer runs the tokenizer rules', () => {
    for (const name of TOKENIZER_RULES) {
      const b = fixture(name);
      expect(tokenizerFit(b, known(qwen))).toEqual({ fits: true, sameModel: true, reasons: [] });
      const options = doctorOptions(b, known(qwen));
      expect(options.tokenizer).toBe(qwen);
      expect(options.vocab_size).toBe(qwen.vocab_size);
      expect(rulesOf(b, known(qwen)).has(name)).toBe(true);
    }
  });
});

describe('what decides the fit', () => {
  const qwenBatch = () => fixture('retokenization-mismatch');

  it('pad: the tokenizer\'s pad, its EOS, or one of its special tokens; ordinary text is not a pad', () => {
    const imEnd = qwen.tokenToId('<|im_end|>')!;
    const imStart = qwen.tokenToId('<|im_start|>')!;
    const hello = qwen.encode('hello')[0];
    for (const [pad, fits] of [[qwen.pad_token_id!, true], [imEnd, true], [imStart, true], [hello, false]] as const) {
      expect(tokenizerFit({ ...qwenBatch(), pad_token_id: pad }, known(qwen)).fits, `pad ${pad}`).toBe(fits);
    }
  });

  it('EOS: every batch EOS id must be the tokenizer\'s EOS or a special token', () => {
    const b = qwenBatch();
    expect(tokenizerFit({ ...b, eos_token_ids: [qwen.eos_token_id!, qwen.tokenToId('<|endoftext|>')!] }, known(qwen)).fits).toBe(true);
    const dot = qwen.encode('.')[0];
    expect(tokenizerFit({ ...b, eos_token_ids: [qwen.eos_token_id!, dot] }, known(qwen)).reasons).toEqual([`eos_token_ids [${dot}] are not its EOS (${qwen.eos_token_id} "<|im_end|>") or one of its special tokens`]);
  });

  it('model name: compared by its last part when the batch records a name, never when it records a path', () => {
    const named = (v: string) => ({ ...qwenBatch(), config: { model_name_or_path: v } });
    const k = known(qwen, { config: modelFacts({ _name_or_path: 'Qwen/Qwen3-0.6B' }) });
    expect(tokenizerFit(named('qwen3-0.6b'), k).fits).toBe(true);
    expect(tokenizerFit(named('Qwen/Qwen2.5-7B-Instruct'), k)).toEqual({ fits: false, sameModel: false, reasons: ['the batch\'s config.model_name_or_path is "Qwen/Qwen2.5-7B-Instruct", not Qwen/Qwen3-0.6B (its config.json\'s _name_or_path)'] });
    expect(tokenizerFit(named('/scratch/ckpt/step-500'), k).fits).toBe(true);
    // A config.json without _name_or_path, or with a path there (a local save): nothing to compare.
    expect(tokenizerFit(named('Qwen/Qwen2.5-7B-Instruct'), known(qwen)).fits).toBe(true);
    expect(tokenizerFit(named('Qwen/Qwen2.5-7B-Instruct'), known(qwen, { config: modelFacts({ _name_or_path: './out/checkpoint-50' }) })).fits).toBe(true);
  });

  it('ids: the same model with ids past its tokenizer is not decoded, and the model\'s vocabulary bounds them', () => {
    const b = fixture('token-out-of-vocabulary');
    const fit = tokenizerFit(b, known(qwen));
    expect(fit).toMatchObject({ fits: false, sameModel: true });
    expect(fit.reasons).toEqual([`3 id(s) outside its ${qwen.vocab_size} tokens (first prompt_ids[2][4] = 200000)`]);
    const report = diagnose(b, doctorOptions(b, known(qwen)));
    expect(report.skipped.filter((s) => TOKENIZER_RULES.includes(s.rule)).map((s) => s.rule).sort()).toEqual(TOKENIZER_RULES);
    expect(report.findings.filter((f) => f.rule === 'token-out-of-vocabulary').map((f) => [f.field, f.sample])).toEqual([['prompt_ids', 2], ['completion_ids', 1]]);
  });

  it('a padded model vocabulary (config.json vocab_size past the tokenizer\'s) bounds the ids, the tokenizer still decodes only its own', () => {
    const V = qwen.vocab_size + 10;
    const b = qwenBatch();
    b.completion_ids[0][1] = V - 1; // a row of the embedding with no token: valid for the model, not decodable
    const k = known(qwen, { config: { vocab_size: V } });
    const options = doctorOptions(b, k);
    expect(options.tokenizer).toBeUndefined();
    expect(options.vocab_size).toBe(V);
    expect(rulesOf(b, k).has('token-out-of-vocabulary')).toBe(false);
    b.completion_ids[0][1] = V;
    expect(diagnose(b, doctorOptions(b, k)).findings.find((f) => f.rule === 'token-out-of-vocabulary')?.message).toBe(`sample 0: completion_ids[0][1] = ${V} is outside the vocabulary of ${V} tokens`);
  });
});

describe('the options come from the batch first', () => {
  it('position-ids-shift: the batch\'s gpt2 + arange fire whatever model is at hand, fitting or not', () => {
    const b = fixture('position-ids-shift');
    const qwen2 = modelFacts(JSON.parse(readFileSync(path.join(TINY_DIR, 'config.json'), 'utf8')) as object);
    expect(qwen2.model_type).toBe('qwen2');
    for (const k of [undefined, known(tiny, { config: qwen2 }), known(qwen)]) expect(rulesOf(b, k).has('position-ids-shift')).toBe(true);
  });

  it('a model that is not the batch\'s lends it neither its type nor its positions; the batch\'s own does', () => {
    const b = fixture('retokenization-mismatch');
    const gpt2 = modelFacts(JSON.parse(readFileSync(path.join(root, 'tests/fixtures/configs/gpt2.json'), 'utf8')) as object);
    expect(gpt2).toEqual({ model_type: 'gpt2', vocab_size: 50257, max_positions: 1024 });
    expect(doctorOptions(b, known(tiny, { config: gpt2 }))).toMatchObject({ model_type: undefined, vocab_size: undefined, max_positions: undefined });
    expect(doctorOptions(b, known(qwen, { config: gpt2 }))).toMatchObject({ model_type: 'gpt2', vocab_size: 50257, max_positions: 1024 });
    // Position ids are the batch's own config's (a step's settings are written into the batch it judges), never the model's.
    expect(doctorOptions(b, known(qwen, { config: gpt2 })).position_ids).toBe(b.config?.position_ids);
    expect(doctorOptions({ ...b, config: { position_ids: 'from_attention_mask' } }).position_ids).toBe('from_attention_mask');
  });
});

describe('token-out-of-vocabulary', () => {
  /** The rule's definition, directly: per row, the first id ≥ V and how many there are. */
  function expected(rows: number[][], V: number) {
    return rows.flatMap((row, b) => {
      const at = row.findIndex((id) => id >= V);
      return at < 0 ? [] : [{ sample: b, span: [at, at + 1], n: row.filter((id) => id >= V).length }];
    });
  }

  it('one finding per row with an id ≥ V, at its first, on random rows', () => {
    const V = fc.integer({ min: 1, max: 8 });
    const rows = fc.array(fc.array(fc.integer({ min: 0, max: 12 }), { maxLength: 8 }), { minLength: 1, maxLength: 5 });
    fc.assert(fc.property(V, rows, (v, completion) => {
      const b: GrpoBatch = { format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [0], prompt_ids: completion.map(() => [0]), completion_ids: completion, completion_mask: completion.map((r) => r.map(() => 1)) };
      const fs = diagnose(b, { vocab_size: v }).findings.filter((f) => f.rule === 'token-out-of-vocabulary');
      const want = expected(completion, v);
      expect(fs.map((f) => ({ sample: f.sample, span: f.span }))).toEqual(want.map(({ sample, span }) => ({ sample, span })));
      fs.forEach((f, i) => expect(/\((\d+) such ids in the row\)/.exec(f.message)?.[1] ?? '1').toBe(String(want[i].n)));
    }), { numRuns: 300 });
  });

  it('odd cases: V − 1 passes, V fails, negative and fractional ids are the schema\'s, pad and EOS are checked too', () => {
    const b: GrpoBatch = { format: 'grpo-batch/v1', num_generations: 2, pad_token_id: 10, eos_token_ids: [9, 11], prompt_ids: [[9], [-1, 1.5]], completion_ids: [[10, 9], [2, 9]], completion_mask: [[1, 1], [1, 1]] };
    const r = diagnose(b, { vocab_size: 10 });
    const oov = r.findings.filter((f) => f.rule === 'token-out-of-vocabulary');
    expect(oov.map((f) => [f.field, f.sample ?? null])).toEqual([['pad_token_id', null], ['eos_token_ids', null], ['completion_ids', 0]]);
    expect(oov[1].message).toBe('eos_token_ids[1] = 11 is outside the vocabulary of 10 tokens');
    expect(r.findings.filter((f) => f.rule === 'schema' && f.field === 'prompt_ids').map((f) => f.sample)).toEqual([1]);
  });

  it('without a vocabulary the rule says what it needs, and a fractional id is still the schema\'s error', () => {
    const b = fixture('clean');
    b.completion_ids[0][0] = 0.5;
    const r = diagnose(b, doctorOptions(b));
    expect(r.skipped.find((s) => s.rule === 'token-out-of-vocabulary')?.reason).toMatch(/^needs the vocabulary of the batch's model/);
    expect(r.findings.some((f) => f.rule === 'schema' && f.sample === 0 && f.field === 'completion_ids')).toBe(true);
  });
});
