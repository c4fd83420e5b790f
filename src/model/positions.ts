// position_ids of a padded batch, shared by batch assembly (src/grpo/batch.ts) and generation
// (src/model/generate.ts): how positions follow the attention mask is the model's convention, so it lives here.
import type { PositionIdsMode } from '../io/batch.ts';

/**
 * position_ids for a (B, L) attention mask. "from_attention_mask": cumsum(mask) − 1 with every masked
 * position set to 1 (HF generate's `masked_fill_(attention_mask == 0, 1)`), so a left-padded row starts
 * at 0 on its first real token. "arange": 0..L−1 on every row, so left padding shifts absolute positions.
 */
export function positionIds(attentionMask: Int32Array, B: number, L: number, mode: PositionIdsMode): Int32Array {
  const out = new Int32Array(B * L); // (B, L)
  for (let b = 0; b < B; b++) {
    let seen = 0;
    for (let t = 0; t < L; t++) {
      const m = attentionMask[b * L + t];
      seen += m;
      out[b * L + t] = mode === 'arange' ? t : m ? seen - 1 : 1;
    }
  }
  return out;
}
