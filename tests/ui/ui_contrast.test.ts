// The token grid's text is readable on every cell colour: WCAG AA (4.5:1) for each region's text on its
// fill. White on the EOS amber and the muted grey on pad / after-EOS cells failed this before.
import { describe, expect, it } from 'vitest';
import { REGION_COLORS, REGION_TEXT, contrastRatio } from '../../src/view/colors.ts';
import { REGION } from '../../src/view/cells.ts';

describe('grid colours', () => {
  it('contrast ratio matches known WCAG values', () => {
    expect(contrastRatio('#ffffff', '#000000')).toBeCloseTo(21, 5);
    expect(contrastRatio('#777777', '#ffffff')).toBeCloseTo(4.48, 2);
  });

  it('every region label is at least 4.5:1 on its cell', () => {
    for (const [name, r] of Object.entries(REGION)) {
      if (name === 'absent') continue;
      expect(contrastRatio(REGION_TEXT[r], REGION_COLORS[r]), name).toBeGreaterThanOrEqual(4.5);
    }
  });

  it('the colours used before this fix fail (the test can fail)', () => {
    expect(contrastRatio('#e6edf3', REGION_COLORS[REGION.eos])).toBeLessThan(4.5);
    expect(contrastRatio('#8b949e', REGION_COLORS[REGION.pad])).toBeLessThan(4.5);
  });
});
