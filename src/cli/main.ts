// `grpo-studio <verb>`: the headless entry. Each verb lives in its own module and is loaded lazily,
// so `doctor` never initialises a GPU and `loss` never loads a tokenizer.
import { CliError } from './args.ts';

type Verb = { summary: string; load: () => Promise<{ run(argv: string[]): Promise<number> }> };

const VERBS: Record<string, Verb> = {
  loss: { summary: 'loss CASE.safetensors [--out RESULT.json]   run the GRPO loss kernels on a loss case', load: () => import('./loss.ts') },
  doctor: { summary: 'doctor BATCH... [--tokenizer DIR] [--json]   check a batch (grpo-batch/v1, TRL, verl, OpenRLHF, prime-rl)', load: () => import('./doctor.ts') },
  convert: { summary: 'convert IN... [--out batch.json] [--tokenizer DIR]   write grpo-batch/v1 from a TRL / verl / OpenRLHF / prime-rl dump', load: () => import('./convert.ts') },
  score: { summary: 'score --model DIR --batch BATCH.json [--ref-model DIR] [--out RESULT.json]   re-score a batch', load: () => import('./score.ts') },
  plan: { summary: 'plan --model DIR_OR_CONFIG --batch BxT [--prompt P] [--adapter R] [--checkpointing] [--score] [--json]   memory plan of one step', load: () => import('./plan.ts') },
  step: { summary: 'step --model DIR --batch BATCH.json [--ref-model DIR] [--adapter DIR [--ref-adapter] [--save-adapter DIR]] [--checkpointing] [--out RESULT.json]   one GRPO update', load: () => import('./step.ts') },
};

function usage(): string {
  return ['usage: grpo-studio <verb> ...', ...Object.values(VERBS).map((v) => `  grpo-studio ${v.summary}`)].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (!verb || verb === '--help' || verb === '-h') {
    console.log(usage());
    return verb ? 0 : 2;
  }
  const v = VERBS[verb];
  if (!v) {
    console.error(`grpo-studio: unknown verb "${verb}"\n${usage()}`);
    return 2;
  }
  try {
    return await (await v.load()).run(rest);
  } catch (e) {
    // Bad input (CliError, a malformed file) is exit 2 with one line; anything else is a bug and keeps its stack.
    const err = e as Error;
    if (err instanceof CliError || err.name === 'SafeTensorsError' || err.name === 'BatchFormatError' || err.name === 'ModelLoadError') {
      console.error(`grpo-studio ${verb}: ${err.message.split('\n')[0]}`);
      return 2;
    }
    throw e;
  }
}
