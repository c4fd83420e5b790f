// `grpo-studio plan --model DIR_OR_CONFIG --batch BxT [--prompt P] [--adapter R] [--checkpointing] [--score]
// [--json]`: the memory plan of one GRPO step (src/model/plan.ts) before any weight is read. DIR_OR_CONFIG
// is a checkpoint folder (its config.json), a config.json file, or a Hub id. The prompt defaults to half
// of T; --adapter R plans a LoRA of rank R on every linear layer with the base frozen in its config's
// torch_dtype; --score plans scoring only. --json prints the plan as an object whose total_bytes is the
// planned peak. Limits are WebGPU's defaults (what every adapter guarantees); buffers past them are listed
// (`buffers`, status 'does not fit' or 'windowed'), the exit code stays 0: a plan is not a failure.
import { existsSync, statSync } from 'node:fs';
import { ModelLoadError, parseConfig } from '../model/config.ts';
import { DEFAULT_LIMITS } from '../model/memory.ts';
import { formatStepPlan, planStep, type PlanOptions } from '../model/plan.ts';
import { openModelSource } from '../model/source_node.ts';
import { CliError, flag, parseArgs, readInput } from './args.ts';

const positiveInt = (name: string, v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`--${name}: expected a positive integer, got "${v}"`);
  return n;
};

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
  const args = parseArgs(argv, { values: ['model', 'batch', 'prompt', 'adapter'], switches: ['checkpointing', 'score', 'json'] });
  const model = flag(args, 'model');
  const batch = flag(args, 'batch');
  if (!model || !batch) throw new CliError('plan needs --model DIR_OR_CONFIG and --batch BxT (e.g. 8x512)');
  if (args.positional.length) throw new CliError(`unexpected argument "${args.positional[0]}"`);
  const m = /^(\d+)x(\d+)$/.exec(batch);
  if (!m) throw new CliError(`--batch: expected rows x tokens like 8x512, got "${batch}"`);
  const [B, T] = [positiveInt('batch', m[1]), positiveInt('batch', m[2])];
  const prompt = flag(args, 'prompt') ? positiveInt('prompt', flag(args, 'prompt')!) : Math.floor(T / 2);
  if (prompt >= T) throw new CliError(`--prompt ${prompt} leaves no completion tokens of the ${T} in --batch`);
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
    limits: DEFAULT_LIMITS,
  };
  const plan = planStep(cfg, opts);
  if (args.flags.has('json')) console.log(JSON.stringify({ model, ...opts, ...plan }));
  else console.log(formatStepPlan(model, opts, plan));
  return 0;
}
