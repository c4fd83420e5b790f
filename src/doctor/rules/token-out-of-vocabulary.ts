// token-out-of-vocabulary: an id at or past the vocabulary of the batch's model. The embedding has no row for
// it: PyTorch's forward raises ("index out of range in self", a device-side assert on CUDA) and the studio's
// step stops on it, so the batch cannot be the one the trainer stepped: its ids were corrupted on the way (an
// integer overflow, a sentinel such as the vocabulary size written as pad) or tokenized for another model. Only
// a known vocabulary bounds the ids: the model's config.json, else its tokenizer, taken only from a model the
// batch fits (src/doctor/tokenizer_fit.ts); without one, the schema check (integers ≥ 0) is all there is.
import { msg } from '../util.ts';
import type { Finding, Rule } from '../types.ts';

const HINT = 'Export the ids the sampler produced, unchanged (no cast to a narrower dtype, no sentinel pad); if the batch comes from another model, check it with that model\'s tokenizer.';

export const tokenOutOfVocabulary: Rule = {
  id: 'token-out-of-vocabulary',
  title: 'Token id outside the vocabulary',
  severity: 'error',
  description: 'prompt_ids, completion_ids, pad_token_id or eos_token_ids hold an id at or past the vocabulary size of the batch\'s model (first one per row shown): the model has no embedding for it.',
  seed: 'torch.nn.Embedding: an index ≥ num_embeddings raises "index out of range in self"; issue 20 (found only when a step failed)',
  needsVocabulary: true,
  check(ctx) {
    const V = ctx.options.vocab_size ?? ctx.options.tokenizer?.vocab_size;
    if (V === undefined) return ctx.options.tokenizer_unfit ?? 'needs the vocabulary of the batch\'s model (--tokenizer DIR, or a model loaded in the studio); ids are checked only to be integers ≥ 0';
    // Negative and fractional ids are the schema check's.
    const past = (id: unknown) => Number.isInteger(id) && (id as number) >= V;
    const out: Finding[] = [];
    const { batch } = ctx;
    const single = (field: string, what: string, id: number) =>
      out.push({ rule: this.id, severity: 'error', field, message: msg`${what} = ${id} is outside the vocabulary of ${V} tokens`, hint: HINT });
    if (past(batch.pad_token_id)) single('pad_token_id', 'pad_token_id', batch.pad_token_id);
    batch.eos_token_ids.forEach((id, i) => {
      if (past(id)) single('eos_token_ids', `eos_token_ids[${i}]`, id);
    });
    for (const field of ['prompt_ids', 'completion_ids'] as const) {
      batch[field].forEach((row, b) => {
        let first = -1;
        let n = 0;
        for (let t = 0; t < row.length; t++) {
          if (!past(row[t])) continue;
          if (first < 0) first = t;
          n++;
        }
        if (first < 0) return;
        out.push({
          rule: this.id, severity: 'error', sample: b, field, span: [first, first + 1],
          message: msg`sample ${b}: ${field}[${b}][${first}] = ${row[first]} is outside the vocabulary of ${V} tokens${n > 1 ? ` (${n} such ids in the row)` : ''}`,
          hint: HINT,
        });
      });
    }
    return out;
  },
};
