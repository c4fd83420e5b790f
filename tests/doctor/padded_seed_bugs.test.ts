// The seed reports' bugs in their padded form, as TRL's GRPOTrainer holds them (huggingface/trl
// trl/trainer/grpo_trainer.py, _generate_and_score_completions): completion_ids right-padded with the pad id,
// completion_mask with 0, tool_mask with 1, sampling log-probs with 0, prompts left-padded. Each dump is written
// as the user's hook saves that dict (safetensors, TRL key names, real Qwen3 ids) and read back by the TRL
// reader, which keeps the rows padded — so the Doctor sees the (B, C) tensors, not the per-row lists.
import { describe, expect, it } from 'vitest';
import { diagnose, type Finding } from '../../src/doctor/index.ts';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { writeSafeTensors } from '../../src/io/safetensors.ts';

// Qwen3: <|endoftext|> is the pad token, <|im_end|> ends an assistant turn (EOS), <|im_start|> opens one.
const PAD = 151643;
const EOS = 151645;
const IM_START = 151644;

/** Seed 003 (TRL #5145): the 47 completion ids of the spaced-out tool call, as the model generated them. */
const TURN_47 = [151657, 198, 515, 6656, 330, 606, 1, 286, 549, 338, 330, 64648, 22785, 756, 6656, 330, 16370, 1, 256, 549, 338, 341, 6374, 330, 64, 1, 256, 549, 220, 220, 18, 345, 6374, 330, 65, 1, 256, 549, 220, 220, 19, 198, 4569, 456, 532, 151658, 151645];
/** … and re-tokenized from the parsed tool call by the chat template: 41 ids (same ending). */
const TURN_41 = [...TURN_47.slice(0, 39), 151658, 151645];
/** The tool result as _get_tool_suffix_ids renders it after the EOS: \n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n<|im_start|>assistant\n */
const TOOL_SUFFIX = [198, IM_START, 872, 198, 151665, 198, 16, 17, 198, 151666, EOS, 198, IM_START, 77091, 198];
/** The post-tool assistant turn: "The answer is 12." */
const POST = [785, 4226, 374, 220, 16, 17, 13, EOS];
const ANSWER = (n: number) => [...Array.from({ length: n - 1 }, (_, i) => 1000 + i), EOS];

const ones = (n: number) => new Array<number>(n).fill(1);
const zeros = (n: number) => new Array<number>(n).fill(0);
const rightPad = (rows: number[][], value: number, width = Math.max(...rows.map((r) => r.length))) => rows.map((r) => [...r, ...new Array<number>(width - r.length).fill(value)]);
const i64 = (rows: number[][]) => ({ dtype: 'I64' as const, shape: [rows.length, rows[0].length], data: BigInt64Array.from(rows.flat(), (x) => BigInt(x)) });
const f32 = (rows: number[][]) => ({ dtype: 'F32' as const, shape: [rows.length, rows[0].length], data: Float32Array.from(rows.flat()) });

interface TrlRows {
  completions: number[][];
  /** completion_mask rows before padding (TRL: ones over each completion). */
  masks?: number[][];
  /** tool_mask rows before padding. */
  tools?: number[][];
  pad?: number;
  /** Leave pad_token_id out of the metadata: the reader infers it (and says so in its notes). */
  noPad?: boolean;
  rewards?: number[];
  old?: number[][];
  sampling?: number[][];
  G?: number;
}

/** The dict as TRL pads it, saved with safetensors and read back by the TRL reader. */
function trlDump(r: TrlRows) {
  const pad = r.pad ?? PAD;
  const B = r.completions.length;
  const prompts = Array.from({ length: B }, (_, b) => (b % 2 ? [IM_START, 872, 198, 3838, 374] : [IM_START, 872, 198, 3838, 374, 220, 18, 353, 220, 19, 30]));
  const P = Math.max(...prompts.map((p) => p.length));
  const tensors: Parameters<typeof writeSafeTensors>[0] = {
    prompt_ids: i64(prompts.map((p) => [...new Array<number>(P - p.length).fill(pad), ...p])),
    prompt_mask: i64(prompts.map((p) => [...zeros(P - p.length), ...ones(p.length)])),
    completion_ids: i64(rightPad(r.completions, pad)),
    completion_mask: i64(rightPad(r.masks ?? r.completions.map((c) => ones(c.length)), 0)),
  };
  if (r.tools) tensors.tool_mask = i64(rightPad(r.tools, 1));
  if (r.old) tensors.old_per_token_logps = f32(rightPad(r.old, 0));
  if (r.sampling) tensors.sampling_per_token_logps = f32(rightPad(r.sampling, 0));
  const meta: Record<string, string> = { config: JSON.stringify({ num_generations: r.G ?? 2, loss_type: 'dapo' }), eos_token_id: String(EOS) };
  if (!r.noPad) meta.pad_token_id = String(pad);
  if (r.rewards) meta.rewards = JSON.stringify(r.rewards);
  return readAnyBatch(writeSafeTensors(tensors, meta), 'trl_dump.safetensors');
}

const of = (fs: Finding[], rule: string) => fs.filter((f) => f.rule === rule);
const summary = (fs: Finding[]) => fs.map((f) => [f.severity, f.sample, f.field ?? 'completion_ids', f.span]);

describe('seed 003 (TRL #5145): tool_mask built for the 47-token turn, completion_ids re-tokenized to 41, padded', () => {
  // Row 0 is the bug; rows 1–3 are clean (row 1 a clean tool call, rows 2–3 plain answers, row 3 the longest).
  const clean = [[...TURN_41, ...TOOL_SUFFIX, ...POST], ANSWER(12), ANSWER(70)];
  const cleanTools = [[...ones(41), ...zeros(TOOL_SUFFIX.length), ...ones(POST.length)], ones(12), ones(70)];

  it("TRL's own loop: the 0s start 6 tokens into the tool output — same length, found by the row's shift", () => {
    // tool_mask += [0] · (len(pct) − prompt − 47) + [1] · post: 15 − 6 zeros, after 47 ones.
    const bad = [...ones(47), ...zeros(TOOL_SUFFIX.length - 6), ...ones(POST.length)];
    const { batch } = trlDump({ completions: [clean[0], ...clean], tools: [bad, ...cleanTools], G: 2 });
    expect(batch.tool_mask![0]).toHaveLength(batch.completion_ids[0].length); // equal widths: nothing to compare by length
    const fs = of(diagnose(batch).findings, 'mask-length-mismatch');
    expect(summary(fs)).toEqual([['error', 0, 'tool_mask', [41, 47]]]);
    expect(fs[0].message).toMatch(/^sample 0: tool_mask's tool-output 0s start at 47, 6 position\(s\) after the assistant turn's EOS at 40: the turn has 41 tokens in completion_ids but tool_mask was built for 47/);
  });

  it("the tool output ends the completion: the mask's 0s run past the completion's end inside the padded tensor", () => {
    // tool_mask += [0] · len(suffix) after the 47 ones; completion_ids = 41 + suffix, nothing after (cut at max_completion_length).
    const ids = [...TURN_41, ...TOOL_SUFFIX];
    const bad = [...ones(47), ...zeros(TOOL_SUFFIX.length)];
    const { batch } = trlDump({ completions: [ids, ...clean], tools: [bad, ...cleanTools] });
    const C = batch.completion_ids[0].length;
    expect(batch.tool_mask![0]).toHaveLength(C); // row 3 (70 tokens) sets the width: lengths agree
    const fs = of(diagnose(batch).findings, 'mask-length-mismatch');
    expect(summary(fs)).toEqual([['error', 0, 'tool_mask', [56, 62]]]);
    expect(fs[0].message).toMatch(/^sample 0: tool_mask runs past the completion's end — the completion has 56 real tokens \(completion_mask's last 1 at 55\) but tool_mask's effective length is 62 \(6 value\(s\) 0 ≠ 1, TRL's pad, at positions 56…61\)/);
    expect(fs[0].message).toMatch(/also tool_mask's tool-output 0s start at 47/);
  });

  it('the buggy row is the longest: tensors of different widths (TRL crashes), every row reported, row 0 told apart', () => {
    const ids = [...TURN_41, ...TOOL_SUFFIX];
    const bad = [...ones(47), ...zeros(TOOL_SUFFIX.length)];
    const { batch } = trlDump({ completions: [ids, ANSWER(12), ANSWER(20), ANSWER(9)], tools: [bad, ones(12), ones(20), ones(9)] });
    const fs = of(diagnose(batch).findings, 'mask-length-mismatch');
    expect(fs.map((f) => [f.sample, f.field])).toEqual([[0, 'tool_mask'], [1, 'tool_mask'], [2, 'tool_mask'], [3, 'tool_mask']]);
    expect(fs[1].message).toBe('sample 1: tool_mask has 62 entries, completion_ids has 56 (6 extra)');
    expect(fs[0].message).toMatch(/^sample 0: tool_mask has 62 entries, completion_ids has 56 \(6 extra\); tool_mask runs past the completion's end — the completion has 56 real tokens .* effective length is 62/);
  });

  it('limit: a tool result shorter than the shortfall (no 0 left in tool_mask, its extra values are 1 = the pad) is invisible once padded', () => {
    const suffix = TOOL_SUFFIX.slice(0, 3);
    const bad = [...ones(47), ...ones(POST.length)]; // [0] · (3 − 6) = [] — the mask is 3 longer, all 1
    const { batch } = trlDump({ completions: [[...TURN_41, ...suffix, ...POST], ...clean], tools: [bad, ...cleanTools] });
    expect(of(diagnose(batch).findings, 'mask-length-mismatch')).toEqual([]);
  });

  it('a clean padded TRL batch — tool_mask padded with 1, a masked truncated row — has no finding of either rule and no error', () => {
    const truncated = ANSWER(70).slice(0, 70).map((x) => (x === EOS ? 1099 : x)); // no EOS: mask_truncated_completions
    for (const pad of [PAD, EOS]) {
      const { batch } = trlDump({
        pad,
        completions: [clean[0], clean[0], truncated, ANSWER(12)],
        masks: [ones(64), ones(64), zeros(70), ones(12)],
        // TRL multiplies tool_mask by ~is_truncated too: the truncated row's tool_mask is all 0, padding included.
        tools: [cleanTools[0], cleanTools[0], zeros(70), ones(12)],
        rewards: [1, 0, 0, 1],
      });
      const report = diagnose(batch);
      expect(of(report.findings, 'mask-length-mismatch')).toEqual([]);
      expect(of(report.findings, 'mask-covers-padding')).toEqual([]);
      expect(report.findings.filter((f) => f.severity === 'error')).toEqual([]);
    }
  });

  it('a row masked out whole by an older TRL (completion_mask 0, tool_mask kept): the end is read from the pads; an inferred pad id makes it a warning', () => {
    // The tool output was cut by max_completion_length in completion_ids (9 of 15 tokens) but not in tool_mask.
    const ids = [...TURN_41, ...TOOL_SUFFIX.slice(0, 9)];
    const bad = [...ones(41), ...zeros(TOOL_SUFFIX.length)];
    const rows = { completions: [ids, ...clean], masks: [zeros(50), ones(64), ones(12), ones(70)], tools: [bad, ...cleanTools] };
    const known = of(diagnose(trlDump(rows).batch).findings, 'mask-length-mismatch');
    expect(summary(known)).toEqual([['error', 0, 'tool_mask', [50, 56]]]);
    expect(known[0].message).toMatch(/the completion has 50 real tokens \(completion_mask has no 1, so read from the ids: up to its trailing pad ids \(pad id 151643\)\) but tool_mask's effective length is 56/);
    const r = trlDump({ ...rows, pad: EOS, noPad: true }); // padded with EOS, the pad id left out of the file
    const note = r.notes.find((n) => n.startsWith('no pad id'))!;
    expect(r.batch.pad_token_id).toBe(EOS); // inferred: the EOS id
    const tool = of(diagnose(r.batch, { inferred: { pad_token_id: note } }).findings, 'mask-length-mismatch');
    expect(tool.map((f) => f.severity)).toEqual(['warning']);
    expect(tool[0].message).toMatch(/not certain: pad id 151645 inferred \(no pad id in the file/);
  });
});

describe('seed 000 (R1-distill mask = ids + 2, the longest + 1), padded by TRL-style code', () => {
  // ids 6, 9, 5 tokens ending in EOS, and a 12-token row cut at max_completion_length; masks 8, 11, 7 and 13.
  const completions = [ANSWER(6), ANSWER(9), ANSWER(5), Array.from({ length: 12 }, (_, i) => 2000 + i)];
  const masks = [ones(8), ones(11), ones(7), ones(13)];

  for (const pad of [PAD, EOS]) {
    it(`completion_mask (B, 13) vs completion_ids (B, 12): every row's widths, and the 1s over the pads (pad ${pad === EOS ? '= EOS' : '≠ EOS'})`, () => {
      const { batch } = trlDump({ pad, completions, masks });
      const report = diagnose(batch);
      const widths = of(report.findings, 'mask-length-mismatch');
      expect(widths.map((f) => f.sample)).toEqual([0, 1, 2, 3]);
      expect(widths[0].message).toBe('sample 0: completion_mask has 13 entries, completion_ids has 12 (1 extra)');
      const covers = of(report.findings, 'mask-covers-padding');
      expect(summary(covers)).toEqual([['error', 0, 'completion_ids', [6, 8]], ['error', 1, 'completion_ids', [9, 11]], ['error', 2, 'completion_ids', [5, 7]]]);
      expect(covers[0].message).toMatch(/^sample 0: completion_mask is 1 on 2 pad position\(s\) past the completion's real end, first at 6 — the completion has 6 real tokens, the mask covers 8/);
    });
  }

  it('cut to the ids width (same shapes, no crash): the rows are found by the 1s over the pads, with both lengths', () => {
    const { batch } = trlDump({ completions, masks });
    const report = diagnose({ ...batch, completion_mask: batch.completion_mask.map((m) => m.slice(0, 12)) });
    expect(of(report.findings, 'mask-length-mismatch')).toEqual([]);
    const covers = of(report.findings, 'mask-covers-padding');
    expect(covers.map((f) => f.sample)).toEqual([0, 1, 2]);
    expect(covers[1].message).toMatch(/the completion has 9 real tokens, the mask covers 11 \(its last 1 at 10; pad id 151643\)/);
  });

  it('pad id inferred (not in the dump): the 1s over the pads are a warning naming the inference, never an error', () => {
    const r = trlDump({ completions, masks, pad: EOS, noPad: true }); // padded with EOS, the pad id left out of the file
    // The importer says what it inferred (ImportResult.inferred): the pad id from prompt_mask's masked-out positions.
    expect(r.inferred?.pad_token_id).toMatch(/^inferred from the \d+ masked-out positions of prompt_mask, all id 151645$/);
    const b = { ...r.batch, completion_mask: r.batch.completion_mask.map((m) => m.slice(0, 12)) };
    const covers = of(diagnose(b, { inferred: r.inferred }).findings, 'mask-covers-padding');
    expect(covers.map((f) => [f.sample, f.severity])).toEqual([[0, 'warning'], [1, 'warning'], [2, 'warning']]);
    expect(covers[0].message).toMatch(/not certain: pad id 151645 inferred \(inferred from the \d+ masked-out positions of prompt_mask, all id 151645\)/);
  });
});

describe('seeds 001, 002, 004 in the padded form', () => {
  it('001 (loss 0): every group has equal rewards → zero-std-group; the padding adds nothing', () => {
    const { batch } = trlDump({ completions: [ANSWER(5), ANSWER(9), ANSWER(3), ANSWER(7)], rewards: [0.5, 0.5, 1, 1] });
    const report = diagnose(batch);
    expect(of(report.findings, 'zero-std-group').map((f) => f.severity)).toEqual(['error']);
    expect(report.findings.filter((f) => f.rule.startsWith('mask-'))).toEqual([]);
  });

  it('002 bug #5 (mask placed as if the completion were left-padded), pad = EOS (Llama-3 style): the row, its length and the mask’s', () => {
    const completions = [ANSWER(4), ANSWER(9), ANSWER(6), ANSWER(9)];
    // comp_mask = 1 on the last len positions of the padded row: the pads, not the head of the completion.
    const masks = completions.map((c) => [...zeros(9 - c.length), ...ones(c.length)]);
    const { batch } = trlDump({ pad: EOS, completions, masks });
    const report = diagnose(batch);
    expect(of(report.findings, 'pad-equals-eos').map((f) => f.severity)).toEqual(['info']);
    const covers = of(report.findings, 'mask-covers-padding');
    expect(summary(covers)).toEqual([['error', 0, 'completion_ids', [5, 9]], ['error', 2, 'completion_ids', [6, 9]]]);
    expect(covers[0].message).toMatch(/the completion has 4 real tokens, the mask covers 9/);
  });

  it('004 (log-probs gathered on the wrong axis): the row whose old log-probs disagree with the sampler; pads (0 in both) are not compared', () => {
    const completions = [ANSWER(5), ANSWER(9), ANSWER(3), ANSWER(7)];
    const sampling = completions.map((c) => c.map((_, t) => -0.5 - 0.01 * t));
    const old = sampling.map((r, b) => (b === 1 ? r.map(() => -7.25) : r)); // every token scored from position 0's logits
    const { batch } = trlDump({ completions, old, sampling });
    const fs = of(diagnose(batch).findings, 'logprob-mismatch');
    expect(fs.map((f) => f.sample)).toEqual([1]);
    expect(diagnose(batch).findings.filter((f) => f.rule.startsWith('mask-'))).toEqual([]);
  });
});
