// Issue 13, linear Doctor rules: the helpers that replaced quadratic scans (the run finder behind
// mask-covers-padding / eos-inside-completion, which took 58.7 s on a 400k-token row, and the prompt-leak
// search of completion-contains-prompt) agree with the obvious quadratic definitions on random rows over
// a tiny alphabet (fast-check), where overlaps are frequent. Their speed is measured by
// `npm run bench -- --only doctor`, not here.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { diagnose } from '../../src/doctor/index.ts';
import { firstRun, maxOf, suffixPrefixOverlap } from '../../src/doctor/util.ts';

const row = fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 12 });

/** The longest n with text's last n elements equal to pattern's first n, trying every n. */
function overlapBrute(text: number[], pattern: number[]): number {
  for (let n = Math.min(text.length, pattern.length); n > 0; n--) {
    if (text.slice(text.length - n).every((x, i) => x === pattern[i])) return n;
  }
  return 0;
}

describe('linear helpers match their quadratic definitions', () => {
  it('suffixPrefixOverlap', () => {
    fc.assert(fc.property(row, row, (a, b) => {
      expect(suffixPrefixOverlap(a, b)).toBe(overlapBrute(a, b));
    }), { numRuns: 2000 });
  });

  it('firstRun', () => {
    const positions = fc.uniqueArray(fc.nat(30), { maxLength: 15 }).map((xs) => xs.sort((x, y) => x - y));
    fc.assert(fc.property(positions, (ps) => {
      const r = firstRun(ps);
      if (ps.length === 0) {
        expect(r).toBeUndefined();
      } else {
        let end = ps[0] + 1;
        while (ps.includes(end)) end++;
        expect(r).toEqual({ span: [ps[0], end], count: ps.length });
      }
    }), { numRuns: 1000 });
  });

  it('maxOf handles 300,000 values (Math.max(...xs) overflows the stack there)', () => {
    const xs = Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 100_003);
    expect(maxOf(xs)).toBe(100_002);
    expect(maxOf([])).toBe(0);
  });

  it('completion-contains-prompt finds the same leak as the quadratic search', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 3, max: 5 }), { minLength: 1, maxLength: 8 }), fc.array(fc.integer({ min: 3, max: 5 }), { minLength: 1, maxLength: 8 }), (prompt, completion) => {
      const m = Math.min(prompt.length, completion.length);
      let k = 0;
      for (let n = m; n >= 1 && k === 0; n--) {
        const head = completion.slice(0, n);
        if (head.every((x, i) => x === prompt[prompt.length - n + i]) || head.every((x, i) => x === prompt[i])) k = n;
      }
      const r = diagnose({ format: 'grpo-batch/v1', num_generations: 1, pad_token_id: 0, eos_token_ids: [1], prompt_ids: [prompt], completion_ids: [[...completion, 1]], completion_mask: [[...completion.map(() => 1), 1]] });
      const leak = r.findings.find((f) => f.rule === 'completion-contains-prompt' && /begins with/.test(f.message));
      if (k >= 2) expect(leak?.span).toEqual([0, k]);
      else expect(leak).toBeUndefined();
    }), { numRuns: 1000 });
  });
});
