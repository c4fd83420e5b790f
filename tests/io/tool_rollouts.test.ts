// One multi-turn tool-call batch written in the six layouts the studio reads, each as its trainer's own writer lays
// it out (TRL's _generate_and_score_completions dict, verl's agent-loop DataProto, OpenRLHF's agent Experience —
// openrlhf/utils/agent.py: action tokens then the environment's feedback —, prime-rl's token export, NeMo-RL's
// train_data jsonl, slime's rollout dump). Every reader must give the same trained tokens, and the Doctor the same
// verdict: a rollout that ends on a tool result is no text after an EOS; a tool mask whose 0s start one token late
// (the first tool token trained) or one token early (the turn's own EOS untrained) is named where the layout is
// known to put each tool result right after its turn's EOS (TRL, OpenRLHF: an error; a batch naming no trainer: a
// warning) and not for verl, whose sglang multi-turn rows train the template's newline after the EOS.
import { describe, expect, it } from 'vitest';
import { diagnose } from '../../src/doctor/index.ts';
import { doctorOptions } from '../../src/doctor/tokenizer_fit.ts';
import { readAnyBatch } from '../../src/io/formats/index.ts';
import { writeSafeTensors } from '../../src/io/safetensors.ts';

const PAD = 0;
const EOS = 2;
type Turn = ['a' | 't', number[]]; // a: assistant tokens (trained, ending with EOS), t: a tool result (not trained)
const ROLLOUTS: { p: number[]; turns: Turn[]; r: number; g: number }[] = [
  { p: [11, 12, 13], turns: [['a', [40, 41, 42, EOS]], ['t', [50, 51, 52]], ['a', [43, 44, EOS]]], r: 1, g: 0 },
  { p: [11, 12, 13], turns: [['a', [45, 46, EOS]]], r: 0, g: 0 },
  { p: [14, 15, 16, 17, 18], turns: [['a', [40, 47, EOS]], ['t', [50, 53]], ['a', [48, EOS]]], r: 1, g: 1 },
  { p: [14, 15, 16, 17, 18], turns: [['a', [49, EOS]], ['t', [50, 54, 55]]], r: 0, g: 1 }, // ends on a tool result
];
const COMP = ROLLOUTS.map((s) => s.turns.flatMap(([, ids]) => ids));

const i64 = (rows: number[][]) => ({ dtype: 'I64' as const, shape: [rows.length, rows[0].length], data: BigInt64Array.from(rows.flat(), (x) => BigInt(x)) });
const f32 = (rows: number[]) => ({ dtype: 'F32' as const, shape: [rows.length], data: Float32Array.from(rows) });
const pad = (r: number[], n: number, v: number, left = false) => (left ? [...new Array<number>(n - r.length).fill(v), ...r] : [...r, ...new Array<number>(n - r.length).fill(v)]);

/** The trainer's loss mask of each completion; `shift` moves row 0's tool run by that many positions. */
function masks(shift: number): number[][] {
  const m = ROLLOUTS.map((s) => s.turns.flatMap(([k, ids]) => ids.map(() => (k === 'a' ? 1 : 0))));
  if (shift) {
    const z = m[0].indexOf(0);
    const n = m[0].filter((x) => x === 0).length;
    m[0] = m[0].map((_, t) => (t >= z + shift && t < z + shift + n ? 0 : 1));
  }
  return m;
}

/** The six files of the same batch: [name, bytes]. */
function layouts(shift = 0): [string, Uint8Array][] {
  const mask = masks(shift);
  const P = Math.max(...ROLLOUTS.map((s) => s.p.length));
  const C = Math.max(...COMP.map((c) => c.length));
  const ids = (b: number) => [...ROLLOUTS[b].p, ...COMP[b]];
  const enc = (s: string) => new TextEncoder().encode(s);
  const trl = writeSafeTensors(
    {
      prompt_ids: i64(ROLLOUTS.map((s) => pad(s.p, P, PAD, true))),
      prompt_mask: i64(ROLLOUTS.map((s) => pad(s.p.map(() => 1), P, 0, true))),
      completion_ids: i64(COMP.map((c) => pad(c, C, PAD))),
      completion_mask: i64(COMP.map((c) => pad(c.map(() => 1), C, 0))),
      tool_mask: i64(mask.map((m) => pad(m, C, 1))),
      advantages: f32([1, -1, 1, -1]),
    },
    { config: JSON.stringify({ num_generations: 2, loss_type: 'dapo' }), pad_token_id: String(PAD), eos_token_id: String(EOS) },
  );
  const verl = writeSafeTensors(
    {
      prompts: i64(ROLLOUTS.map((s) => pad(s.p, P, PAD, true))),
      responses: i64(COMP.map((c) => pad(c, C, PAD))),
      attention_mask: i64(ROLLOUTS.map((s, b) => [...pad(s.p.map(() => 1), P, 0, true), ...pad(COMP[b].map(() => 1), C, 0)])),
      response_mask: i64(mask.map((m) => pad(m, C, 0))),
    },
    { uid: JSON.stringify(ROLLOUTS.map((s) => `u${s.g}`)), config: JSON.stringify({ rollout_n: 2 }), pad_token_id: String(PAD), eos_token_id: String(EOS) },
  );
  const T = Math.max(...ROLLOUTS.map((_, b) => ids(b).length));
  const openrlhf = writeSafeTensors(
    {
      sequences: i64(ROLLOUTS.map((_, b) => pad(ids(b), T, PAD))),
      attention_mask: i64(ROLLOUTS.map((_, b) => pad(ids(b).map(() => 1), T, 0))),
      action_mask: i64(ROLLOUTS.map((s, b) => pad([...s.p.map(() => 0), ...mask[b]].slice(1), T - 1, 0))),
      rewards: f32(ROLLOUTS.map((s) => s.r)),
    },
    { index: JSON.stringify([0, 1, 2, 3]), n_samples_per_prompt: '2', pad_token_id: String(PAD), eos_token_id: String(EOS) },
  );
  const primeRl = ROLLOUTS.map((s, b) => JSON.stringify({ schema_version: 1, step: 3, token_ids: ids(b), loss_mask: [...s.p.map(() => false), ...mask[b].map((x) => x === 1)], advantages: ids(b).map(() => (s.r ? 1 : -1)) })).join('\n');
  const width = 16; // NeMo-RL pads every row to the batch's width; input_lengths give the real length
  const nemo = ROLLOUTS.map((s, b) =>
    JSON.stringify({ content: [['x']], rewards: [s.r], input_lengths: [ids(b).length], token_ids: [pad(ids(b), width, PAD)], token_loss_mask: [pad([...s.p.map(() => 0), ...mask[b]], width, 0)], sample_loss_mask: [1], idx: b }),
  ).join('\n');
  const slime = JSON.stringify({ rollout_id: 3, samples: ROLLOUTS.map((s, b) => ({ group_index: s.g, index: b, rollout_id: null, tokens: ids(b), response_length: COMP[b].length, reward: s.r, loss_mask: mask[b], remove_sample: false, status: 'completed' })) });
  return [
    ['trl.safetensors', trl],
    ['verl.safetensors', verl],
    ['openrlhf.safetensors', openrlhf],
    ['prime-rl.jsonl', enc(primeRl)],
    ['train_data_step3.jsonl', enc(nemo)],
    ['rollout_3.json', enc(slime)],
  ];
}

function doctor(name: string, bytes: Uint8Array) {
  const r = readAnyBatch(bytes, name, { eos_token_ids: [EOS], pad_token_id: PAD });
  return { batch: r.batch, findings: diagnose(r.batch, doctorOptions(r.batch, undefined, r.inferred)).findings };
}

/** Each row's trained completion tokens (completion_mask · tool_mask) and its prompt. */
const trained = (b: ReturnType<typeof doctor>['batch']) =>
  b.completion_ids.map((ids, i) => ({ prompt: b.prompt_ids[i].filter((_, t) => (b.prompt_mask?.[i][t] ?? 1) === 1), loss: ids.filter((_, t) => b.completion_mask[i][t] * (b.tool_mask?.[i][t] ?? 1) === 1) }));

describe('one multi-turn tool batch in six layouts', () => {
  const want = ROLLOUTS.map((s, b) => ({ prompt: s.p, loss: COMP[b].filter((_, t) => masks(0)[b][t] === 1) }));

  it.each(layouts().map(([n, bytes]) => [n, bytes] as const))('%s: the trained tokens are the trainer’s; a rollout ending on a tool result is no text after an EOS; no finding', (name, bytes) => {
    const { batch, findings } = doctor(name, bytes);
    expect(trained(batch)).toEqual(want);
    // Row 3's tool result ends the rollout: attended, not trained — a tool token, never "tokens after the first EOS".
    expect(batch.tool_mask?.[3].slice(2, 5)).toEqual([0, 0, 0]);
    expect(findings.filter((f) => f.severity !== 'info')).toEqual([]);
  });

  const shifted = (shift: number) =>
    layouts(shift).map(([name, bytes]) => {
      const f = doctor(name, bytes).findings.filter((x) => x.rule === 'mask-length-mismatch');
      return [name, f.map((x) => [x.severity, x.sample, x.span])] as const;
    });

  it("tool 0s one token late (the tool result's first token trained): named where each tool result follows its turn's EOS, not for verl", () => {
    // Row 0: the turn's EOS at 3, the tool result at 4…6; the 0s start at 5.
    expect(Object.fromEntries(shifted(1))).toEqual({
      'trl.safetensors': [['error', 0, [4, 5]]],
      'verl.safetensors': [],
      'openrlhf.safetensors': [['error', 0, [4, 5]]],
      'prime-rl.jsonl': [['warning', 0, [4, 5]]],
      'train_data_step3.jsonl': [['warning', 0, [4, 5]]],
      'rollout_3.json': [['warning', 0, [4, 5]]],
    });
  });

  it("tool 0s one token early (the turn's own EOS out of the loss): named the same way", () => {
    expect(Object.fromEntries(shifted(-1))).toEqual({
      'trl.safetensors': [['error', 0, [3, 4]]],
      'verl.safetensors': [],
      'openrlhf.safetensors': [['error', 0, [3, 4]]],
      'prime-rl.jsonl': [['warning', 0, [3, 4]]],
      'train_data_step3.jsonl': [['warning', 0, [3, 4]]],
      'rollout_3.json': [['warning', 0, [3, 4]]],
    });
    const [, trl] = layouts(-1)[0];
    expect(doctor('trl.safetensors', trl).findings.find((f) => f.rule === 'mask-length-mismatch')!.message).toMatch(/^sample 0: tool_mask's tool-output 0s start at 3, on the assistant turn's own EOS: the EOS that ends the turn is out of the loss/);
  });
});
