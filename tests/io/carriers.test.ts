// Where trainers carry their pad / EOS ids (issue 21, "False errors on clean dumps"; items 1 and 2): each carrier a
// TRL dump may hold them in (the hook's keys, the tokenizer / processor, the generation config, args.generation_kwargs,
// as huggingface/trl trl/trainer/grpo_trainer.py at f2cd577 takes them: `self._tokenizer.pad_token_id` pads prompts
// and completions, `self._tokenizer.eos_token_id` ends them, GenerationConfig(pad_token_id=…, eos_token_id=…) updated
// by args.generation_kwargs), TrainerState in a `state` object, verl's DataProto.meta_info; ids no carrier holds are
// inferred exactly (pad from masked-out positions) or named as a stand-in, the Doctor's findings on them are warnings
// naming the inference (doctorOptions, the CLI's and the page's), and a carrier's id out of range is a refusal naming
// its key. Real Qwen3 ids.
import { describe, expect, it } from 'vitest';
import { diagnose, doctorOptions } from '../../src/doctor/index.ts';
import { mergeImports, readAnyBatch, type ImportResult } from '../../src/io/formats/index.ts';
import { writeSafeTensors } from '../../src/io/safetensors.ts';

// Qwen3: <|endoftext|> pads, <|im_end|> ends an assistant turn, <|im_start|> opens one.
const PAD = 151643;
const EOS = 151645;
const IM_START = 151644;
const NL = 198;

const ones = (n: number) => new Array<number>(n).fill(1);
const i64 = (rows: number[][]) => ({ dtype: 'I64' as const, shape: [rows.length, rows[0].length], data: BigInt64Array.from(rows.flat(), (x) => BigInt(x)) });
const f32 = (v: number[]) => ({ dtype: 'F32' as const, shape: [v.length], data: Float32Array.from(v) });
const rightPad = (rows: number[][], value: number) => {
  const w = Math.max(...rows.map((r) => r.length));
  return rows.map((r) => [...r, ...new Array<number>(w - r.length).fill(value)]);
};
const leftPad = (rows: number[][], value: number) => {
  const w = Math.max(...rows.map((r) => r.length));
  return rows.map((r) => [...new Array<number>(w - r.length).fill(value), ...r]);
};

/** TRL's advantages: (r − group mean) / (Bessel std + 1e-4), groups of G consecutive rows. */
function trlAdvantages(r: number[], G: number): number[] {
  return r.map((x, i) => {
    const g = r.slice(Math.floor(i / G) * G, Math.floor(i / G) * G + G);
    const mean = g.reduce((a, b) => a + b, 0) / G;
    const std = Math.sqrt(g.reduce((a, b) => a + (b - mean) ** 2, 0) / (G - 1));
    return (x - mean) / (std + 1e-4);
  });
}

const PROMPTS = [[IM_START, 872, NL, 3838, 374, 220, 18, 353, 220, 19, 30], [IM_START, 872, NL, 3838, 374]];
const ANSWER = (n: number, k = 0) => [...Array.from({ length: n - 1 }, (_, i) => 1000 + k + i), EOS];
const REWARDS = [1, 0, 0.5, 1];

/** The dict GRPOTrainer returns for 4 samples (G = 2), padded as TRL pads it, with `meta` as the metadata. */
function trlDict(meta: Record<string, unknown>, o: { completionMask?: number[][] } = {}): Uint8Array {
  const prompts = [PROMPTS[0], PROMPTS[0], PROMPTS[1], PROMPTS[1]];
  const completions = [ANSWER(5), ANSWER(9, 10), ANSWER(3, 20), ANSWER(7, 30)];
  const tensors = {
    prompt_ids: i64(leftPad(prompts, PAD)),
    prompt_mask: i64(leftPad(prompts.map((p) => ones(p.length)), 0)),
    completion_ids: i64(rightPad(completions, PAD)),
    completion_mask: i64(rightPad(o.completionMask ?? completions.map((c) => ones(c.length)), 0)),
    advantages: f32(trlAdvantages(REWARDS, 2)),
  };
  const metadata = Object.fromEntries(Object.entries({ config: { num_generations: 2, loss_type: 'dapo', scale_rewards: 'group' }, rewards: REWARDS, ...meta }).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
  return writeSafeTensors(tensors, metadata);
}

/** The Doctor as `grpo-studio doctor` and the page run it: the batch, doctorOptions with the reader's inferred ids. */
const doctor = (r: ImportResult) => diagnose(r.batch, doctorOptions(r.batch, undefined, r.inferred));
const errors = (r: ImportResult) => doctor(r).findings.filter((f) => f.severity === 'error').map((f) => `${f.rule}: ${f.message}`);

describe('TRL: the ids in each carrier a dump may hold them in', () => {
  const tok = { pad_token_id: PAD, eos_token_id: EOS, padding_side: 'left', name_or_path: 'Qwen/Qwen3-0.6B' };
  const cases: [string, Record<string, unknown>][] = [
    ["the docs' hook (top-level keys, str())", { pad_token_id: String(PAD), eos_token_id: String(EOS) }],
    ['processing_class (the tokenizer GRPOTrainer pads with)', { processing_class: tok }],
    ['processing_class.tokenizer (a processor)', { processing_class: { tokenizer: tok, image_processor: {} } }],
    ['tokenizer', { tokenizer: tok }],
    ['generation_config (GenerationConfig.to_dict(): an EOS list)', { generation_config: { pad_token_id: PAD, eos_token_id: [EOS, PAD], do_sample: true } }],
    ["args.to_dict()'s generation_kwargs", { config: { num_generations: 2, loss_type: 'dapo', scale_rewards: 'group', generation_kwargs: { pad_token_id: PAD, eos_token_id: EOS } } }],
  ];
  for (const [where, meta] of cases) {
    it(`${where}: read, nothing inferred, no error finding`, () => {
      const r = readAnyBatch(trlDict(meta), 'trl.safetensors');
      expect(r.batch.pad_token_id).toBe(PAD);
      expect(r.batch.eos_token_ids[0]).toBe(EOS);
      expect(r.inferred).toBeUndefined();
      expect(r.unknownKeys).toEqual([]);
      expect(errors(r)).toEqual([]);
    });
  }

  it("run.eos_token_id, the tokenizer's own EOS (mask_truncated_completions counts only it): from the hook's key or the tokenizer, never from generation_config's list", () => {
    const cases: [Record<string, unknown>, number | undefined][] = [
      [{ pad_token_id: String(PAD), eos_token_id: String(EOS) }, EOS],
      [{ processing_class: { tokenizer: tok } }, EOS],
      [{ tokenizer: tok, generation_config: { eos_token_id: [PAD, EOS] } }, EOS],
      [{ generation_config: { pad_token_id: PAD, eos_token_id: [EOS, PAD] } }, undefined],
      [{ processing_class: tok, run: { eos_token_id: PAD } }, PAD],
    ];
    for (const [meta, eos] of cases) {
      const r = readAnyBatch(trlDict(meta), 'trl.safetensors');
      expect(r.batch.run?.eos_token_id, JSON.stringify(meta)).toBe(eos);
    }
  });

  it('carriers that disagree: the first (the hook, then the tokenizer) is kept and the other named', () => {
    const r = readAnyBatch(trlDict({ processing_class: tok, generation_config: { pad_token_id: 0, eos_token_id: EOS } }), 'trl.safetensors');
    expect(r.batch.pad_token_id).toBe(PAD);
    expect(r.notes).toContain(`generation_config.pad_token_id = 0 differs from processing_class.pad_token_id = ${PAD}: ${PAD} kept`);
  });

  it('TrainerState from a `state` object (TrainerState as saved): global_step and max_steps, the rest noted', () => {
    const r = readAnyBatch(trlDict({ processing_class: tok, state: { global_step: 7, max_steps: 40, epoch: 0.5, log_history: [] } }), 'trl.safetensors');
    expect(r.batch.run).toMatchObject({ global_step: 7, max_steps: 40 });
    expect(r.notes.join('\n')).toMatch(/state: 2 other TrainerState field\(s\) not used \(epoch, log_history\)/);
    expect(r.unknownKeys).toEqual([]);
  });

  it('"None" (str() of a tokenizer without a pad) is no id: the pad is then inferred from prompt_mask', () => {
    const r = readAnyBatch(trlDict({ pad_token_id: 'None', eos_token_id: String(EOS) }), 'trl.safetensors');
    expect(r.batch.pad_token_id).toBe(PAD);
    expect(r.inferred).toEqual({ pad_token_id: 'inferred from the 12 masked-out positions of prompt_mask, all id 151643' });
  });
});

describe('no ids anywhere: inferred exactly or named as a stand-in', () => {
  it('pad from the masked-out positions of prompt_mask (all one id); EOS from the trained spans; a clean dump has no error', () => {
    const r = readAnyBatch(trlDict({}), 'trl.safetensors');
    expect(r.batch.pad_token_id).toBe(PAD); // was EOS (151645) with "the rows carry no padding to check"
    expect(r.batch.eos_token_ids).toEqual([EOS]);
    expect(r.inferred).toEqual({
      pad_token_id: 'inferred from the 12 masked-out positions of prompt_mask, all id 151643',
      eos_token_ids: 'inferred from the last trained token of 4 of 4 trained spans (assistant turns and completions)',
    });
    expect(errors(r)).toEqual([]);
  });

  it('a planted mask over the pads on inferred ids: a warning naming the inference, never an error', () => {
    // Row 0's completion_mask covers 2 of its pads (seed 000's padded form).
    const masks = [ones(7), ones(9), ones(3), ones(7)];
    const r = readAnyBatch(trlDict({}, { completionMask: masks }), 'trl.safetensors');
    const report = doctor(r);
    const covers = report.findings.filter((f) => f.rule === 'mask-covers-padding');
    expect(covers.map((f) => [f.sample, f.severity])).toEqual([[0, 'warning']]);
    expect(covers[0].message).toMatch(/not certain: pad id 151643 inferred \(inferred from the 12 masked-out positions of prompt_mask, all id 151643\)/);
    expect(report.counts.error).toBe(0);
    // The same dump with the hook's ids: the finding is an error, as before.
    const sure = readAnyBatch(trlDict({ pad_token_id: String(PAD), eos_token_id: String(EOS) }, { completionMask: masks }), 'trl.safetensors');
    expect(doctor(sure).findings.filter((f) => f.rule === 'mask-covers-padding').map((f) => f.severity)).toEqual(['error']);
  });

  it('masked-out positions holding several ids: no pad inferred from them, the EOS stands in and is named so', () => {
    const bytes = writeSafeTensors({
      prompt_ids: i64([[PAD, 11, 12], [0, 21, 22]]),
      prompt_mask: i64([[0, 1, 1], [0, 1, 1]]),
      completion_ids: i64([[40, EOS], [41, EOS]]),
      completion_mask: i64([[1, 1], [1, 1]]),
    }, { config: JSON.stringify({ num_generations: 2 }) });
    const r = readAnyBatch(bytes, 'trl.safetensors');
    expect(r.batch.pad_token_id).toBe(EOS);
    expect(r.inferred?.pad_token_id).toBe(`inferred as the EOS id, the masked-out positions of prompt_mask hold several ids (${PAD}, 0), so none is the pad`);
    expect(doctor(r).counts.error).toBe(0); // prompt-padding-side on a stand-in pad: a warning
  });

  it('mergeImports keeps what each file inferred', () => {
    const a = readAnyBatch(trlDict({ rank: '0', num_processes: '2' }), 'rank0.safetensors');
    const b = readAnyBatch(trlDict({ rank: '1', num_processes: '2' }), 'rank1.safetensors');
    expect(mergeImports([{ name: 'rank0.safetensors', result: a }, { name: 'rank1.safetensors', result: b }]).inferred).toEqual(a.inferred);
  });
});

describe('a carrier id out of range is a refusal naming the key', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['pad_token_id 2^32', { pad_token_id: String(2 ** 32), eos_token_id: String(EOS) }, 'trl.safetensors: __metadata__ pad_token_id = 4294967296 is not a token id (an integer in [0, 2^31))'],
    ['generation_config.pad_token_id 2^32', { generation_config: { pad_token_id: 2 ** 32, eos_token_id: EOS } }, 'trl.safetensors: __metadata__ generation_config.pad_token_id = 4294967296 is not a token id (an integer in [0, 2^31))'],
    ['eos_token_id −1', { pad_token_id: String(PAD), eos_token_id: '-1' }, 'trl.safetensors: __metadata__ eos_token_id = -1 is not a token id (an integer in [0, 2^31), or a list of them)'],
    ['processing_class.eos_token_id 1.5 in a list', { processing_class: { pad_token_id: PAD, eos_token_id: [EOS, 1.5] } }, 'trl.safetensors: __metadata__ processing_class.eos_token_id = [151645,1.5] is not a token id (an integer in [0, 2^31), or a list of them)'],
  ];
  for (const [what, meta, line] of cases) {
    it(what, () => expect(() => readAnyBatch(trlDict(meta), 'trl.safetensors')).toThrow(line));
  }

  it('verl meta_info.pad_token_id 2^32', () => {
    const bytes = verlDump({ meta_info: { pad_token_id: 2 ** 32, eos_token_id: EOS } });
    expect(() => readAnyBatch(bytes, 'verl.safetensors')).toThrow('verl.safetensors: __metadata__ meta_info.pad_token_id = 4294967296 is not a token id (an integer in [0, 2^31))');
  });
});

/** A clean verl DataProto (2 groups of 2, rows interleaved as _balance_batch leaves them), prompts left-padded with <|endoftext|>. */
function verlDump(meta: Record<string, unknown>, extra: Parameters<typeof writeSafeTensors>[0] = {}, drop: string[] = []): Uint8Array {
  const prompts = leftPad([PROMPTS[0], PROMPTS[1], PROMPTS[0], PROMPTS[1]], PAD);
  const promptMask = leftPad([PROMPTS[0], PROMPTS[1], PROMPTS[0], PROMPTS[1]].map((p) => ones(p.length)), 0);
  const responses = [ANSWER(5), ANSWER(3, 20), ANSWER(9, 10), ANSWER(7, 30)];
  const respMask = rightPad(responses.map((r) => ones(r.length)), 0);
  const rewards = [1, 0.5, 0, 1];
  // GRPO outcome advantage: (r − mean) / (std + 1e-6) per uid, times response_mask.
  const uid = ['a', 'b', 'a', 'b'];
  const adv = rewards.map((x, i) => {
    const g = rewards.filter((_, j) => uid[j] === uid[i]);
    const mean = (g[0] + g[1]) / 2;
    return (x - mean) / (Math.sqrt(((g[0] - mean) ** 2 + (g[1] - mean) ** 2)) + 1e-6);
  });
  const f32rows = (rows: number[][]) => ({ dtype: 'F32' as const, shape: [rows.length, rows[0].length], data: Float32Array.from(rows.flat()) });
  const tensors: Parameters<typeof writeSafeTensors>[0] = {
    prompts: i64(prompts),
    responses: i64(rightPad(responses, PAD)),
    attention_mask: i64(promptMask.map((m, b) => [...m, ...respMask[b]])),
    response_mask: i64(respMask),
    advantages: f32rows(respMask.map((m, b) => m.map((x) => x * adv[b]))),
    token_level_rewards: f32rows(respMask.map((m, b) => m.map((_, t) => (t === 0 ? rewards[b] : 0)))),
    ...extra,
  };
  for (const k of drop) delete tensors[k];
  return writeSafeTensors(tensors, Object.fromEntries(Object.entries({ uid, config: { rollout_n: 2 }, ...meta }).map(([k, v]) => [k, JSON.stringify(v)])));
}

describe('verl: DataProto.meta_info carries the ids', () => {
  it('clean dump, meta_info pad / EOS, left-padded prompts: no prompt-padding-side, no error', () => {
    const r = readAnyBatch(verlDump({ meta_info: { eos_token_id: EOS, pad_token_id: PAD, temperature: 1.0 } }), 'verl.safetensors');
    expect(r.batch.pad_token_id).toBe(PAD);
    expect(r.inferred).toBeUndefined();
    const report = doctor(r);
    expect(report.findings.filter((f) => f.rule === 'prompt-padding-side')).toEqual([]);
    expect(errors(r)).toEqual([]);
  });
  it('no ids at all: the pad from attention_mask over the prompts, exactly', () => {
    const r = readAnyBatch(verlDump({}), 'verl.safetensors');
    expect(r.batch.pad_token_id).toBe(PAD);
    expect(r.inferred?.pad_token_id).toBe('inferred from the 12 masked-out positions of attention_mask[:, :P], all id 151643');
    expect(errors(r)).toEqual([]);
  });
});

describe('verl: rollout_is_weights say the run weighted its loss by rollout IS', () => {
  const weights = (cols: number) => ({ dtype: 'F32' as const, shape: [4, cols], data: new Float32Array(4 * cols).fill(1) });
  const cols = (readAnyBatch(verlDump({}), 'verl.safetensors').batch.completion_ids[0] as number[]).length;
  it.each([
    ['left out', { rollout_n: 2 }, /left out \(null, the default\)/],
    ['null', { rollout_n: 2, rollout_is: null }, /config rollout_is is null:/],
    ['null in the nested config', { rollout_n: 2, algorithm: { rollout_correction: { rollout_is: null } } }, /config rollout_is is null:/],
  ])('rollout_is %s: one line naming the row, never a step without the weights', (_what, config, message) => {
    const bytes = verlDump({ config }, { rollout_is_weights: weights(cols) });
    expect(() => readAnyBatch(bytes, 'verl.safetensors')).toThrow(/^verl\.safetensors: rollout_is_weights is present, so verl weighted this batch's loss by rollout IS weights, but config rollout_is is .*give algorithm\.rollout_correction\.rollout_is/);
    expect(() => readAnyBatch(bytes, 'verl.safetensors')).toThrow(message);
  });
  it('rollout_is set: read, with a note that the step recomputes them', () => {
    // old_log_probs = rollout_log_probs: verl's token weights exp(0) = 1 on every response token.
    const logps = { dtype: 'F32' as const, shape: [4, cols], data: new Float32Array(4 * cols).fill(-0.5) };
    const r = readAnyBatch(verlDump({ config: { rollout_n: 2, rollout_is: 'token', rollout_is_threshold: 2 } }, { rollout_is_weights: weights(cols), old_log_probs: logps, rollout_log_probs: logps }), 'verl.safetensors');
    expect(r.batch.config).toMatchObject({ rollout_is: 'token' });
    expect(r.notes).toContain('rollout_is_weights: not carried; the step recomputes them from old_log_probs and rollout_log_probs under rollout_is token, as verl does');
    expect(r.unknownKeys).not.toContain('rollout_is_weights');
  });
  it('a dump without them reads as before', () => {
    expect(() => readAnyBatch(verlDump({ config: { rollout_n: 2 } }), 'verl.safetensors')).not.toThrow();
  });
});

describe("verl: the batch's completion_mask is what verl's forward attends, response_mask inside it", () => {
  // Row 0's last response token attended but out of the loss (a rollout cut inside a tool response).
  const clean = readAnyBatch(verlDump({}), 'verl.safetensors').batch.completion_mask as number[][];
  const last = clean[0].lastIndexOf(1);
  const cut = clean.map((r, b) => (b === 0 ? r.map((x, t) => (t === last ? 0 : x)) : r));
  const config = (dynamic: boolean) => ({ config: { rollout_n: 2, use_dynamic_bsz: dynamic } });
  it('an attended tail past the last trained token stays in the completion, out of the loss (tool_mask 0): the same batch with or without use_dynamic_bsz', () => {
    for (const dynamic of [false, true]) {
      const r = readAnyBatch(verlDump(config(dynamic), { response_mask: i64(cut) }), 'verl.safetensors');
      expect(r.batch.completion_mask).toEqual(clean);
      expect(r.batch.tool_mask![0]).toEqual(clean[0].map((_, t) => (t === last ? 0 : 1)));
      expect(r.batch.tool_mask!.slice(1).every((row) => row.every((x) => x === 1))).toBe(true);
      expect(errors(r)).toEqual([]);
    }
  });
  it("a trained token verl's forward does not attend is refused, naming sample and position", () => {
    const holes = clean.map((r, b) => (b === 1 ? r.map((x, t) => (t === 0 ? 0 : x)) : r));
    const prompts = readAnyBatch(verlDump({}), 'verl.safetensors').batch.prompt_mask as number[][];
    expect(() => readAnyBatch(verlDump({}, { attention_mask: i64(prompts.map((m, b) => [...m, ...holes[b]])) }), 'verl.safetensors')).toThrow(/^verl\.safetensors: response_mask trains sample 1, response position 0, where attention_mask is 0/);
  });
  it('a dump without attention_mask is refused under use_dynamic_bsz (the prompts\' left padding would count)', () => {
    expect(() => readAnyBatch(verlDump(config(true), {}, ['attention_mask']), 'verl.safetensors')).toThrow(/^verl\.safetensors: no attention_mask, and use_dynamic_bsz packs micro-batches by attention_mask\.sum\(-1\)/);
    expect(() => readAnyBatch(verlDump(config(false), {}, ['attention_mask']), 'verl.safetensors')).not.toThrow();
  });
});

describe('prime-rl: a clean multi-turn export', () => {
  /** One record: a prompt, then [tokens, trained] spans (assistant turns 1, tool / user turns 0). */
  const rec = (parts: [number[], 0 | 1][]) => {
    const prompt = [IM_START, 872, NL, 100, 101, EOS, NL, IM_START, 77091, NL];
    const token_ids = [...prompt, ...parts.flatMap(([t]) => t)];
    const loss_mask = [...prompt.map(() => false), ...parts.flatMap(([t, m]) => t.map(() => m === 1))];
    return JSON.stringify({ schema_version: 1, step: 1, rank: 0, token_ids, loss_mask, advantages: token_ids.map(() => 0.5) });
  };
  // The tool result as the chat template renders it between two assistant turns.
  const tool = [NL, IM_START, 872, NL, 151665, 16, 17, 151666, EOS, NL, IM_START, 77091, NL];
  it("turns cut by the length limit do not decide the EOS: every finished turn's <|im_end|> does; no error", () => {
    const text = [
      rec([[[151667, 271, 7, 8, EOS], 1], [tool, 0], [[9, 271, 10, 271, 271], 1]]), // final turn cut after "\n\n\n\n"
      rec([[[151667, 271, 7, 8, EOS], 1], [tool, 0], [[9, 11, 15], 1]]), // cut
      rec([[[151667, 271, 7, 8, EOS], 1], [tool, 0], [[12, 13, EOS], 1]]),
      rec([[[151667, 271, 13, 14, EOS], 1], [tool, 0], [[12, 13, 16], 1]]), // cut
    ].join('\n');
    const r = readAnyBatch(new TextEncoder().encode(text), 'rank_0.jsonl');
    // Before: EOS "inferred 271, the last trained token of 1 of 4 completions" (a tie of cut turns), pad = 271, and
    // mask-covers-padding as an error on the "\n\n\n\n" row.
    expect(r.batch.eos_token_ids).toEqual([EOS]);
    expect(r.inferred?.eos_token_ids).toBe('inferred from the last trained token of 5 of 8 trained spans (assistant turns and completions)');
    expect(r.inferred?.pad_token_id).toBe('inferred as the EOS id, the writer trims padding, so the rows carry none to check');
    expect(errors(r)).toEqual([]);
  });
});
