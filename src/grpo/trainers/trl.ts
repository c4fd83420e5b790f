// TRL's objective on one micro-batch (huggingface/trl trl/trainer/grpo_trainer.py at f2cd577, `_compute_loss`
// and the vLLM importance-sampling / num_items_in_batch statements of `_generate_and_score_completions`), on
// the GPU: logprob_gather_forward (log-probs and entropies of logits / temperature, every position scored,
// since luspo's mean runs over padding too), trl_loss_forward (per-token loss, KL, IS ratio, masks, row sums),
// trl_loss_backward (dlogp, dentropy) and logprob_gather_backward (dlogits). Config and run are parsed
// against the TRL settings table (src/grpo/settings/trl.ts).
import type { Gpu } from '../../gpu/context.ts';
import { SubmitGroup, type Seat } from '../../gpu/submit_group.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../../kernels/logprob_gather.ts';
import { TRL_ROW_STATS, trlAggregation, trl_loss_backward, trl_loss_forward, trl_loss_value } from '../../kernels/trl_loss.ts';
import type { TrlLossParams } from '../../kernels/types.ts';
import { parseTrlConfig, parseTrlRun } from '../settings/trl.ts';
import { SettingsError } from '../settings/types.ts';
import { resolveTrlParams } from './trl_params.ts';
import { checkScored, fieldOf, type ScoredLogps, type TrainerInputs, type TrainerLoss, type TrainerLossOutputs } from './types.ts';

/**
 * torch.quantile (linear interpolation) of the float32 entropies of mask = 1 tokens: TRL's
 * get_high_entropy_mask threshold. On the host from read-back entropies (B·T floats): a GPU selection would
 * be a sort for a value that needs no gradient. TRL gathers every rank's tokens first, so with num_processes > 1
 * the setting is refused unless every rank's rows are merged in (settings/trl_rules.ts). No tokens → +inf (TRL: an
 * all-false mask).
 */
export function entropyThreshold(entropy: Float32Array, mask: ArrayLike<number>, q: number): number {
  const v = entropy.filter((_, i) => mask[i] !== 0).sort();
  if (v.length === 0) return Infinity;
  const pos = q * (v.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, v.length - 1);
  return Math.fround(v[lo] + Math.fround(Math.fround(v[hi] - v[lo]) * (pos - lo)));
}

function checkShapes(c: TrainerInputs, g: { logits: Float32Array; V: number } | null): void {
  const N = c.B * c.T;
  if (c.advantages.length !== c.B) throw new SettingsError(`advantages: TRL takes one advantage per sequence (${c.B}), got ${c.advantages.length}`);
  const per: Array<[string, ArrayLike<number> | null]> = [
    ['completion_ids', c.completion_ids],
    ['completion_mask', c.completion_mask],
    ['tool_mask', c.tool_mask],
    ['old_per_token_logps', c.old_per_token_logps],
    ['ref_per_token_logps', c.ref_per_token_logps],
    ['sampling_per_token_logps', c.sampling_per_token_logps],
  ];
  for (const [name, a] of per) if (a && a.length !== N) throw new SettingsError(`${name}: expected ${N} values (B·T), got ${a.length}`);
  if (g && g.logits.length !== N * g.V) throw new SettingsError(`logits: expected ${N * g.V} values (B·T·V), got ${g.logits.length}`);
}

/**
 * ∂loss/∂per_token_loss of TRL's _compute_loss for p.loss_type, the run's scalings in (trl_loss_value: the ranks'
 * mean, gradient_accumulation_steps, num_items_in_batch / num_processes): grpo / sapo M / max(1, n_b) / B / gas; bnpo
 * M / max(1, N of the rank) / ranks / gas; luspo n_b / (B·T·gas) at every position (its mean runs over padding);
 * dr_grpo, dapo, cispo, vespo M / their divisor (trlAggregation). The entropy bonus is a separate term. `rows` are the
 * forward's per-row sums (n_b at TRL_ROW_STATS·b + 1), `mask` TRL's `mask` (completion_mask × tool_mask).
 */
function trlTokenWeights(rows: ArrayLike<number>, mask: ArrayLike<number>, p: TrlLossParams): Float64Array {
  const { B, T, ranks } = p;
  const gas = p.gradient_accumulation_steps;
  const n = (b: number) => rows[b * TRL_ROW_STATS + 1];
  const Br = B / ranks;
  const rankTokens = Array.from({ length: ranks }, (_, k) => {
    let s = 0;
    for (let b = k * Br; b < (k + 1) * Br; b++) s += n(b);
    return s;
  });
  const { divisor } = trlAggregation(p);
  const w = new Float64Array(B * T);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      const i = b * T + t;
      switch (p.loss_type) {
        case 'grpo':
        case 'sapo':
          w[i] = mask[i] / Math.max(1, n(b)) / B / gas;
          break;
        case 'bnpo':
          w[i] = mask[i] / Math.max(1, rankTokens[Math.floor(b / Br)]) / ranks / gas;
          break;
        case 'luspo':
          w[i] = n(b) / (B * T) / gas;
          break;
        default:
          w[i] = mask[i] / divisor;
      }
    }
  }
  return w;
}

export const trlLoss: TrainerLoss = (gpu, c, opts) => trlObjective(gpu, c, { logits: c.logits, V: c.V }, opts);

/**
 * TRL's objective on log-probs the studio's forward already scored (every position, at `scored.temperature`):
 * its gradient stops at dlogp, dentropy. With `seat` its kernels join a shared submit and readback (the loss
 * table: src/grpo/trainers/from_logps.ts).
 */
export const trlLossFromLogps = (gpu: Gpu, c: TrainerInputs, scored: ScoredLogps, seat?: Seat): Promise<TrainerLossOutputs> => trlObjective(gpu, c, scored, { backward: false, seat });

/** The log-probs come from a gather of the logits (the CLI, dlogits possible) or as scored by the step's forward. */
async function trlObjective(gpu: Gpu, c: TrainerInputs, src: { logits: Float32Array; V: number } | ScoredLogps, opts: { backward: boolean; seat?: Seat }): Promise<TrainerLossOutputs> {
  checkShapes(c, 'logits' in src ? src : null);
  const parsedConfig = parseTrlConfig(c.config);
  const parsedRun = parseTrlRun(c.run);
  const [config, run] = [parsedConfig.values, parsedRun.values];
  const unknown_settings = [...parsedConfig.unknown.map((k) => `config.${k}`), ...parsedRun.unknown.map((k) => `run.${k}`)];
  const { B, T } = c;
  const N = B * T;
  if (!('logits' in src)) checkScored(src, N, config.temperature, 'config.temperature');
  const mask = Float64Array.from(c.completion_mask, (m, i) => m * (c.tool_mask ? c.tool_mask[i] : 1)); // TRL's `mask`
  const aux = new Float32Array(4 * N); // (B, T, 4): old, ref, sampling, mask
  for (let i = 0; i < N; i++) {
    aux[4 * i] = c.old_per_token_logps?.[i] ?? 0;
    aux[4 * i + 1] = c.ref_per_token_logps?.[i] ?? 0;
    aux[4 * i + 2] = c.sampling_per_token_logps?.[i] ?? 0;
    aux[4 * i + 3] = mask[i];
  }
  const localItems = mask.reduce((a, m) => a + m, 0);
  const present = { B, T, ref: !!c.ref_per_token_logps, sampling: !!c.sampling_per_token_logps, localItems };
  resolveTrlParams(config, run, present, null); // settings errors before any GPU work
  // Scored log-probs come with their entropies on the host: the threshold needs no GPU work, so every refusal
  // comes before this objective records anything (what a SubmitGroup participant must do).
  const entropyGated = config.top_entropy_quantile < 1;
  const threshold = (entropy: Float32Array) => (entropyGated ? entropyThreshold(entropy, mask, 1 - config.top_entropy_quantile) : null);

  const created: GPUBuffer[] = [];
  const up = (label: string, data: ArrayBufferView) => (created.push(gpu.upload(label, data)), created.at(-1)!);
  const buf = (label: string, bytes: number) => (created.push(gpu.createBuffer(label, bytes)), created.at(-1)!);
  try {
    let logp: GPUBuffer;
    let entropy: GPUBuffer;
    let gather: { rows: { logits: GPUBuffer; ids: GPUBuffer; mask: GPUBuffer; N: number; V: number; temperature: number }; lse: GPUBuffer } | null = null;
    let p: ReturnType<typeof resolveTrlParams>;
    if ('logits' in src) {
      const V = src.V;
      const logits = up('logits', src.logits);
      const ids = up('completion_ids', c.completion_ids);
      const every = up('rows_scored', new Int32Array(N).fill(1)); // score padding too (see header)
      const rows = { logits, ids, mask: every, N, V, temperature: config.temperature };
      logp = buf('per_token_logps', N * 4);
      const lse = buf('lse', N * 8);
      entropy = buf('per_token_entropy', N * 4);
      const rec1 = gpu.recorder('trl_logps');
      logprob_gather_forward(rec1, { ...rows, logp, lse, entropy, skipMasked: false });
      await rec1.submit();
      gather = { rows, lse };
      p = resolveTrlParams(config, run, present, entropyGated ? threshold(await gpu.readF32(entropy, N)) : null);
    } else {
      p = resolveTrlParams(config, run, present, threshold(src.per_token_entropy));
      logp = up('per_token_logps', src.per_token_logps);
      entropy = up('per_token_entropy', src.per_token_entropy);
    }
    const k = {
      logp,
      aux: up('trl_aux', aux),
      advantages: up('advantages', c.advantages),
      tok: buf('trl_tok', 16 * N),
      rows: buf('trl_rows', 4 * TRL_ROW_STATS * B),
      hasOld: !!c.old_per_token_logps,
      hasSampling: !!c.sampling_per_token_logps,
    };
    const seat = opts.seat ?? SubmitGroup.single(gpu, 'trl_loss'); // after the allocations: one that throws leaves no open recorder
    const rec = seat.recorder;
    trl_loss_forward(rec, { ...k, entropy }, p);
    let dlogits: GPUBuffer | null = null;
    // From scored log-probs the backward stops at ∂loss/∂logp, ∂loss/∂entropy (read back: the page shows them).
    const grad = opts.backward || !gather ? { dlogp: buf('dlogp', N * 4), dentropy: buf('dentropy', N * 4), totals: buf('trl_totals', 8 * p.ranks) } : null;
    if (grad) trl_loss_backward(rec, { ...k, ...grad }, p);
    if (grad && gather) {
      dlogits = buf('dlogits', N * gather.rows.V * 4);
      logprob_gather_backward(rec, { ...gather.rows, lse: gather.lse, dlogp: grad.dlogp, dlogits, dentropy: p.entropy_coef !== 0 ? { dentropy: grad.dentropy, entropy } : null });
    }
    // One round trip: the gathered log-probs and entropies (scored ones are the caller's already), the
    // per-token terms, the row sums and the gradient.
    const f32 = (b: ArrayBuffer) => new Float32Array(b);
    const read = (b: GPUBuffer | null, n: number) => (b ? [{ buf: b, byteSize: 4 * n }] : []);
    const got = (
      await seat.read([
        ...read(k.tok, 4 * N),
        ...read(k.rows, TRL_ROW_STATS * B),
        ...read(gather ? logp : null, N),
        ...read(gather ? entropy : null, N),
        ...read(dlogits, N * (gather?.rows.V ?? 0)),
        ...read(grad && !gather ? grad.dlogp : null, N),
        ...read(grad && !gather ? grad.dentropy : null, N),
      ])
    ).map(f32);
    const [tok, rs] = got;
    const [lp, ent] = 'logits' in src ? [got[2], got[3]] : [src.per_token_logps, src.per_token_entropy];
    const rest = got.slice(gather ? 4 : 2);
    const dl = dlogits ? rest[0] : null;
    const [dlogp, dentropy] = grad && !gather ? [rest[0], rest[1]] : [null, null];
    const col = (j: number) => fieldOf(tok, 4, j);
    const opsm = p.off_policy_mask_threshold !== null ? Float32Array.from({ length: N }, (_, i) => rs[Math.floor(i / T) * TRL_ROW_STATS + 5]) : null;
    // A vLLM *_mask mode removes a token by setting its IS ratio to 0 (vespo does not multiply by it).
    const isDrops = p.vllm_is_mode.endsWith('mask') && p.loss_type !== 'vespo';
    const effective = Float64Array.from(mask, (m, i) => m * (entropyGated ? tok[4 * i + 3] : 1) * (opsm ? opsm[i] : 1) * (isDrops && tok[4 * i + 2] === 0 ? 0 : 1));
    return {
      per_token_logps: lp,
      per_token_entropy: ent,
      per_token_kl: p.beta !== 0 ? col(1) : null,
      importance_sampling_ratio: p.vllm_is_mode !== 'off' ? col(2) : null,
      per_token_loss: col(0),
      loss_mask: mask,
      entropy_mask: entropyGated ? col(3) : null,
      off_policy_mask: opsm,
      effective_loss_mask: effective,
      loss: trl_loss_value(rs, p),
      token_weight: trlTokenWeights(rs, mask, p),
      kl_weight: p.beta !== 0 ? trlTokenWeights(rs, mask, p).map((w) => p.beta * w) : null,
      per_token_loss_includes_kl: true,
      dlogits: dl,
      dlogp,
      dentropy,
      unknown_settings,
    };
  } finally {
    // Retired, not destroyed: a seat's recorder may still be open (a shared submit still to come).
    created.forEach((b) => gpu.retire(b));
  }
}
