// verl's dynamic micro-batches (use_dynamic_bsz), as the legacy actor forms them for one mini-batch
// (volcengine/verl b178a3c, verl/utils/seqlen_balancing.py prepare_dynamic_batch → rearrange_micro_batches,
// called from verl/workers/actor/dp_actor.py update_policy). Which rows share a micro-batch decides the loss:
// verl aggregates each micro-batch on its own (agg_loss) and scales it by its rows ÷ ppo_mini_batch_size, so the
// partition is reproduced exactly, down to Python's heap order and sort stability in karmarkar_karp.
import { SettingsError } from '../settings/types.ts';

/** calculate_workload: verl's FLOP estimate for a row of `len` tokens (24576·len + len²), the values it partitions. */
const workload = (len: number) => 24576 * len + len * len;

type Item = [idx: number, val: number];

/** karmarkar_karp's Set: a sum and the (idx, val) items in insertion order. */
class Part {
  sum = 0;
  items: Item[] = [];
  add(it: Item): void {
    this.items.push(it);
    this.sum += it[1];
  }
}

/** Python's `a < b` on two Parts (Set.__lt__): sum, then item count, then the item lists lexicographically. */
function partLt(a: Part, b: Part): boolean {
  if (a.sum !== b.sum) return a.sum < b.sum;
  if (a.items.length !== b.items.length) return a.items.length < b.items.length;
  for (let i = 0; i < a.items.length; i++) {
    const [x, y] = [a.items[i], b.items[i]];
    if (x[0] !== y[0]) return x[0] < y[0];
    if (x[1] !== y[1]) return x[1] < y[1];
  }
  return false;
}

/** sorted(parts, reverse=True): descending, equal parts keeping their order (Python's reverse sort is stable). */
const sortDesc = (parts: Part[]) => parts.sort((a, b) => (partLt(b, a) ? -1 : partLt(a, b) ? 1 : 0));

/** karmarkar_karp's State: k parts, largest first. */
interface State {
  parts: Part[];
}
const spread = (s: State) => s.parts[0].sum - s.parts[s.parts.length - 1].sum;
/** State.__lt__: the larger spread first, then the larger first part (heapq pops the "least"). */
function stateLt(a: State, b: State): boolean {
  if (spread(a) !== spread(b)) return spread(a) > spread(b);
  return partLt(b.parts[0], a.parts[0]);
}

/** Python's heapq on `lt` (Lib/heapq.py: heappush = append + _siftdown; heappop = _siftup from the root). */
function siftDown(h: State[], start: number, pos: number): void {
  const item = h[pos];
  while (pos > start) {
    const parent = (pos - 1) >> 1;
    if (!stateLt(item, h[parent])) break;
    h[pos] = h[parent];
    pos = parent;
  }
  h[pos] = item;
}
function heapPush(h: State[], s: State): void {
  h.push(s);
  siftDown(h, 0, h.length - 1);
}
function heapPop(h: State[]): State {
  const last = h.pop()!;
  if (!h.length) return last;
  const top = h[0];
  h[0] = last;
  let pos = 0;
  let child = 1;
  while (child < h.length) {
    if (child + 1 < h.length && !stateLt(h[child], h[child + 1])) child++;
    h[pos] = h[child];
    pos = child;
    child = 2 * pos + 1;
  }
  h[pos] = last;
  siftDown(h, 0, pos);
  return top;
}

/**
 * karmarkar_karp(values, k, equal_size=False) then get_seqlen_balanced_partitions' check and sort: k lists of
 * indices into `values`, each ascending, in the final state's part order. Throws where verl asserts (fewer values
 * than k, or an empty part).
 */
export function karmarkarKarp(values: readonly number[], k: number): number[][] {
  if (values.length < k) throw new SettingsError(`verl's karmarkar_karp: ${values.length} rows for ${k} micro-batches (verl asserts number of items >= k_partitions)`);
  const heap: State[] = [];
  const order = values.map((v, i) => [v, i] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  for (const [v, i] of order) {
    const parts = Array.from({ length: k }, () => new Part());
    parts[0].add([i, v]);
    heapPush(heap, { parts: sortDesc(parts) });
  }
  while (heap.length > 1) {
    const s0 = heapPop(heap);
    const s1 = heapPop(heap);
    for (let i = 0; i < k; i++) for (const it of s1.parts[k - 1 - i].items) s0.parts[i].add(it);
    sortDesc(s0.parts);
    heapPush(heap, s0);
  }
  return heap[0].parts.map((p, i) => {
    if (!p.items.length) throw new SettingsError(`verl's karmarkar_karp: micro-batch ${i} of ${k} is empty (verl asserts every partition holds a row)`);
    return p.items.map(([idx]) => idx).sort((a, b) => a - b);
  });
}

/**
 * One mini-batch's dynamic micro-batches on each rank: `lengths[r]` holds rank r's rows' attention_mask sums
 * (prompt + response tokens); `budget` is ppo_max_token_len_per_gpu × ulysses_sequence_parallel_size. Each rank
 * packs min(rows, ⌈Σ lengths ÷ budget⌉) micro-batches, the count maxed over the ranks (same_micro_num_in_dp: an
 * all_reduce MAX), its rows partitioned by karmarkar_karp on their workloads. Returns, per rank, the micro-batches
 * as lists of the rank's row indices. `field` names the budget setting in the refusals. `width`: the batch's padded
 * width, which rearrange_micro_batches asserts the budget against (max_seq_len = attention_mask.shape[-1]).
 */
export function verlDynamicMicroBatches(lengths: readonly (readonly number[])[], budget: number, field: string, width?: number): number[][][] {
  if (width !== undefined && width > budget) throw new SettingsError(`${field}: ${budget} tokens per dynamic micro-batch, but the batch is ${width} tokens wide (prompts + responses, padded): verl asserts max_token_len >= the sequence length (rearrange_micro_batches), so the run had a larger budget; give its ppo_max_token_len_per_gpu`);
  let count = 0;
  lengths.forEach((rank, r) => {
    const longest = rank.reduce((m, x) => Math.max(m, x), 0);
    // rearrange_micro_batches asserts max_token_len >= the padded width; a real row longer than the budget means the
    // run could not have packed this batch.
    if (longest > budget) throw new SettingsError(`${field}: ${budget} tokens per dynamic micro-batch, but ${lengths.length > 1 ? `rank ${r}'s` : 'a'} row holds ${longest} (prompt + response): verl asserts max_token_len >= the sequence length, so the run had a larger budget; give its ppo_max_token_len_per_gpu`);
    const total = rank.reduce((a, x) => a + x, 0);
    count = Math.max(count, Math.min(rank.length, Math.ceil(total / budget)));
  });
  return lengths.map((rank) => karmarkarKarp(rank.map(workload), Math.max(count, 1)));
}
