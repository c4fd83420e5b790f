// Whether a tokenizer at hand (the page's loaded model, the CLI's --tokenizer DIR) is the batch's own, and the
// Doctor's options derived from the batch plus that tokenizer and its model's config.json: the one place the
// page's Doctor and `grpo-studio doctor` get them, so one batch gives one answer whatever model happens to be
// loaded. A tokenizer decodes a batch only when it fits: the batch's pad and EOS ids are its pad, EOS or special
// tokens, the model name the dump records (if any) is its model's (by the name its config.json records, so the same
// files give the same answer on the page and in the CLI), and every id lies inside its vocabulary;
// otherwise the rules that decode (template-mismatch, retokenization-mismatch) are skipped with the reason. Its
// model's vocabulary bounds the batch's ids (token-out-of-vocabulary) as soon as pad, EOS and name agree: ids
// past it are then the finding, not a reason to look away. A model that is not the batch's says nothing about
// it: its type, vocabulary and positions are not used, and the batch's own config (model_type, position_ids)
// comes first.
import { MODEL_NAME_KEYS, type GrpoBatch } from '../io/batch.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import { ABSOLUTE_POSITION_MODELS } from './rules/position-ids-shift.ts';
import type { DoctorOptions } from './types.ts';

/** What the Doctor reads of a model's config.json: a key absent or not of its type is unknown. */
export interface ModelFacts {
  model_type?: string;
  vocab_size?: number;
  /** Learned absolute positions only (GPT-2's n_positions): the padded rows must fit them. */
  max_positions?: number;
  /**
   * The model's name as its config.json records it (`_name_or_path`, written by save_pretrained: the Hub id it was
   * loaded from), when a name and not a path. Read from the files, never from how they were chosen (a Hub id typed
   * in the page, a folder's name), so the page and `--tokenizer DIR` on the same files compare the same name.
   */
  name?: string;
}

/** A tokenizer the user has at hand, with what is known of its model. */
export interface KnownModel {
  /** None: a weights-only model folder (no tokenizer.json); the rules that decode are skipped, saying so. */
  tokenizer?: Tokenizer;
  config?: ModelFacts;
  /** How a skip reason names it ("the loaded model's tokenizer (tiny-adder)", "--tokenizer DIR"). */
  label: string;
}

export interface TokenizerFit {
  /** Pad, EOS and model name agree: the batch was tokenized for this model, so its vocabulary bounds the ids. */
  sameModel: boolean;
  /** The same model and every id inside the tokenizer's vocabulary: the tokenizer may decode the batch. */
  fits: boolean;
  /** Why not, one clause each. */
  reasons: string[];
}

/** Why the rules that decode are skipped for a model loaded without a tokenizer (the page's model panel says the same). */
export const NO_TOKENIZER = 'no tokenizer: ids shown, tokenizer rules skipped';


const count = (v: unknown): number | undefined => (Number.isInteger(v) && (v as number) > 0 ? (v as number) : undefined);

/** A model name, not a path on some machine ("./ckpt", "/scratch/…", "~/m", "C:\\m"): a path names nothing here. */
const asName = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' && !/^[./~]|\\/.test(v) ? v : undefined);

/** The facts of a config.json, raw or as src/model/config.ts parsed it (the keys read here agree). */
export function modelFacts(config: object): ModelFacts {
  const cfg = config as Readonly<Record<string, unknown>>;
  const model_type = typeof cfg.model_type === 'string' ? cfg.model_type : undefined;
  const absolute = model_type !== undefined && ABSOLUTE_POSITION_MODELS.has(model_type);
  return { model_type, vocab_size: count(cfg.vocab_size), max_positions: absolute ? count(cfg.n_positions ?? cfg.max_position_embeddings) : undefined, name: asName(cfg._name_or_path) };
}

/** The last component of a Hub id or path, compared case-insensitively ("Qwen/Qwen3-0.6B" ~ "qwen3-0.6b"). */
const lastPart = (name: string) => name.replace(/\/+$/, '').split('/').pop()!.toLowerCase();

/** The model name the batch's config records, when it is a name: a path on the training machine says nothing here. */
function recordedName(batch: GrpoBatch): { key: string; value: string } | undefined {
  for (const key of MODEL_NAME_KEYS) {
    const value = asName(batch.config?.[key]);
    if (value) return { key, value };
  }
  return undefined;
}

/** The ids (prompt and completion) that are not ids of a V-token vocabulary: how many, and the first. */
function idsOutside(batch: GrpoBatch, V: number): { n: number; first: string } | undefined {
  let n = 0;
  let first = '';
  for (const field of ['prompt_ids', 'completion_ids'] as const) {
    batch[field].forEach((row, b) => {
      for (let t = 0; t < row.length; t++) {
        const id = row[t];
        if (Number.isInteger(id) && id >= 0 && id < V) continue;
        if (n++ === 0) first = `${field}[${b}][${t}] = ${JSON.stringify(id)}`;
      }
    });
  }
  return n ? { n, first } : undefined;
}

/** Whether `known`'s tokenizer is the batch's (see the header); `reasons` names every disagreement. */
export function tokenizerFit(batch: GrpoBatch, known: KnownModel): TokenizerFit {
  const tok = known.tokenizer;
  // Without a tokenizer nothing says the batch is this model's (pad, EOS): as a tokenizer that does not fit.
  if (!tok) return { sameModel: false, fits: false, reasons: [NO_TOKENIZER] };
  const show = (id: number | undefined) => (id === undefined ? 'none' : `${id} ${JSON.stringify(tok.idToToken(id) ?? '?')}`);
  const reasons: string[] = [];
  // Trainers pad with the tokenizer's pad, else its EOS, or pick another control token (Llama 3 Instruct: <|eot_id|>,
  // <|finetune_right_pad_id|>): a special token of this tokenizer. A pad that is ordinary text is another model's.
  const pad = batch.pad_token_id;
  if (pad !== tok.pad_token_id && pad !== tok.eos_token_id && !tok.isSpecial(pad)) reasons.push(`pad_token_id ${pad} is not its pad (${show(tok.pad_token_id)}), its EOS (${show(tok.eos_token_id)}) or one of its special tokens`);
  const foreignEos = batch.eos_token_ids.filter((id) => id !== tok.eos_token_id && !tok.isSpecial(id));
  if (foreignEos.length) reasons.push(`eos_token_ids [${foreignEos.join(', ')}] are not its EOS (${show(tok.eos_token_id)}) or one of its special tokens`);
  const named = recordedName(batch);
  const name = known.config?.name;
  if (named && name && lastPart(named.value) !== lastPart(name)) reasons.push(`the batch's config.${named.key} is ${JSON.stringify(named.value)}, not ${name} (its config.json's _name_or_path)`);
  const sameModel = reasons.length === 0;
  const outside = idsOutside(batch, tok.vocab_size);
  if (outside) reasons.push(`${outside.n} id(s) outside its ${tok.vocab_size} tokens (first ${outside.first})`);
  return { sameModel, fits: reasons.length === 0, reasons };
}

/**
 * The ids the importer inferred (ImportResult.inferred) that the model at hand does not confirm: a tokenizer of the
 * batch's own model whose pad (else EOS) is the batch's pad, or whose EOS is the batch's only EOS, settles that id.
 */
function stillInferred(batch: GrpoBatch, inferred: DoctorOptions['inferred'], own: KnownModel | undefined): DoctorOptions['inferred'] {
  if (!inferred) return undefined;
  const tok = own?.tokenizer;
  const out = { ...inferred };
  if (tok && (tok.pad_token_id ?? tok.eos_token_id) === batch.pad_token_id) delete out.pad_token_id;
  if (tok && tok.eos_token_id !== undefined && batch.eos_token_ids.length === 1 && batch.eos_token_ids[0] === tok.eos_token_id) delete out.eos_token_ids;
  return out.pad_token_id === undefined && out.eos_token_ids === undefined ? undefined : out;
}

/**
 * The Doctor's options for `batch` with the model at hand (none: the batch alone). What a step scores the batch
 * with (its position ids among it) is the batch's own config: the page judges an update's, or an import under
 * edited settings, with those settings written into it (src/bridge/batch_settings.ts), as its Export writes them.
 * `inferred`: the ids the importer inferred (ImportResult.inferred), so the CLI and the page downgrade the same
 * findings: those that rest on an inferred id are warnings naming the inference, unless the batch's own tokenizer
 * confirms the id.
 */
export function doctorOptions(batch: GrpoBatch, known?: KnownModel, inferred?: DoctorOptions['inferred']): DoctorOptions {
  const fit = known && tokenizerFit(batch, known);
  const own = fit?.sameModel ? known : undefined;
  return {
    inferred: stillInferred(batch, inferred, own),
    tokenizer: fit?.fits ? known!.tokenizer : undefined,
    tokenizer_unfit: fit && !fit.fits ? `${known!.label}${known!.tokenizer ? ' does not fit this batch' : ''}: ${fit.reasons.join('; ')}` : undefined,
    model_type: batch.config?.model_type ?? own?.config?.model_type,
    position_ids: batch.config?.position_ids,
    vocab_size: own && (own.config?.vocab_size ?? own.tokenizer?.vocab_size),
    max_positions: own?.config?.max_positions,
  };
}
