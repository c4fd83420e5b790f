// The studio's tokenizer: a Hugging Face tokenizer (through @huggingface/transformers, the only importer of
// that package) plus what the studio needs on top: chat-template rendering with the model's own template,
// and every token's character span in the rendered text (special tokens included, marked as such), so the
// UI can show exactly where the prompt ends and the completion begins. Environment-neutral: no node:fs;
// built from the two JSON objects (src/tokenize/node.ts reads them from a folder) or from a Hub id in the
// browser. Loading is async; encode/decode/render are synchronous once loaded. The vocabulary (id ↔ token),
// its size and the special ids are read once, through transformers.js's public API (get_vocab,
// all_special_ids, convert_tokens_to_ids): a real vocabulary has ~150k tokens, so nothing scans it per call.
import { AutoTokenizer, PreTrainedTokenizer } from '@huggingface/transformers';
import type { ChatMessage } from '../io/batch.ts';

/** A chat template that did not finish within its bounds, or raised. The CLI maps the name to exit 2. */
export class TemplateError extends Error {
  constructor(
    message: string,
    /** "raised": the template itself raised (as it would in-thread); "bounds": it overran time or memory. */
    readonly kind: 'raised' | 'bounds' = 'bounds',
  ) {
    super(message);
    this.name = 'TemplateError';
  }
}

/** One token of a rendered sequence: [start, end) in UTF-16 code units of `text`. */
export interface TokenSpan {
  id: number;
  start: number;
  end: number;
  /** The token's vocabulary string (e.g. "Ġthe", "<|im_start|>"). */
  token: string;
  special: boolean;
}

export interface RenderOptions {
  /** End with the assistant header (`<|im_start|>assistant\n`). Default true, as for a GRPO prompt. */
  add_generation_prompt?: boolean;
  /** Prepended as a system message when the conversation has none. */
  system?: string;
  /** Extra template variables, e.g. { enable_thinking: false }. */
  template_kwargs?: Record<string, unknown>;
  tools?: object[];
  /** Override the tokenizer's own chat template. */
  chat_template?: string;
}

export interface Rendered {
  text: string;
  ids: number[];
  tokens: TokenSpan[];
}

/** GPT-2's byte ↔ printable-unicode table used by every ByteLevel tokenizer. */
function byteLevelDecoder(): Map<string, number> {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  return new Map(bs.map((b, i) => [String.fromCodePoint(cs[i]), b]));
}

function usesByteLevel(decoder: unknown): boolean {
  const d = decoder as { type?: string; decoders?: unknown[] } | null;
  return !!d && (d.type === 'ByteLevel' || (d.type === 'Sequence' && (d.decoders ?? []).some(usesByteLevel)));
}

const utf8 = new TextEncoder();

/**
 * UTF-8 → text plus, for every byte offset, the UTF-16 offset of the character holding it (at[n] = text
 * length). Invalid or truncated sequences become one U+FFFD per maximal subpart, as TextDecoder does, so a
 * completion cut in the middle of an emoji still maps every token.
 */
export function decodeUtf8(bytes: Uint8Array): { text: string; at: Int32Array } {
  const n = bytes.length;
  const at = new Int32Array(n + 1);
  let text = '';
  let i = 0;
  while (i < n) {
    const b0 = bytes[i];
    const len = b0 < 0x80 ? 1 : b0 >> 5 === 6 ? 2 : b0 >> 4 === 14 ? 3 : b0 >> 3 === 30 ? 4 : 0;
    let k = 1;
    while (len > 1 && k < len && i + k < n && (bytes[i + k] & 0xc0) === 0x80) k++;
    let ch = '\uFFFD';
    if (len === 1) ch = String.fromCharCode(b0);
    else if (len > 1 && k === len) {
      let cp = b0 & (0xff >> (len + 1));
      for (let j = 1; j < len; j++) cp = (cp << 6) | (bytes[i + j] & 0x3f);
      if (cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff)) ch = String.fromCodePoint(cp);
    }
    const step = len === 0 ? 1 : k;
    for (let j = 0; j < step; j++) at[i + j] = text.length;
    text += ch;
    i += step;
  }
  at[n] = text.length;
  return { text, at };
}

/** The parts of tokenizer.json the public API does not expose: which tokens are added ones, and the decoder. */
interface TokenizerJSON {
  added_tokens?: { id: number; content: string }[];
  decoder?: unknown;
}

export class Tokenizer {
  readonly hf: PreTrainedTokenizer;
  /** One past the largest id in the vocabulary or the added tokens. */
  readonly vocab_size: number;
  /** Ids of the special tokens, ascending. */
  readonly special_token_ids: readonly number[];
  /** The vocabulary string of each id (added tokens included); holes where no token has that id. */
  private readonly tokens: (string | undefined)[];
  private readonly special: Set<number>;
  /** Added tokens: their content is literal text, not byte-level / SentencePiece pieces. */
  private readonly added: Set<number>;
  private readonly byteLevel: Map<string, number> | null;

  /** `json`: the tokenizer.json the tokenizer was built from. */
  constructor(hf: PreTrainedTokenizer, json: TokenizerJSON) {
    this.hf = hf;
    // get_vocab() builds a fresh token → id map on every call: invert it once.
    this.tokens = [];
    for (const [token, id] of hf.get_vocab()) this.tokens[id] = token;
    this.added = new Set((json.added_tokens ?? []).map((t) => t.id));
    this.vocab_size = Math.max(this.tokens.length, ...[...this.added].map((id) => id + 1));
    this.special_token_ids = [...new Set(hf.all_special_ids)].sort((a, b) => a - b);
    this.special = new Set(this.special_token_ids);
    this.byteLevel = usesByteLevel(json.decoder) ? byteLevelDecoder() : null;
  }

  /** From tokenizer.json and tokenizer_config.json contents. Never touches the network. */
  static async fromJSON(tokenizerJSON: object, tokenizerConfig: object): Promise<Tokenizer> {
    return new Tokenizer(new PreTrainedTokenizer(tokenizerJSON, tokenizerConfig), tokenizerJSON);
  }

  /** From the Hugging Face Hub (browser / worker) or a model id transformers.js can resolve. */
  static async fromPretrained(id: string): Promise<Tokenizer> {
    const hf = await AutoTokenizer.from_pretrained(id);
    return new Tokenizer(hf, hf._tokenizerJSON as TokenizerJSON);
  }

  get pad_token_id(): number | undefined {
    return this.hf.pad_token_id ?? undefined;
  }
  get eos_token_id(): number | undefined {
    return this.hf.eos_token_id ?? undefined;
  }
  get bos_token_id(): number | undefined {
    return this.hf.bos_token_id ?? undefined;
  }
  get has_chat_template(): boolean {
    return !!this.hf.chat_template;
  }

  /** Text → ids. Default add_special_tokens = false, as TRL tokenizes a rendered chat prompt. */
  encode(text: string, opts: { add_special_tokens?: boolean } = {}): number[] {
    return this.hf.encode(text, { add_special_tokens: opts.add_special_tokens ?? false });
  }

  /** Ids → text, special tokens kept and no clean-up, so encode(decode(ids)) can round-trip. */
  decode(ids: readonly number[], opts: { skip_special_tokens?: boolean } = {}): string {
    if (ids.length === 0) return '';
    return this.hf.decode([...ids], { skip_special_tokens: opts.skip_special_tokens ?? false, clean_up_tokenization_spaces: false });
  }

  /**
   * The text of each distinct id in `rows`, decoded alone (the grid's cells): a token's text does not depend
   * on where it stands, so each id is decoded once (one decode per token took seconds on a 1,024 × 2,560 batch).
   */
  textsById(...rows: (readonly number[])[][]): Record<number, string> {
    const by_id: Record<number, string> = {};
    for (const set of rows) for (const row of set) for (const t of row) if (!(t in by_id)) by_id[t] = this.decode([t]);
    return by_id;
  }

  /** The vocabulary string of one id, or undefined if out of range. */
  idToToken(id: number): string | undefined {
    return this.tokens[id];
  }

  isSpecial(id: number): boolean {
    return this.special.has(id);
  }

  /** Id of a single token string (e.g. "<|im_start|>"), or undefined. */
  tokenToId(token: string): number | undefined {
    return this.hf.convert_tokens_to_ids(token) ?? undefined;
  }

  /**
   * The exact arguments of `hf.apply_chat_template` for a render: shared with the bounded renderer
   * (src/tokenize/bounded_node.ts), which renders the same call in a worker with a time and memory limit.
   */
  static templateCall(messages: readonly ChatMessage[], opts: RenderOptions = {}): [ChatMessage[], Record<string, unknown>] {
    const msgs = opts.system !== undefined && messages[0]?.role !== 'system' ? [{ role: 'system', content: opts.system }, ...messages] : [...messages];
    return [msgs, { ...opts.template_kwargs, tokenize: false, add_generation_prompt: opts.add_generation_prompt ?? true, tools: opts.tools ?? null, chat_template: opts.chat_template ?? null }];
  }

  /**
   * The template and the variables transformers.js's apply_chat_template renders it with (the named or
   * default template; messages, add_generation_prompt, tools, documents, the special tokens of the config,
   * then the keyword arguments): what a bounded renderer feeds the same jinja engine in a worker.
   */
  templateInput(messages: readonly ChatMessage[], opts: RenderOptions = {}): { template: string; variables: Record<string, unknown> } {
    const [conversation, { tokenize: _t, chat_template, add_generation_prompt, tools, ...kwargs }] = Tokenizer.templateCall(messages, opts);
    const hf = this.hf as unknown as { get_chat_template(o: object): unknown; config: Record<string, unknown> };
    const template = hf.get_chat_template({ chat_template, tools });
    if (typeof template !== 'string') throw new Error(`chat_template must be a string, got ${typeof template}`);
    const special: Record<string, unknown> = {};
    for (const key of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
      const v = hf.config[key];
      if (v) special[key] = typeof v === 'object' ? (v as { content: string }).content : v;
    }
    return { template, variables: { messages: conversation, add_generation_prompt, tools, documents: null, ...special, ...kwargs } };
  }

  /** Render a conversation with the chat template (text only). */
  applyChatTemplate(messages: readonly ChatMessage[], opts: RenderOptions = {}): string {
    const [msgs, options] = Tokenizer.templateCall(messages, opts);
    return this.hf.apply_chat_template(msgs as { role: string; content: string }[], options) as unknown as string;
  }

  /** Render, tokenize (no extra special tokens: the template already wrote them) and map tokens to spans. */
  renderChat(messages: readonly ChatMessage[], opts: RenderOptions = {}): Rendered {
    const text = this.applyChatTemplate(messages, opts);
    const ids = this.encode(text);
    return { ...this.spans(ids), ids };
  }

  /** Bytes one token contributes to the decoded text. */
  private tokenBytes(id: number): Uint8Array {
    const tok = this.tokens[id] ?? '';
    if (this.added.has(id)) return utf8.encode(tok);
    if (this.byteLevel) return Uint8Array.from([...tok].map((c) => this.byteLevel!.get(c) ?? 0));
    // SentencePiece-style: "▁" is a space, "<0xNN>" a raw byte.
    const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(tok);
    return m ? Uint8Array.of(parseInt(m[1], 16)) : utf8.encode(tok.replaceAll('\u2581', ' '));
  }

  /**
   * Each token's span in the decoded text, from the bytes it contributes: a token that holds only part
   * of a multibyte character (byte-level BPE splits emoji) shares that character's span with its neighbours.
   */
  spans(ids: readonly number[]): { text: string; tokens: TokenSpan[] } {
    const parts = ids.map((id) => this.tokenBytes(id));
    const total = parts.reduce((n, p) => n + p.length, 0);
    const bytes = new Uint8Array(total);
    const byteStart: number[] = [];
    let o = 0;
    for (const p of parts) {
      byteStart.push(o);
      bytes.set(p, o);
      o += p.length;
    }
    byteStart.push(o);
    const { text, at } = decodeUtf8(bytes);
    // first character boundary at or after byte offset bo (a byte inside a character maps to its start)
    const charEnd = (bo: number) => {
      let e = bo;
      while (e < total && e > 0 && at[e] === at[e - 1]) e++;
      return at[e];
    };
    const tokens = ids.map((id, i) => {
      const s = at[byteStart[i]];
      const e = parts[i].length === 0 ? s : charEnd(byteStart[i + 1]);
      return { id, start: s, end: Math.max(s, e), token: this.idToToken(id) ?? `<unk:${id}>`, special: this.isSpecial(id) };
    });
    return { text, tokens };
  }
}
