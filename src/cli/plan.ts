// `grpo-studio plan --model DIR_OR_CONFIG --batch BxT [--prompt P] [--adapter R] [--checkpointing] [--score]
// [--limits adapter|default] [--json]`: the memory plan of one GRPO step (src/model/plan.ts) before any weight is read. DIR_OR_CONFIG
// is a checkpoint folder (its config.json), a config.json file, or a Hub id. The prompt defaults to half
// of T; --adapter R plans a LoRA of rank R on every linear layer with the base frozen in its config's
// torch_dtype; --score plans scoring only. --json prints the plan as an object whose total_bytes is the
// planned peak. Buffers are checked against the limits of the adapter this machine would step on (the
// device `step` opens, src/gpu/node.ts: every limit raised to the adapter's), as the page checks against its
// own; WebGPU's defaults (what every adapter guarantees) only with --limits default or when no adapter opens
// — a 0.254 GiB embedding is no problem on an adapter that binds 4 GiB. The output names the limits used.
// Buffers past them are listed (`buffers`, status 'does not fit' or 'windowed'), and rows longer than a learned
// position table (GPT-2's n_positions: `positions`, which `step` would refuse); the exit code stays 0: a plan is not
// a failure.
import { existsSync, statSync } from 'node:fs';
import { ModelLoadError, parseConfig } from '../model/config.ts';
import { DEFAULT_LIMITS, type BufferLimits } from '../model/memory.ts';
import { formatStepPlan, planStep, type PlanOptions } from '../model/plan.ts';
import { openModelSource } from '../model/source_node.ts';
import { modelLimits } from '../io/validate.ts';
import { CliError, flag, parseArgs, readInput } from './args.ts';

const positiveInt = (name: string, v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`--${name}: expected a positive integer, got "${v}"`);
  return n;
};

/** The limits to plan against and where they come from. */
async function bufferLimits(choice: string | undefined): Promise<{ limits: BufferLimits; from: string }> {
  if (choice !== undefined && choice !== 'adapter' && choice !== 'default') throw new CliError(`--limits: expected adapter or default, got "${choice}"`);
  if (choice === 'default') return { limits: DEFAULT_LIMITS, from: 'WebGPU defaults (--limits default)' };
  try {
    const { nodeGpu } = await import('../gpu/node.ts');
    const gpu = await nodeGpu();
    const a = gpu.adapter;
    return { limits: { maxBufferSize: gpu.limits.maxBufferSize, maxStorageBufferBindingSize: gpu.limits.maxStorageBufferBindingSize }, from: `adapter ${[a.vendor, a.architecture, a.description].filter(Boolean).join(' ') || a.backend}` };
  } catch (e) {
    return { limits: DEFAULT_LIMITS, from: `WebGPU defaults (no adapter: ${(e as Error).message})` };
  }
}

async function readConfig(path: string): Promise<Record<string, unknown>> {
  if (existsSync(path) && statSync(path).isFile()) {
    try {
      return JSON.parse(new TextDecoder().decode(readInput(path)));
    } catch (e) {
      throw new ModelLoadError(`${path}: not valid JSON (${(e as Error).message})`);
    }
  }
  return (await openModelSource(path).readJSON('config.json')) as Record<string, unknown>;
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['model', 'batch', 'prompt', 'adapter', 'limits'], switches: ['checkpointing', 'score', 'json'] });
  const model = flag(args, 'model');
  const batch = flag(args, 'batch');
  if (!model || !batch) throw new CliError('plan needs --model DIR_OR_CONFIG and --batch BxT (e.g. 8x512)');
  if (args.positional.length) throw new CliError(`unexpected argument "${args.positional[0]}"`);
  const m = /^(\d+)x(\d+)$/.exec(batch);
  if (!m) throw new CliError(`--batch: expected rows x tokens like 8x512, got "${batch}"`);
  const [B, T] = [positiveInt('batch', m[1]), positiveInt('batch', m[2])];
  const prompt = flag(args, 'prompt') ? positiveInt('prompt', flag(args, 'prompt')!) : Math.floor(T / 2);
  if (prompt >= T) throw new CliError(`--prompt ${prompt} leaves no completion tokens of the ${T} in --batch`);
  const { limits, from } = await bufferLimits(flag(args, 'limits'));
  const raw = await readConfig(model);
  let cfg;
  try {
    cfg = parseConfig(raw);
  } catch (e) {
    // "config.json: …" alone does not say which one: name the --model given.
    if (e instanceof ModelLoadError) throw new ModelLoadError(`${model}: ${e.message}`);
    throw e;
  }
  const dtypeName = raw.torch_dtype ?? raw.dtype;
  const opts: PlanOptions = {
    B, T, prompt,
    adapter: flag(args, 'adapter') ? positiveInt('adapter', flag(args, 'adapter')!) : null,
    checkpointing: args.flags.has('checkpointing'),
    scoreOnly: args.flags.has('score'),
    dtype: dtypeName === 'bfloat16' ? 'bf16' : 'f32',
    limits,
    limits_from: from,
  };
  const plan = planStep(cfg, opts);
  // A learned position table (GPT-2) bounds the row, as `step` checks it (modelLimits): said like a buffer that does
  // not fit — listed with a "!", the exit code still 0.
  const { max_positions } = modelLimits(cfg);
  const positions = max_positions !== undefined && T > max_positions ? `batch rows of ${T} tokens > the model's ${max_positions} positions (n_positions / max_position_embeddings): step refuses such a batch` : undefined;
  if (args.flags.has('json')) console.log(JSON.stringify({ model, ...opts, ...plan, ...(positions ? { positions } : {}) }));
  else console.log(formatStepPlan(model, opts, plan) + (positions ? `\n  ! ${positions}` : ''));
  return 0;
}
