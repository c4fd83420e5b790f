// The page's bounded preview of a batch text (src/ui/preview.ts): never longer than the cap, always a
// prefix of the value, never ending in half a surrogate pair, and naming the full length.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { preview, previewNote } from '../../src/ui/preview.ts';

describe('preview', () => {
  it('is a bounded prefix that names the full length', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), fc.integer({ min: 2, max: 200 }), (v, max) => {
        const p = preview(v, max);
        expect(p.length).toBe(v.length);
        expect(p.text.length).toBeLessThanOrEqual(max);
        expect(v.startsWith(p.text)).toBe(true);
        expect(p.truncated).toBe(v.length > max);
        if (!p.truncated) expect(p.text).toBe(v);
        const last = p.text.charCodeAt(p.text.length - 1);
        if (p.truncated) expect(last >= 0xd800 && last <= 0xdbff).toBe(false);
      }),
    );
  });

  it('cuts a 50 MB string to the cap and says how long it is', () => {
    const v = 'x'.repeat(50 * 1024 * 1024);
    const p = preview(v);
    expect(p.text.length).toBe(20_000);
    expect(previewNote(p)).toContain('52,428,800');
  });
});
