// The panels' counts read as English (issue 24: the Doctor summary said "1 rules skipped").
import { describe, expect, it } from 'vitest';
import { countOf } from '../../src/ui/panels/count.ts';

describe('countOf', () => {
  it('uses the singular for exactly one and the plural otherwise', () => {
    expect(countOf(1, 'rule')).toBe('1 rule');
    expect(countOf(0, 'rule')).toBe('0 rules');
    expect(countOf(2, 'rule')).toBe('2 rules');
    expect(countOf(1, 'entry', 'entries')).toBe('1 entry');
    expect(countOf(3, 'entry', 'entries')).toBe('3 entries');
  });
});
