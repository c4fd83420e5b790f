// `grpo-studio loss CASE.safetensors [--out RESULT.json]`: runs the GRPO loss kernels on the GPU for one
// loss case (golden/README.md format: inputs + `config` metadata; expected tensors are ignored) and
// writes per-token outputs [B][T], every aggregation and dlogits [B][T][V] as JSON. Masked rows are
// scored too, so every position matches what TRL computes. A case with a `trainer` in its metadata
// (golden/trainers) runs that trainer's own objective instead (trainer_case.ts).
import { checkOutPath, CliError, flag, nest, parseArgs, readInput, writeResult } from './args.ts';
import { parseSafeTensors, shapeOf, type SafeTensors } from '../io/safetensors.ts';
import { Dump } from '../io/formats/common.ts';
import { grpo_loss, parseGrpoLossConfig, readGrpoLoss, GrpoLossError, type GrpoLossConfig, type GrpoLossInputs } from '../grpo/loss.ts';
import type { Gpu } from '../gpu/context.ts';

/** A loss case on the CPU. */
export interface LossCase {
  B: number;
  T: number;
  V: number;
  logits: Float32Array; // (B, T, V)
  completion_ids: Int32Array; // (B, T)
  completion_mask: Int32Array; // (B, T)
  advantages: Float32Array; // (B)
  old_per_token_logps: Float32Array | null; // (B, T)
  ref_per_token_logps: Float32Array | null; // (B, T)
  config: GrpoLossConfig;
}

function expectShape(st: SafeTensors, name: string, shape: number[], source: string): void {
  if (!st.tensors.has(name)) throw new CliError(`${source}: missing tensor "${name}"`);
  const got = shapeOf(st, name);
  if (got.length !== shape.length || got.some((d, i) => d !== shape[i])) {
    throw new CliError(`${source}: tensor "${name}" has shape ${JSON.stringify(got)}, expected ${JSON.stringify(shape)}`);
  }
}

/**
 * Reads and checks a loss case; every problem is one line naming the file and the tensor (and sample, position).
 * Tensors and the `config` metadata are read as the batch importers read a dump (src/io/formats/common.ts Dump):
 * ids and masks exactly in any whole-number dtype (a float tensor only if every value is an exact integer), the
 * config in Python's JSON dialect (NaN as json.dumps writes it), so one file is read alike by `loss` and `doctor`.
 */
export function readLossCase(bytes: Uint8Array | SafeTensors, source = 'loss case'): LossCase {
  const st = bytes instanceof Uint8Array ? parseSafeTensors(bytes, source) : bytes;
  const d = new Dump(st, source);
  if (!st.tensors.has('logits')) throw new CliError(`${source}: missing tensor "logits"`);
  const ls = shapeOf(st, 'logits');
  if (ls.length !== 3 || ls.some((n) => n < 1)) throw new CliError(`${source}: tensor "logits" has shape ${JSON.stringify(ls)}, expected [B, T, V]`);
  const [B, T, V] = ls;
  expectShape(st, 'completion_ids', [B, T], source);
  expectShape(st, 'completion_mask', [B, T], source);
  expectShape(st, 'advantages', [B], source);
  // The kernels read f32: an F64 tensor is narrowed as toF32 narrows it.
  const f32 = (name: string): Float32Array => {
    const a = d.floatData(name);
    return a instanceof Float32Array ? a : Float32Array.from(a);
  };
  const optional = (name: string): Float32Array | null => {
    if (!st.tensors.has(name)) return null;
    expectShape(st, name, [B, T], source);
    return f32(name);
  };
  if (st.metadata.config === undefined) throw new CliError(`${source}: no "config" in the metadata`);
  let config: GrpoLossConfig;
  try {
    config = parseGrpoLossConfig(d.metaObject('config'), 'config');
  } catch (e) {
    if (e instanceof GrpoLossError) throw new CliError(`${source}: ${e.message}`);
    throw e;
  }
  const c: LossCase = {
    B,
    T,
    V,
    logits: f32('logits'),
    completion_ids: d.wholeData('completion_ids', 'ids'),
    completion_mask: d.wholeData('completion_mask', 'mask'),
    advantages: f32('advantages'),
    old_per_token_logps: optional('old_per_token_logps'),
    ref_per_token_logps: optional('ref_per_token_logps'),
    config,
  };
  for (let i = 0; i < B * T; i++) {
    const at = `sample ${Math.floor(i / T)}, position ${i % T}`;
    if (c.completion_ids[i] >= V) throw new CliError(`${source}: completion_ids at ${at} is ${c.completion_ids[i]}, outside the vocabulary [0, ${V})`);
    if (c.completion_mask[i] !== 0 && c.completion_mask[i] !== 1) throw new CliError(`${source}: completion_mask at ${at} is ${c.completion_mask[i]}, expected 0 or 1`);
  }
  // Non-finite inputs make TRL's loss NaN even under mask 0 (NaN · 0 = NaN): stop rather than print a number it would not.
  const finite = (name: string, a: Float32Array | null, perToken: boolean, ok = Number.isFinite) => {
    const i = a ? a.findIndex((x) => !ok(x)) : -1;
    if (i >= 0) throw new CliError(`${source}: ${name} at ${perToken ? `sample ${Math.floor(i / T)}, position ${i % T}` : `sample ${i}`} is ${a![i]}: the loss would be NaN`);
  };
  finite('advantages', c.advantages, false);
  finite('old_per_token_logps', c.old_per_token_logps, true);
  finite('ref_per_token_logps', c.ref_per_token_logps, true);
  const i = c.logits.findIndex((x) => Number.isNaN(x) || x === Infinity); // −inf logits (a banned token) are legitimate
  if (i >= 0) throw new CliError(`${source}: logits at sample ${Math.floor(i / (T * V))}, position ${Math.floor(i / V) % T}, token ${i % V} is ${c.logits[i]}`);
  if (config.beta !== 0 && !c.ref_per_token_logps) throw new CliError(`${source}: config.beta = ${config.beta} needs tensor "ref_per_token_logps"`);
  return c;
}

/** GPU inputs for grpo_loss from a loss case. */
export function uploadLossCase(gpu: Gpu, c: LossCase): GrpoLossInputs {
  return {
    B: c.B,
    T: c.T,
    V: c.V,
    logits: gpu.upload('logits', c.logits),
    completion_ids: gpu.upload('completion_ids', c.completion_ids),
    completion_mask: gpu.upload('completion_mask', c.completion_mask),
    advantages: gpu.upload('advantages', c.advantages),
    old_per_token_logps: c.old_per_token_logps && gpu.upload('old_per_token_logps', c.old_per_token_logps),
    ref_per_token_logps: c.ref_per_token_logps && gpu.upload('ref_per_token_logps', c.ref_per_token_logps),
  };
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['out'] });
  checkOutPath(flag(args, 'out'));
  if (args.positional.length !== 1) throw new CliError('usage: grpo-studio loss CASE.safetensors [--out RESULT.json]');
  const path = args.positional[0];
  const st = parseSafeTensors(readInput(path), path);
  if (st.metadata.trainer !== undefined) return runTrainer(st, path, flag(args, 'out'));
  const c = readLossCase(st, path);
  const { nodeGpu } = await import('../gpu/node.ts');
  const gpu = await nodeGpu();
  let res;
  try {
    res = await grpo_loss(gpu, uploadLossCase(gpu, c), c.config, { scoreMaskedRows: true });
  } catch (e) {
    if (e instanceof GrpoLossError) throw new CliError(`${path}: ${e.message}`);
    throw e;
  }
  const r = await readGrpoLoss(gpu, res, { dlogits: true });
  const { B, T, V } = c;
  const bt = (a: ArrayLike<number> | null) => (a ? nest(a, [B, T]) : null);
  const result = {
    per_token_logps: bt(r.per_token_logps),
    per_token_entropy: bt(r.per_token_entropy),
    per_token_kl: bt(r.per_token_kl),
    importance_ratio: bt(r.importance_ratio),
    per_token_loss: bt(r.per_token_loss),
    is_low_clipped: bt(r.is_low_clipped),
    is_high_clipped: bt(r.is_high_clipped),
    loss: r.loss,
    loss_type: c.config.loss_type,
    losses: r.losses,
    clip_counts: r.clip_counts,
    dlogits: nest(r.dlogits!, [B, T, V]),
    adapter: gpu.adapter,
  };
  const code = await writeResult(flag(args, 'out'), result, 'loss');
  res.destroy();
  return code;
}

/** A trainer case (metadata `trainer`): the trainer's own objective, outputs named as the case's tensors. */
async function runTrainer(st: SafeTensors, path: string, out: string | undefined): Promise<number> {
  const { nodeGpu } = await import('../gpu/node.ts');
  const { runTrainerCase } = await import('./trainer_case.ts');
  const r = await runTrainerCase(await nodeGpu(), st, path);
  const code = await writeResult(out, r.out, 'loss');
  if (r.missing.length) {
    console.error(`grpo-studio loss: ${path}: the ${st.metadata.trainer} objective does not form ${r.missing.join(', ')} for this config`);
    return Math.max(code, 1);
  }
  return code;
}
