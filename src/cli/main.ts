// `grpo-studio <verb>`: the headless entry. Each verb lives in its own module and is loaded lazily,
// so `doctor` never initialises a GPU and `loss` never loads a tokenizer. main() never throws: it maps
// every outcome onto the exit codes the README documents — 0 clean, 1 error findings (or a non-finite
// result), 2 unusable input (one line naming file, field, sample, position), 3 internal error (one line;
// the stack trace only with --debug).
import { CliError } from './args.ts';

export const EXIT = { ok: 0, findings: 1, input: 2, internal: 3 } as const;

/** Error classes that mean "the input cannot be used": one line, exit 2. Matched by name, so no verb module is loaded here. */
const INPUT_ERRORS = new Set(['CliError', 'SafeTensorsError', 'BatchFormatError', 'ModelLoadError', 'InputError', 'SettingsError', 'GrpoLossError', 'OptimizerConfigError', 'TemplateError']);

type Verb = { summary: string; load: () => Promise<{ run(argv: string[]): Promise<number> }> };

const VERBS: Record<string, Verb> = {
  loss: { summary: 'loss CASE.safetensors [--out RESULT.json]   run the GRPO loss kernels on a loss case', load: () => import('./loss.ts') },
  advantages: { summary: 'advantages CASE.safetensors [--out RESULT.json]   TRL / verl advantages of an advantage case', load: () => import('./advantages.ts') },
  doctor: { summary: 'doctor BATCH... [--tokenizer DIR] [--json]   check a batch (grpo-batch/v1, TRL, verl, OpenRLHF, prime-rl, NeMo-RL, slime)', load: () => import('./doctor.ts') },
  convert: { summary: 'convert IN... [--out batch.json] [--tokenizer DIR]   write grpo-batch/v1 from a TRL / verl / OpenRLHF / prime-rl / NeMo-RL / slime dump', load: () => import('./convert.ts') },
  score: { summary: 'score --model DIR --batch BATCH.json [--ref-model DIR] [--out RESULT.json]   re-score a batch', load: () => import('./score.ts') },
  report: { summary: 'report BATCH [--out report.html] [--tokenizer DIR]   one self-contained offline HTML report (grid, findings, settings)', load: () => import('./report.ts') },
  plan: { summary: 'plan --model DIR_OR_CONFIG --batch BxT [--prompt P] [--adapter R] [--checkpointing] [--score] [--json]   memory plan of one step', load: () => import('./plan.ts') },
  mismatch: { summary: 'mismatch BATCH [--model DIR] [--adapter DIR] [--tokenizer DIR] [--json] [--out FILE]   where and why sampler and trainer log-probs disagree, and what each correction would do', load: () => import('./mismatch.ts') },
  step: { summary: 'step --model DIR --batch BATCH.json [--ref-model DIR] [--adapter DIR | --create-adapter r=R,lora_alpha=A,use_rslora=B,target_modules=all-linear|NAME,...,seed=S] [--ref-adapter] [--save-adapter DIR] [--checkpointing] [--out RESULT.json]   one GRPO update', load: () => import('./step.ts') },
};

function usage(): string {
  return ['usage: grpo-studio <verb> ...', ...Object.values(VERBS).map((v) => `  grpo-studio ${v.summary}`)].join('\n');
}

/** A message as one printable line: its first line, control bytes (a binary file's, quoted back) escaped. */
function oneLine(message: string): string {
  // eslint-disable-next-line no-control-regex
  return message.split('\n')[0].replace(/[\x00-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

export async function main(argvIn: string[]): Promise<number> {
  const debug = argvIn.includes('--debug');
  const [verb, ...rest] = argvIn.filter((a) => a !== '--debug');
  if (verb === '--help' || verb === '-h') {
    console.log(usage());
    return EXIT.ok;
  }
  const v = verb ? VERBS[verb] : undefined;
  if (!v) {
    console.error(`grpo-studio: ${verb ? `unknown verb "${oneLine(verb)}"` : 'no verb'} (have ${Object.keys(VERBS).join(', ')}; grpo-studio --help for usage)`);
    return EXIT.input;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(`usage: grpo-studio ${v.summary}`);
    return EXIT.ok;
  }
  try {
    return await (await v.load()).run(rest);
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    const line = oneLine(err.message || String(err));
    if (err instanceof CliError || INPUT_ERRORS.has(err.name)) {
      console.error(`grpo-studio ${verb}: ${line}`);
      return EXIT.input;
    }
    // A stack overflow or out-of-memory on a huge input is still a bug of ours, not of the input.
    console.error(`grpo-studio ${verb}: internal error: ${err.name}: ${line}${debug ? '' : ' (rerun with --debug for the stack trace)'}`);
    if (debug) console.error(err.stack);
    return EXIT.internal;
  }
}

/** Resolves once everything written to stdout and stderr has been handed to the OS (pipes included). */
export async function flushed(): Promise<void> {
  const drain = (s: NodeJS.WriteStream) => new Promise<void>((resolve) => (s.writableLength === 0 && !s.writableNeedDrain ? resolve() : s.write('', () => resolve())));
  await Promise.all([drain(process.stdout), drain(process.stderr)]);
}
