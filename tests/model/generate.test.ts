// The decode loop on a CPU toy decoder (no GPU): batch layout, positions and masks fed to the model,
// per-row stopping, min_new_tokens, seeds, and the recorded sampling log-probs recomputed independently.
import { describe, expect, it } from 'vitest';
import { DEFAULT_GENERATE, generate, padPrompts, type Decoder, type GenerateOptions } from '../../src/model/generate.ts';

const V = 13;
const EOS = [1, 4];
const PAD = 0;

/** Logits of a toy model: a fixed function of the row's last real token and its position. */
function toyLogits(last: number, pos: number, eosBias: number): Float64Array {
  const z = new Float64Array(V);
  for (let v = 0; v < V; v++) z[v] = 2 * Math.sin(1.3 * v + 0.7 * last + 0.37 * pos);
  for (const e of EOS) z[e] += eosBias;
  return z;
}

/**
 * A Decoder that checks what the loop feeds it (left padding, HF position ids, the mask) and keeps its
 * own per-row "cache" (the last token and position), like a KV cache would.
 */
class ToyDecoder implements Decoder {
  readonly vocab_size = V;
  last: number[] = [];
  pos: number[] = [];
  B = 0;
  P = 0;
  steps = 0;
  maxLen = 0;
  constructor(readonly eosBias = 0) {}
  private out(): Float32Array {
    const o = new Float32Array(this.B * V);
    for (let b = 0; b < this.B; b++) o.set(toyLogits(this.last[b], this.pos[b], this.eosBias), b * V);
    return o;
  }
  async prefill({ input_ids: ids, attention_mask: mask, position_ids: pos, B, T: P, max_len }: Parameters<Decoder['prefill']>[0]) {
    this.B = B;
    this.P = P;
    this.maxLen = max_len;
    for (let b = 0; b < B; b++) {
      this.last.push(ids[b * P + P - 1]);
      this.pos.push(pos[b * P + P - 1]);
      // Left padding: once a row's mask turns 1 it stays 1, and positions count real tokens from 0.
      let seen = 0;
      for (let t = 0; t < P; t++) {
        if (mask[b * P + t]) expect(pos[b * P + t]).toBe(seen++);
        else expect(seen, `row ${b} has a pad after a real token`).toBe(0);
      }
    }
    return this.out();
  }
  async step(tokens: Int32Array, pos: Int32Array, mask: Int32Array) {
    this.steps++;
    const L = this.P + this.steps;
    expect(mask.length).toBe(this.B * L);
    expect(L).toBeLessThanOrEqual(this.maxLen);
    for (let b = 0; b < this.B; b++) {
      expect(pos[b], `row ${b} step ${this.steps}`).toBe(this.pos[b] + 1);
      expect(mask[b * L + L - 1]).toBe(1);
      this.last[b] = tokens[b];
      this.pos[b] = pos[b];
    }
    return this.out();
  }
  dispose() {}
}

const prompts = [
  [5, 6],
  [7, 8, 9, 10],
  [11, 3, 2, 12, 5],
];
const opts = (o: Partial<GenerateOptions> = {}): GenerateOptions => ({
  ...DEFAULT_GENERATE,
  eos_token_ids: EOS,
  pad_token_id: PAD,
  num_generations: 2,
  max_new_tokens: 8,
  seed: 1,
  ...o,
});

describe('padPrompts', () => {
  it('repeats each prompt G times, consecutive, left-padded with HF position ids', () => {
    const { B, P, input_ids, attention_mask, position_ids } = padPrompts(prompts, 2, PAD);
    expect([B, P]).toEqual([6, 5]);
    expect(Array.from(input_ids.subarray(0, 10))).toEqual([0, 0, 0, 5, 6, 0, 0, 0, 5, 6]);
    expect(Array.from(attention_mask.subarray(10, 15))).toEqual([0, 1, 1, 1, 1]);
    expect(Array.from(position_ids.subarray(10, 15))).toEqual([1, 0, 1, 2, 3]);
    expect(Array.from(input_ids.subarray(25, 30))).toEqual([11, 3, 2, 12, 5]);
  });
});

describe('generate (toy decoder)', () => {
  it('stops each row at its first EOS (any id) or at max_new_tokens', async () => {
    const out = await generate(new ToyDecoder(1.0), prompts, opts({ max_new_tokens: 10, seed: 3 }));
    expect(out.B).toBe(6);
    let eosRows = 0;
    for (let b = 0; b < out.B; b++) {
      const c = out.completion_ids[b];
      const firstEos = c.findIndex((id) => EOS.includes(id));
      if (out.finish_reason[b] === 'eos') {
        eosRows++;
        expect(firstEos, `row ${b}`).toBe(c.length - 1);
      } else {
        expect(out.finish_reason[b]).toBe('length');
        expect(c.length).toBe(10);
        expect(firstEos).toBe(-1);
      }
      expect(out.sampling_per_token_logps[b].length).toBe(c.length);
    }
    // With EOS favoured rows stop at different times, and the loop ends with the longest row.
    expect(eosRows).toBeGreaterThan(0);
    expect(new Set(out.completion_ids.map((c) => c.length)).size).toBeGreaterThan(1);
    expect(out.timings.steps).toBe(Math.max(...out.completion_ids.map((c) => c.length)));
    expect(out.timings.tokens).toBe(out.completion_ids.reduce((a, c) => a + c.length, 0));
  });

  it('is reproducible for a seed and differs for another', async () => {
    const a = await generate(new ToyDecoder(), prompts, opts({ seed: 11 }));
    const b = await generate(new ToyDecoder(), prompts, opts({ seed: 11 }));
    const c = await generate(new ToyDecoder(), prompts, opts({ seed: 12 }));
    expect(b.completion_ids).toEqual(a.completion_ids);
    expect(b.sampling_per_token_logps).toEqual(a.sampling_per_token_logps);
    expect(c.completion_ids).not.toEqual(a.completion_ids);
    // The two rows of a group share a prompt but draw different tokens.
    expect(a.completion_ids[0]).not.toEqual(a.completion_ids[1]);
  });

  it('respects min_new_tokens even when EOS dominates', async () => {
    // EOS logits +30: without the minimum every row would stop at once.
    const free = await generate(new ToyDecoder(30), prompts, opts());
    expect(free.completion_ids.every((c) => c.length === 1)).toBe(true);
    const out = await generate(new ToyDecoder(30), prompts, opts({ min_new_tokens: 3 }));
    for (const c of out.completion_ids) {
      expect(c.length).toBe(4);
      expect(c.slice(0, 3).some((id) => EOS.includes(id))).toBe(false);
      expect(EOS).toContain(c[3]);
    }
  });

  it('records the log-prob of each token under the tempered distribution it was drawn from', async () => {
    const T = 0.7;
    const out = await generate(new ToyDecoder(), prompts, opts({ temperature: T, seed: 5 }));
    // Replay the toy model along each row's own tokens: logp = z/T − logsumexp(z/T).
    for (let b = 0; b < out.B; b++) {
      const p = prompts[Math.floor(b / 2)];
      let last = p[p.length - 1];
      let pos = p.length - 1;
      out.completion_ids[b].forEach((tok, t) => {
        const z = Array.from(toyLogits(last, pos, 0), (x) => Math.fround(x) / T);
        const m = Math.max(...z);
        const lse = m + Math.log(z.reduce((a, x) => a + Math.exp(x - m), 0));
        expect(out.sampling_per_token_logps[b][t]).toBeCloseTo(z[tok] - lse, 12);
        last = tok;
        pos++;
      });
    }
  });

  it('greedy picks the argmax of the logits every step', async () => {
    const out = await generate(new ToyDecoder(), prompts, opts({ temperature: 0 }));
    for (let b = 0; b < out.B; b++) {
      const p = prompts[Math.floor(b / 2)];
      let last = p[p.length - 1];
      let pos = p.length - 1;
      for (const tok of out.completion_ids[b]) {
        const z = Array.from(toyLogits(last, pos, 0), Math.fround);
        expect(tok).toBe(z.indexOf(Math.max(...z)));
        last = tok;
        pos++;
      }
    }
    // Both rows of a group are identical under greedy.
    expect(out.completion_ids[0]).toEqual(out.completion_ids[1]);
  });

  it('rejects bad prompts and settings with a clear message', async () => {
    await expect(generate(new ToyDecoder(), [[5], [99]], opts())).rejects.toThrow(/prompt 1 position 0: token 99/);
    await expect(generate(new ToyDecoder(), [[5], []], opts())).rejects.toThrow(/prompt 1 is empty/);
    await expect(generate(new ToyDecoder(), prompts, opts({ min_new_tokens: 9 }))).rejects.toThrow(/min_new_tokens/);
    await expect(generate(new ToyDecoder(), prompts, opts({ num_generations: 0 }))).rejects.toThrow(/num_generations/);
    // Learned positions: the 5-token prompt + 8 new tokens feeds positions up to 11, so 12 fit and 11 do not.
    const bounded = (n: number) => Object.assign(new ToyDecoder(), { max_positions: n });
    await expect(generate(bounded(11), prompts, opts())).rejects.toThrow(/prompt 2 \(5 tokens\) \+ max_new_tokens 8 exceeds the model's 11 positions/);
    const fits = bounded(12);
    const out = await generate(fits, prompts, opts());
    expect(out.completion_ids).toHaveLength(prompts.length * 2);
    for (const row of out.completion_ids) expect(row.length).toBeGreaterThan(0);
    for (const row of out.completion_ids) expect(row.length).toBeLessThanOrEqual(8);
    expect(fits.steps).toBeGreaterThan(0);
    expect(Math.max(...fits.pos), 'the last position fed').toBeLessThanOrEqual(11);
  });
});
