// The Doctor's logprob-mismatch finding names the mismatch explorer's diagnoses (one comparison, one set of
// rules): each planted pattern's diagnosis appears in the finding with its rows; a clean batch has no finding.
import { describe, expect, it } from 'vitest';
import { diagnose } from '../../src/doctor/index.ts';
import { DIAGNOSIS_OF, PLANTED, plantedBatch } from '../helpers/mismatch_fixtures.ts';

describe('logprob-mismatch names the diagnosis', () => {
  for (const pattern of PLANTED) {
    it(pattern, () => {
      const { batch, planted } = plantedBatch(pattern, { seed: 2 });
      const fs = diagnose(batch).findings.filter((f) => f.rule === 'logprob-mismatch');
      if (pattern === 'clean') return expect(fs).toEqual([]);
      expect(fs).toHaveLength(1);
      const rows = planted.length > 6 ? `${planted.slice(0, 6).join(', ')}, …` : planted.join(', ');
      expect(fs[0].message).toContain(`${DIAGNOSIS_OF[pattern]}: sample${planted.length > 1 ? 's' : ''} ${rows})`);
      expect(planted).toContain(fs[0].sample);
    });
  }
});
