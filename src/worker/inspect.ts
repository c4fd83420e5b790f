// The Doctor on a batch with the model the studio worker holds (src/worker/runner.ts): the page's import, its
// deferred tokenizer checks and the Doctor of a step's stages. The model's tokenizer and config.json facts go
// through doctorOptions (src/doctor/tokenizer_fit.ts) exactly as `grpo-studio doctor --tokenizer DIR` does, so
// the page and the CLI give one answer on one file whatever model is loaded; the grid's token texts come from
// the tokenizer only where it fits the batch (another model's tokenizer would name every cell wrongly).
import { diagnose, doctorOptions, modelFacts, type KnownModel } from '../doctor/index.ts';
import type { DoctorOptions, DoctorReport } from '../doctor/types.ts';
import type { GrpoBatch } from '../io/batch.ts';
import type { ModelConfig } from '../model/config.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import type { TokenTexts } from '../bridge/protocol.ts';

/** Decoded text of every token (special tokens as written), for the grid and the inspector. */
export function tokenTexts(tok: Tokenizer, batch: GrpoBatch): TokenTexts {
  return { by_id: tok.textsById(batch.prompt_ids, batch.completion_ids) };
}

/**
 * The loaded model as the Doctor knows it: its tokenizer and its config's facts (its name among them, as its
 * config.json records it: `--tokenizer DIR` on the same files reads the same).
 */
export function loadedModel(tokenizer: Tokenizer | undefined, config: ModelConfig, name: string): KnownModel {
  return { tokenizer, config: modelFacts(config), label: tokenizer ? `the loaded model's tokenizer (${name})` : `the loaded model (${name})` };
}

/**
 * The Doctor's report on an imported batch with the loaded model (null: none loaded). `deferTokenizerRules`
 * leaves the rules that decode and re-encode every row (seconds on a big batch) for a later call, saying so.
 */
export function inspectBatch(batch: GrpoBatch, model: KnownModel | null, opts: { deferTokenizerRules?: boolean; inferred?: DoctorOptions['inferred'] } = {}): { report: DoctorReport; token_texts?: TokenTexts; deferred?: boolean } {
  // `inferred`: the import's inferred ids (ImportResult.inferred), as import_job.ts and `grpo-studio doctor` pass them.
  const options = doctorOptions(batch, model ?? undefined, opts.inferred);
  if (!options.tokenizer) return { report: diagnose(batch, options) };
  const defer = opts.deferTokenizerRules ? 'running after the import (decode → encode of every row)' : undefined;
  return { report: diagnose(batch, { ...options, defer_tokenizer_rules: defer }), token_texts: tokenTexts(options.tokenizer, batch), deferred: !!defer };
}
