// Schema validation of a parsed grpo-batch/v1: the element-level problems parseBatch lets through
// (row counts, id types, mask values, per-sample field lengths). Every problem is a finding with field,
// sample and position — nothing throws, nothing is padded or cut. Per-token length mismatches belong to
// the Doctor's mask-length-mismatch rule, non-finite values to its nonfinite rule.
import type { Finding } from './findings.ts';
import { PER_SAMPLE_FIELDS, PER_TOKEN_FIELDS, type GrpoBatch } from './batch.ts';

const HINT = 'Fix the exporter so the batch follows grpo-batch/v1 (docs/trl-export.md).';

export function validateBatch(batch: GrpoBatch, opts: { vocab_size?: number } = {}): Finding[] {
  const out: Finding[] = [];
  const err = (field: string, message: string, sample?: number, pos?: number) =>
    out.push({ rule: 'schema', severity: 'error', field, sample, span: pos === undefined ? undefined : [pos, pos + 1], message, hint: HINT });
  const B = batch.completion_ids.length;
  const G = batch.num_generations;

  if (B === 0) err('completion_ids', 'the batch has no samples');
  if (!batch.group_ids && B % G !== 0) err('num_generations', `${B} samples is not a multiple of num_generations = ${G}: groups cannot be formed (give group_ids for a slice)`);
  const sizes = new Map<number, number>();
  batch.group_ids?.forEach((g, i) => {
    if (!Number.isInteger(g)) err('group_ids', `group_ids[${i}] = ${JSON.stringify(g)} is not an integer label`, i);
    else if (sizes.set(g, (sizes.get(g) ?? 0) + 1).get(g) === G + 1) err('group_ids', `group ${g} has more than num_generations = ${G} rows (sample ${i} is row ${G + 1})`, i);
  });
  if (batch.prompt_ids.length !== B) err('prompt_ids', `prompt_ids has ${batch.prompt_ids.length} rows, completion_ids has ${B}`);
  if (batch.eos_token_ids.length === 0) err('eos_token_ids', 'eos_token_ids is empty: completion masks cannot be checked');
  batch.eos_token_ids.forEach((id, i) => {
    if (!Number.isInteger(id) || id < 0) err('eos_token_ids', `eos_token_ids[${i}] = ${JSON.stringify(id)} is not a token id`);
  });
  if (batch.pad_token_id < 0) err('pad_token_id', `pad_token_id = ${batch.pad_token_id} is negative`);

  const checkIds = (field: 'prompt_ids' | 'completion_ids') =>
    batch[field].forEach((row, b) => {
      const t = row.findIndex((id) => !Number.isInteger(id) || id < 0 || (opts.vocab_size !== undefined && id >= opts.vocab_size));
      if (t >= 0) {
        const range = opts.vocab_size !== undefined ? ` in [0, ${opts.vocab_size})` : '';
        err(field, `${field}[${b}][${t}] = ${JSON.stringify(row[t])} is not a token id${range}`, b, t);
      }
    });
  checkIds('prompt_ids');
  checkIds('completion_ids');

  const rowCount = (field: string, rows: unknown[] | undefined, expected: number[], what: string) => {
    if (rows && !expected.includes(rows.length)) err(field, `${field} has ${rows.length} entries, expected ${expected.join(' or ')} (${what})`);
  };
  for (const f of PER_TOKEN_FIELDS) rowCount(f, batch[f], [B], 'one row per sample');
  rowCount('prompt_mask', batch.prompt_mask, [batch.prompt_ids.length], 'one row per prompt_ids row');
  for (const f of PER_SAMPLE_FIELDS) rowCount(f, batch[f], [B], 'one per sample');
  rowCount('messages', batch.messages, [B, B / G].filter(Number.isInteger), 'one conversation per sample or per prompt');

  for (const f of ['completion_mask', 'tool_mask', 'prompt_mask'] as const) {
    batch[f]?.forEach((row, b) => {
      const t = row.findIndex((m) => m !== 0 && m !== 1);
      if (t >= 0) err(f, `${f}[${b}][${t}] = ${JSON.stringify(row[t])}: masks hold 0 or 1`, b, t);
    });
  }
  const numeric = (field: string, values: unknown[], sample?: number) => {
    const t = values.findIndex((v) => typeof v !== 'number');
    if (t >= 0) err(field, `${field}${sample === undefined ? '' : `[${sample}]`}[${t}] = ${JSON.stringify(values[t])} is not a number`, sample, t);
  };
  for (const f of ['rewards', 'advantages', 'reward_weights'] as const) if (batch[f]) numeric(f, batch[f]!);
  for (const f of ['rewards_per_func', 'old_per_token_logps', 'ref_per_token_logps', 'sampling_per_token_logps'] as const) {
    batch[f]?.forEach((row, b) => numeric(f, row, b));
  }
  if (batch.rewards_per_func) {
    const F = batch.reward_weights?.length ?? batch.rewards_per_func[0]?.length ?? 0;
    batch.rewards_per_func.forEach((row, b) => {
      if (row.length !== F) err('rewards_per_func', `rewards_per_func[${b}] has ${row.length} reward functions, expected ${F}${batch.reward_weights ? ' (length of reward_weights)' : ''}`, b);
    });
  }
  batch.messages?.forEach((conv, i) => {
    if (!Array.isArray(conv) || conv.some((m) => !m || typeof m.role !== 'string' || (typeof m.content !== 'string' && m.content !== undefined && !Array.isArray(m.content)))) {
      err('messages', `messages[${i}] is not a list of {role, content} messages`, i);
    }
  });
  const sr = batch.config?.scale_rewards;
  if (sr !== undefined && typeof sr !== 'boolean' && !['group', 'batch', 'none'].includes(sr)) {
    err('config.scale_rewards', `config.scale_rewards = ${JSON.stringify(sr)}, expected "group", "batch" or "none"`);
  }
  return out;
}
