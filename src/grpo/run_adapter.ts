// Whether a step on the adapter it is given (or on none) is the run's update, from the run's own settings: one
// decision for the CLI (src/cli/step.ts) and the page's worker. A run that trained a LoRA adapter updated only
// that adapter on a frozen base; stepping every parameter instead (or an adapter of another rank, scaling or
// set of modules) is another update, so it is refused naming the run's setting and what to give. The rows are
// the trainers' tables (src/grpo/settings/openrlhf.ts ds.lora.*, ds.load_in_4bit; src/grpo/settings/verl.ts
// lora_rank, lora_alpha, target_modules, exclude_modules, lora_adapter_path); TRL's GRPOConfig holds no adapter
// (its peft_config is the trainer's argument), so a TRL batch takes whatever adapter the user gives.
// Sources: OpenRLHF/OpenRLHF openrlhf/models/actor.py Actor.__init__ (LoraConfig(r=lora_rank, lora_alpha,
// target_modules, lora_dropout, bias="none"); BitsAndBytesConfig(load_in_4bit, nf4) for the base);
// volcengine/verl verl/workers/fsdp_workers.py ActorRolloutRefWorker._build_model_optimizer (_is_lora =
// lora_adapter_path set or lora_rank > 0; LoraConfig(r=lora_rank, lora_alpha, target_modules, exclude_modules,
// bias="none"), or PeftModel.from_pretrained(lora_adapter_path)). Neither passes use_rslora (PEFT: false); verl
// passes no lora_dropout (PEFT: 0).
import { isTargeted, linearModules } from '../model/lora.ts';
import type { ModelConfig } from '../model/config.ts';
import { trainingDropout } from './settings/dropout.ts';
import { rowOf } from './settings/effective.ts';
import { SettingsError, type TrainerId } from './settings/types.ts';

/** The adapter a step is given, as the step holds it (src/model/lora_adapter.ts LoraAdapter fits it as it is). */
export interface StepAdapter {
  config: { r: number; lora_alpha: number; use_rslora: boolean };
  /** Whether the adapter adapts this module (LoraAdapter.has). */
  has(module: string): boolean;
}

/** The rows of one trainer's table that describe the run's adapter (absent: the trainer has no such setting). */
interface AdapterRows {
  rank: string;
  alpha: string;
  target: string;
  exclude?: string;
  dropout?: string;
  quant4bit?: string;
  /** A saved adapter the run loaded (its own r, alpha and modules: lora_rank is not read). */
  path?: string;
  source: string;
}

const ROWS: Partial<Record<TrainerId, AdapterRows>> = {
  openrlhf: { rank: 'ds.lora.rank', alpha: 'ds.lora.alpha', target: 'ds.lora.target_modules', dropout: 'ds.lora.dropout', quant4bit: 'ds.load_in_4bit', source: 'OpenRLHF/OpenRLHF openrlhf/models/actor.py Actor.__init__' },
  verl: { rank: 'lora_rank', alpha: 'lora_alpha', target: 'target_modules', exclude: 'exclude_modules', path: 'lora_adapter_path', source: 'volcengine/verl verl/workers/fsdp_workers.py _build_model_optimizer' },
};

const GIVE = "give the run's adapter as it was at this step (a PEFT folder: `grpo-studio step --adapter DIR`, or the page's LoRA adapter section)";

/**
 * Whether the step on `adapter` (null: every parameter trains) is the update of the run `settings` describe
 * (its trainer and config; a key left out is its row's default). Throws a SettingsError (CLI exit 2) naming the
 * run's setting where it is not: a LoRA run stepped without an adapter, an adapter whose r / lora_alpha / rslora
 * or modules differ from the run's (both named), LoRA dropout (the trainer's train-mode forward draws it at
 * random: refused as a model's own dropout is, src/grpo/settings/dropout.ts), a 4-bit base. Returns notes for
 * what it accepts but is not the run's own: an adapter created here (`created`: lora_A from the studio's seed) or
 * an adapter on a run that trained every parameter. `model` is the loaded model's config (its linear modules).
 */
export function runAdapterNotes(settings: { trainer: TrainerId; config: Record<string, unknown> }, adapter: StepAdapter | null, model: ModelConfig, opts: { created?: boolean } = {}): string[] {
  const rows = ROWS[settings.trainer];
  if (!rows) return [];
  const value = (name: string): unknown => (name in settings.config && settings.config[name] !== undefined ? settings.config[name] : rowOf(settings.trainer, 'config', name)?.default);
  const fail = (name: string, text: string) => new SettingsError(`config.${name}: ${text} [${rows.source}]`);
  if (rows.quant4bit && value(rows.quant4bit) === true) throw fail(rows.quant4bit, "true: the run's base weights were quantized to 4-bit NF4 (bitsandbytes) and its forward, loss and update read those; the studio's are the checkpoint's as saved, so no step here is the run's");
  const rank = value(rows.rank) as number;
  const loaded = rows.path ? (value(rows.path) as string | null) : null;
  if (!(rank > 0) && loaded === null) return adapter ? [`config.${rows.rank} = ${rank}: the run trained every parameter; this step trains the adapter only, which is the studio's update, not the run's`] : [];
  const dropout = rows.dropout ? (value(rows.dropout) as number) : 0;
  if (dropout > 0) throw fail(rows.dropout!, `${dropout}: ${trainingDropout(settings.trainer, settings.config)?.why ?? 'the trainer computes its loss in train mode'}, so LoRA dropout drops each adapted layer's input at random in the loss's forward; the studio's forward has no dropout and does not reproduce that draw (set ${rows.dropout} to 0 to step the dropout-free adapter)`);
  const runText = loaded !== null ? `${rows.path} = ${JSON.stringify(loaded)}` : `${rows.rank} = ${rank}, ${rows.alpha} = ${value(rows.alpha)}`;
  if (!adapter) throw fail(loaded !== null ? rows.path! : rows.rank, `${loaded !== null ? JSON.stringify(loaded) : rank}: the run trained a LoRA adapter on a frozen base (${runText}), not every parameter; ${GIVE}`);
  const notes = opts.created ? [`the adapter is created here (lora_A from the studio's seed, lora_B = 0), not the run's: the loss is the base's as the run's first step, but lora_B's gradient goes through lora_A, so the update is the run's only with the run's own adapter (--adapter)`] : [];
  // A loaded adapter's r, scaling and modules are the run's by construction (PeftModel.from_pretrained).
  if (loaded !== null) return notes;
  const alpha = value(rows.alpha) as number;
  const a = adapter.config;
  if (a.r !== rank || a.lora_alpha !== alpha || a.use_rslora) {
    const given = `r = ${a.r}, lora_alpha = ${a.lora_alpha}${a.use_rslora ? ', use_rslora = true' : ''}`;
    throw fail(a.r !== rank ? rows.rank : rows.alpha, `the run's adapter has ${rows.rank} = ${rank}, ${rows.alpha} = ${alpha} (scaling ${alpha / rank}, no rslora), the step's adapter ${given} (scaling ${a.use_rslora ? a.lora_alpha / Math.sqrt(a.r) : a.lora_alpha / a.r}): ${GIVE}`);
  }
  const target = value(rows.target) as string | string[] | null;
  const exclude = rows.exclude ? (value(rows.exclude) as string | string[] | null) : null;
  if (target === null) throw fail(rows.target, "null: PEFT then adapts its default modules for the architecture, which the studio does not look up; give the run's target_modules");
  const linear = linearModules(model).map((m) => m.name);
  const runs = linear.filter((m) => isTargeted(target, m) && !(exclude !== null && isTargeted(exclude, m)));
  const has = linear.filter((m) => adapter.has(m));
  const onlyRun = runs.filter((m) => !has.includes(m));
  const onlyGiven = has.filter((m) => !runs.includes(m));
  if (onlyRun.length || onlyGiven.length) {
    const list = (xs: string[]) => `${xs.slice(0, 3).join(', ')}${xs.length > 3 ? `, … (${xs.length})` : ''}`;
    throw fail(rows.target, `${JSON.stringify(target)}${exclude !== null ? ` (${rows.exclude} ${JSON.stringify(exclude)})` : ''} adapts ${runs.length} module(s) of this model, the step's adapter ${has.length}: ${[onlyRun.length ? `the run's, not the adapter's: ${list(onlyRun)}` : '', onlyGiven.length ? `the adapter's, not the run's: ${list(onlyGiven)}` : ''].filter(Boolean).join('; ')}; ${GIVE}`);
  }
  return notes;
}
