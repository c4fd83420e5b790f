// `grpo-studio mismatch BATCH [--model DIR] [--adapter DIR] [--tokenizer DIR] [--json] [--out FILE]`: why the
// sampler's log-probs of the sampled tokens (sampling_per_token_logps: vLLM, SGLang, the studio's sampler)
// differ from the trainer's. The trainer side is the dump's old_per_token_logps, or with --model the policy's
// recomputed on the GPU (score_completions, the batch's temperature, as `score`) — with --adapter (a PEFT
// folder) both with the adapter and without it, so an adapter that never reached the sampler shows as the
// sampler matching the base. Prints the analysis of src/grpo/mismatch/ (distributions, top tokens, classes,
// probability bins, diagnoses) and what each trainer's correction would do on the batch
// (src/grpo/mismatch/corrections.ts), or with --json the report, the corrections (no per-token arrays) and
// the recomputed log-probs, ragged like completion_ids. Token text from --tokenizer, else the --model folder's.
// Exit 0 when no diagnosis fires, 1 when one does (as Doctor findings), 2 for unusable input (one line naming
// file and field), 3 internal.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { nodeGpu } from '../gpu/node.ts';
import type { Gpu } from '../gpu/context.ts';
import { raggedFromPadded } from '../grpo/batch.ts';
import { runAdapterNotes } from '../grpo/run_adapter.ts';
import { analyseMismatch, mismatchInputOf } from '../grpo/mismatch/analysis.ts';
import { CORRECTIONS, correctionEffects, type CorrectionEffect } from '../grpo/mismatch/corrections.ts';
import type { Distribution, LogpSide, MismatchReport, Statistic } from '../grpo/mismatch/types.ts';
import type { GrpoBatch } from '../io/batch.ts';
import { loadLoraAdapter } from '../model/lora.ts';
import { LoraAdapter } from '../model/lora_adapter.ts';
import { CausalLM } from '../model/model.ts';
import { score_completions } from '../model/score.ts';
import { openModelSource } from '../model/source_node.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import { checkBatchForModel, checkScorableFile, checkOutPath, CliError, flag, modelOfFlag, padBatchOf, parseArgs, readBatchFor, stepSettingsOfFile, tokenizerFlag, warnUnused, writeOutput, writeResult, type ParsedArgs } from './args.ts';

const USAGE = 'usage: grpo-studio mismatch BATCH [--model DIR] [--adapter DIR] [--tokenizer DIR] [--json] [--out FILE]';
/** Top tokens the text report lists (--json has the report's whole list). */
const SHOWN_TOP = 10;

/** The correction's effect as JSON carries it: the per-token heat arrays left out. */
export type CorrectionSummary = Omit<CorrectionEffect, 'weights' | 'gradient_factor' | 'T'>;

export interface MismatchCliResult {
  batch: string;
  report: MismatchReport;
  corrections: CorrectionSummary[];
  /** With --model: the recomputed trainer side (with the adapter, when given) and, with --adapter, the base's. Ragged like completion_ids. */
  recomputed: { model: string; adapter: string | null; per_token_logps: number[][]; base_per_token_logps: number[][] | null } | null;
}

/** The trainer side with the loaded model (and adapter), and the base's without the adapter. */
async function recompute(gpu: Gpu, batch: GrpoBatch, path: string, modelDir: string, adapterDir: string | undefined): Promise<{ trainer: number[][]; base: number[][] | null }> {
  const padded = padBatchOf(batch, path);
  const settings = stepSettingsOfFile(batch, path);
  const { temperature } = settings.config.loss;
  // Scoring never trains: weights stay in their checkpoint dtype.
  const policy = await modelOfFlag('model', modelDir, () => CausalLM.from_pretrained(openModelSource(modelDir), gpu, { storage: 'checkpoint' }));
  let adapter: LoraAdapter | null = null;
  let base: CausalLM | null = null;
  try {
    warnUnused('mismatch', modelDir, policy.info);
    checkBatchForModel(batch, policy.config, path, 'score', 'policy');
    checkScorableFile(batch, padded, policy.config, path);
    adapter = adapterDir ? LoraAdapter.fromWeights(gpu, await loadLoraAdapter(openModelSource(adapterDir), policy.config)) : null;
    // The trainer side is the run's policy: a run that trained a LoRA adapter scores through it, as its step does
    // (src/grpo/run_adapter.ts: refused without it, or with another adapter, naming the batch's setting).
    try {
      for (const n of runAdapterNotes(settings.settings, adapter, policy.config)) console.error(`note: ${n}`);
    } catch (e) {
      if ((e as Error).name === 'SettingsError') throw new CliError(`${path}: ${(e as Error).message}`);
      throw e;
    }
    policy.adapter = adapter;
    base = adapter ? policy.withAdapter(null) : null;
    const n = padded.B * padded.C;
    // One forward per recorder, read before the next: the adapter view shares the model's workspace.
    const score = async (model: CausalLM): Promise<number[][]> => {
      const rec = gpu.recorder('mismatch score', { stream: true });
      const s = score_completions(rec, model, padded, { temperature });
      await rec.submit();
      try {
        return raggedFromPadded(await gpu.readF32(s.per_token_logps, n), padded);
      } finally {
        s.destroy();
      }
    };
    return { trainer: await score(policy), base: base ? await score(base) : null };
  } finally {
    base?.destroy();
    adapter?.destroy();
    policy.destroy();
  }
}

/** --tokenizer DIR, else the --model folder's tokenizer when it has one. */
async function tokenizerOf(args: ParsedArgs, modelDir: string | undefined): Promise<Tokenizer | undefined> {
  const given = await tokenizerFlag(args);
  if (given || !modelDir || !existsSync(join(modelDir, 'tokenizer.json'))) return given;
  const { loadTokenizerDir } = await import('../tokenize/node.ts');
  try {
    return await loadTokenizerDir(modelDir);
  } catch (e) {
    throw new CliError(`--model ${modelDir}: its tokenizer: ${(e as Error).message.split('\n')[0]}`);
  }
}

const num = (x: number | null | undefined, digits = 4): string => (x === null || x === undefined ? '—' : Number.isFinite(x) ? (Math.abs(x) >= 1e-3 || x === 0 ? Number(x.toPrecision(digits)).toString() : x.toExponential(2)) : String(x));
const pad = (s: string, w: number) => (s.length >= w ? s : s + ' '.repeat(w - s.length));

function quantileLine(name: string, d: Distribution): string {
  const s = d.summary;
  return `  ${pad(name, 14)} n ${pad(String(s.n), 7)} mean ${pad(num(s.mean), 10)} |mean| ${pad(num(s.mean_abs), 10)} p1 ${pad(num(s.q.p1), 10)} p5 ${pad(num(s.q.p5), 10)} p50 ${pad(num(s.q.p50), 10)} p95 ${pad(num(s.q.p95), 10)} p99 ${pad(num(s.q.p99), 10)} max ${num(s.max)}`;
}

function correctionLine(e: CorrectionSummary): string {
  const head = `  ${e.label}${e.assumed ? ` (assumed ${Object.entries(e.assumed).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(', ')})` : ''}`;
  if (e.error && e.tokens === null) return `${head}\n      refused: ${e.error}`;
  const counts = `${e.level ?? 'off'}: ${e.masked} masked, ${e.truncated} truncated of ${e.tokens} tokens, ${e.rows_masked} rows wholly masked; ESS ${num(e.ess)}, mean weight ${num(e.mean_weight)}`;
  const loss = e.error
    ? `loss: ${e.error}`
    : e.loss_note
      ? `loss: ${e.loss_note}`
      : `loss ${num(e.loss_off, 6)} → ${num(e.loss_on, 6)}; |Δ dlogp| mean ${num(e.gradient?.mean_abs)} max ${num(e.gradient?.max_abs)}; dlogp on/off ${num(e.gradient?.factor.min)} … ${num(e.gradient?.factor.max)} (mean ${num(e.gradient?.factor.mean)})`;
  return `${head}\n      ${counts}\n      ${loss}`;
}

function formatText(r: MismatchCliResult): string {
  const { report } = r;
  const lines: string[] = [];
  const trainer = r.recomputed ? `${report.trainer} (--model ${r.recomputed.model}${r.recomputed.adapter ? ` with --adapter ${r.recomputed.adapter}` : ''})` : report.trainer;
  lines.push(`${r.batch}: sampler = ${report.sampler}, trainer = ${trainer}`);
  lines.push(`  ${report.rows} rows, ${report.tokens} tokens compared${report.nonfinite ? `, ${report.nonfinite} loss tokens skipped (non-finite)` : ''}; d = trainer − sampler, tolerance ${report.tolerance}`);
  if (report.adapter) lines.push(`  adapter: mean |d| with the adapter ${num(report.adapter.with_adapter_mean_abs)}, without it (base) ${num(report.adapter.base_mean_abs)}`);
  const stats: Statistic[] = ['log_ratio', 'k1', 'k2', 'k3'];
  lines.push('PER TOKEN', ...stats.map((s) => quantileLine(s, report.token[s])));
  lines.push('PER SEQUENCE (row means; log_ratio_sum = Σ d)', ...[...stats, 'log_ratio_sum' as const].map((s) => quantileLine(s, report.sequence[s])));
  lines.push(`TOP TOKENS (${Math.min(SHOWN_TOP, report.top.length)} of ${report.top.length})`);
  for (const t of report.top.slice(0, SHOWN_TOP)) {
    const text = t.text === undefined ? '' : ` ${JSON.stringify(t.text)}`;
    lines.push(`  sample ${t.sample} position ${t.position} turn ${t.turn}: id ${t.id}${text}  p_sampler ${num(Math.exp(t.sampler_logp))}  p_trainer ${num(Math.exp(t.trainer_logp))}  d ${num(t.log_ratio)}${t.context ? `  ${JSON.stringify(t.context)}` : ''}`);
  }
  lines.push('BY TOKEN CLASS');
  for (const c of report.classes) lines.push(`  ${pad(c.label, 32)} ${pad(String(c.tokens), 7)} tokens  mean ${pad(num(c.mean), 10)} |mean| ${pad(num(c.mean_abs), 10)} max ${pad(num(c.max_abs), 10)} share ${num(100 * c.share, 3)}%`);
  lines.push('BY SAMPLER PROBABILITY');
  for (const b of report.by_probability) lines.push(`  [${b.lo}, ${b.hi})  ${pad(String(b.tokens), 7)} tokens  mean ${pad(num(b.mean), 10)} |mean| ${num(b.mean_abs)}`);
  lines.push(`DIAGNOSES (${report.diagnoses.length})`);
  for (const d of report.diagnoses) {
    const rows = d.rows.map((x) => `${x.sample}${x.position === undefined ? '' : `@${x.position}`}${x.turn === undefined ? '' : ` (turn ${x.turn})`}: ${num(x.value)}`);
    lines.push(`  [${d.id}] ${d.title}`, `      ${d.evidence}`, `      rows ${rows.join(', ')}`, `      fix: ${d.fix}`);
  }
  lines.push('CORRECTIONS (first pass, policy = trainer side: loss with the correction off → on)', ...r.corrections.map(correctionLine));
  lines.push(`${r.batch}: ${report.diagnoses.length} diagnosis(es)`);
  return lines.join('\n') + '\n';
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['model', 'adapter', 'tokenizer', 'out'], switches: ['json'] });
  if (args.positional.length !== 1) throw new CliError(USAGE);
  const path = args.positional[0];
  const modelDir = flag(args, 'model');
  const adapterDir = flag(args, 'adapter');
  if (adapterDir && !modelDir) throw new CliError('--adapter needs --model DIR (the base the adapter applies to)');
  const out = flag(args, 'out');
  checkOutPath(out);
  const { batch } = readBatchFor(path, 'score');
  const tokenizer = await tokenizerOf(args, modelDir);
  const text = tokenizer && ((id: number) => (id < tokenizer.vocab_size ? tokenizer.decode([id]) : `<${id}>`));
  const inputOf = (trainer?: LogpSide, base?: LogpSide) => mismatchInputOf(batch, { source: path, trainer, base, special_ids: tokenizer && new Set(tokenizer.special_token_ids), tokenText: text });
  // Both sides before any model is read: a batch without the sampler's log-probs is one line, now.
  if (modelDir) inputOf({ source: 'recomputed', logps: batch.completion_ids });
  const gpu = await nodeGpu();
  const sides = modelDir ? await recompute(gpu, batch, path, modelDir, adapterDir) : null;
  const input = sides ? inputOf({ source: 'recomputed', logps: sides.trainer }, sides.base ? { source: 'recomputed_base', logps: sides.base } : undefined) : inputOf();
  const report = analyseMismatch(input);
  const effects = await correctionEffects(gpu, batch, input.trainer.logps, CORRECTIONS.map((c) => ({ id: c.id })), { name: path, reference: sides?.base ?? undefined });
  const result: MismatchCliResult = {
    batch: path,
    report,
    corrections: effects.map(({ weights: _w, gradient_factor: _g, T: _T, ...rest }) => rest),
    recomputed: sides ? { model: modelDir!, adapter: adapterDir ?? null, per_token_logps: sides.trainer, base_per_token_logps: sides.base } : null,
  };
  // As Doctor findings: a diagnosis is exit 1 (main.ts EXIT.findings).
  const found = report.diagnoses.length ? 1 : 0;
  if (args.flags.has('json')) {
    // A correction that rejects every token leaves the trainer's token mean at 0 / 0: its NaN loss is written
    // (and named on stderr) as what the trainer would compute, and the exit code stays the diagnoses'.
    await writeResult(out, result, 'mismatch');
    return found;
  }
  const body = formatText(result);
  if (out) writeOutput(out, body);
  else await new Promise<void>((resolve, reject) => process.stdout.write(body, (e) => (e ? reject(e) : resolve())));
  return found;
}
