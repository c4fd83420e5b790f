// The Doctor: each crafted batch in tests/fixtures/batches/<rule>.json triggers its rule (and no other
// error); a clean batch assembled from the real Qwen3 tokenizer triggers nothing; the golden batches have
// no errors; malformed batches give findings, never exceptions.
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { diagnose, RULE_INFO, RULES, type Finding } from '../../src/doctor/index.ts';
import { parseBatch, type GrpoBatch } from '../../src/io/batch.ts';
import { assembleBatch } from '../../src/grpo/batch.ts';
import { computeAdvantages } from '../../src/grpo/advantages.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { LLAMA3_DIR, QWEN3_DIR } from '../helpers/tokenizers.ts';
import { Rng } from '../../src/model/rng.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const FIXTURES = path.join(root, 'tests/fixtures/batches');
const golden = path.resolve(root, 'tests/golden/models');
const load = (name: string) => parseBatch(readFileSync(path.join(FIXTURES, `${name}.json`), 'utf8'), name);
const ofRule = (fs: Finding[], rule: string) => fs.filter((f) => f.rule === rule);

let qwen: Tokenizer;
beforeAll(async () => {
  qwen = await loadTokenizerDir(QWEN3_DIR);
});

/** What each fixture must produce for its rule, beyond "at least one finding". */
const EXPECT: Record<string, (fs: Finding[]) => void> = {
  'token-out-of-vocabulary': (fs) => {
    // First offending id per row (Qwen3's tokenizer has 151669 tokens), with how many the row holds.
    expect(fs.map((f) => [f.field, f.sample, f.span, f.severity])).toEqual([['prompt_ids', 2, [4, 5], 'error'], ['completion_ids', 1, [2, 3], 'error']]);
    expect(fs[1].message).toMatch(/completion_ids\[1\]\[2\] = 151936 is outside the vocabulary of 151669 tokens \(2 such ids in the row\)/);
  },
  'mask-length-mismatch': (fs) => {
    expect(fs.map((f) => f.sample)).toEqual([0, 1, 2, 3]);
    expect(fs[0].message).toMatch(/completion_mask has 5 entries, completion_ids has 3 \(2 extra\)/);
    expect(fs.every((f) => f.severity === 'error')).toBe(true);
  },
  'mask-covers-padding': (fs) => {
    expect(fs.map((f) => [f.sample, f.span])).toEqual([[0, [3, 5]], [3, [2, 5]]]);
  },
  'completion-contains-prompt': (fs) => {
    expect(fs.map((f) => f.sample)).toEqual([0, 1, 2, 3]);
    expect(fs[2].span).toEqual([0, 2]);
  },
  'prompt-padding-side': (fs) => {
    expect(fs.map((f) => [f.sample, f.span, f.severity])).toEqual([[2, [2, 3], 'error'], [3, [2, 3], 'error']]);
    expect(fs[0].message).toMatch(/right-padded/);
  },
  'zero-std-group': (fs) => {
    expect(fs).toHaveLength(1);
    expect(fs[0].severity).toBe('error');
    expect(fs[0].message).toMatch(/every group \(2\)/);
  },
  'advantage-mismatch': (fs) => {
    // Both groups are wrong in all their rows: one finding per group, naming it.
    expect(fs.map((f) => f.message.slice(0, 8))).toEqual(['group 0:', 'group 1:']);
    expect(fs[0].field).toBe('advantages');
    // The population-std advantages match no supported scaling: the hint says what to check.
    expect(fs[0].hint).toMatch(/Bessel/);
  },
  'eos-inside-completion': (fs) => {
    expect(fs.map((f) => [f.sample, f.span, f.severity])).toEqual([[0, [3, 5], 'error']]);
  },
  'pad-equals-eos': (fs) => expect(fs.map((f) => f.severity)).toEqual(['info']),
  'truncated-completion': (fs) => expect(fs[0].message).toMatch(/^2 of 4 completions .* max_completion_length \(4 tokens\): samples 0, 2/),
  'short-completions': (fs) => expect(fs[0].message).toMatch(/3 of 4 completions are 0–2 tokens/),
  'retokenization-mismatch': (fs) => {
    expect(fs.map((f) => f.sample)).toEqual([1]);
    expect(fs[0].message).toMatch(/6 tokens → 2/);
    expect(fs[0].message).toContain('"h"');
  },
  'template-mismatch': (fs) => {
    expect(fs.map((f) => [f.sample, f.span])).toEqual([[2, [0, 1]], [3, [0, 1]]]);
    expect(fs[0].message).toContain('<|im_start|>');
  },
  'position-ids-shift': (fs) => expect(fs[0].message).toMatch(/4 left-padded row\(s\) are shifted \(samples 0, 1, 2, 3\)/),
  'logprob-mismatch': (fs) => {
    expect(fs[0]).toMatchObject({ sample: 2, span: [1, 2] });
    expect(fs[0].message).toMatch(/max \|Δ\| = 3 at/);
  },
  'logprob-above-zero': (fs) => {
    // The NLLs: 9 of the 10 trained values above 0.01 (a 0.0 among them), none negative; the untrained 5.0 and the
    // tool output's 0.5 are not counted, nor is sampling's 0.004 (rounding).
    expect(fs.map((f) => [f.field, f.sample, f.span, f.severity])).toEqual([
      ['old_per_token_logps', 2, [0, 1], 'error'],
      ['sampling_per_token_logps', 3, [0, 1], 'error'],
    ]);
    expect(fs[0].message).toMatch(/9 of 10 trained values above 0\.01 \(largest 2 at sample 2 position 0\): none is negative$/);
    expect(fs[0].hint).toMatch(/negative log-likelihood/);
    expect(fs[1].message).toMatch(/2 of 10 trained values above 0\.01 \(largest 0\.7 at sample 3 position 0\)$/);
    expect(fs[1].hint).not.toMatch(/negative log-likelihood/);
  },
  'unscorable-rewards': (fs) => {
    expect(fs.map((f) => [f.severity, f.sample])).toEqual([['warning', 1]]);
    expect(fs[0].message).toMatch(/None for 1 sample\(s\) \(1\).*group\(s\) 0 keep fewer than 2 scored samples/);
  },
  'importance-sampling-correction': (fs) => {
    expect(fs.map((f) => [f.sample, f.span, f.severity])).toEqual([[1, [0, 2], 'warning'], [2, [0, 4], 'warning']]);
    expect(fs[0].message).toMatch(/sequence IS ratio 2\.718 > vllm_importance_sampling_clip_max = 2: all 2 loss tokens masked/);
    expect(fs[1].message).toMatch(/sequence IS ratio 0\.3679 < vllm_importance_sampling_clip_min = 0\.5/);
  },
  'trainer-nonfinite': (fs) => {
    // −0.5 − (−100) = 99.5 > ln(FLT_MAX): inf in float32, inf · 0 = NaN; sample 3's log-ratio 80 stays finite.
    expect(fs.map((f) => [f.sample, f.span, f.severity])).toEqual([[1, [1, 2], 'error']]);
    expect(fs[0].message).toMatch(/^sample 1: exp\(old − rollout\) overflows float32 at 1 token\(s\) \(position 1: log-ratio 99\.5; .*icepop.*inf · 0 = NaN/);
  },
  'num-items-in-batch': (fs) => {
    expect(fs.map((f) => f.severity)).toEqual(['error']);
    expect(fs[0].message).toMatch(/dapo over 2 processes .* one rank \(11 loss-mask tokens\)/);
  },
  'logged-kl': (fs) => {
    expect(fs.map((f) => f.severity)).toEqual(['info']);
    expect(fs[0].message).toMatch(/^logged kl = 0\.08077 is k3 token mean/);
    expect(fs[0].message).not.toMatch(/also within/);
  },
  'turn-retokenization': (fs) => {
    // Seed 003's sampled call against the parsed call's render (its spelling only: a warning, trained as sampled); the clean sample 1 gives nothing.
    expect(fs.map((f) => [f.sample, f.field, f.severity])).toEqual([[0, 'completion_ids', 'warning']]);
    expect(fs[0].message).toMatch(/^sample 0, turn 1 \(tool call\): .* tool-call-retokenized/);
  },
  'reasoning-dropped': (fs) => {
    // Turn 1's 19-token <think> block, trained on sample 0 only.
    expect(fs.map((f) => [f.sample, f.field, f.span, f.severity])).toEqual([[0, 'completion_ids', [0, 19], 'warning']]);
  },
  'tool-call-masked': (fs) => {
    // The compact call's own length against the canonical re-render's (literal texts): the call's last tokens are masked.
    const think = qwen.encode('<think>\nI will use the tool.\n</think>\n\n').length;
    const compact = qwen.encode('<tool_call>\n{"name":"multiply","arguments":{"a":3,"b":4}}\n</tool_call><|im_end|>').length;
    const canonical = qwen.encode('<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>').length;
    // The tool-call span ends at </tool_call>: the turn's end-of-turn token after it is the assistant's.
    expect(fs.map((f) => [f.sample, f.field, f.span, f.severity])).toEqual([[0, 'completion_ids', [think + compact, think + canonical - 1], 'error']]);
    expect(fs[0].message).toMatch(new RegExp(`^sample 0, turn 1 \\(tool call\\): ${canonical - compact - 1} of its ${canonical - 1} tokens have tool_mask 0`));
  },
  'tool-tokens-in-loss': (fs) => {
    expect(fs.map((f) => [f.sample, f.field, f.span, f.severity])).toEqual([[0, 'effective_loss_mask', [3, 5], 'error']]);
  },
  nonfinite: (fs) => {
    expect(fs.map((f) => [f.field, f.sample, f.span])).toEqual([['old_per_token_logps', 2, [2, 3]]]);
    expect(fs[0].message).toMatch(/2 non-finite/);
  },
};

describe('each rule fires on its crafted batch', () => {
  it('every rule has a fixture and an expectation, and the registry describes it', () => {
    const files = readdirSync(FIXTURES).map((f) => f.replace(/\.json$/, ''));
    for (const r of RULES) {
      expect(files).toContain(r.id);
      expect(EXPECT[r.id]).toBeTypeOf('function');
    }
    for (const info of RULE_INFO) {
      expect(info.title.length).toBeGreaterThan(5);
      expect(info.description.length).toBeGreaterThan(20);
      expect(info.seed.length).toBeGreaterThan(2);
    }
  });

  for (const rule of RULES) {
    it(rule.id, () => {
      const report = diagnose(load(rule.id), rule.needsTokenizer || rule.needsVocabulary ? { tokenizer: qwen } : {});
      const mine = ofRule(report.findings, rule.id);
      expect(mine.length).toBeGreaterThan(0);
      EXPECT[rule.id](mine);
      // Focused fixtures: no other rule reports an error.
      expect(report.findings.filter((f) => f.rule !== rule.id && f.severity === 'error')).toEqual([]);
    });
  }

  it('tokenizer rules say they were skipped without a tokenizer', () => {
    const report = diagnose(load('template-mismatch'));
    expect(report.skipped.map((s) => s.rule)).toEqual(expect.arrayContaining(['retokenization-mismatch', 'template-mismatch']));
    expect(ofRule(report.findings, 'template-mismatch')).toEqual([]);
  });

  it('template-mismatch without messages: a prompt lacking the assistant header', () => {
    const b = load('template-mismatch');
    delete b.messages;
    const fs = ofRule(diagnose(b, { tokenizer: qwen }).findings, 'template-mismatch');
    expect(fs).toHaveLength(1);
    expect(fs[0].message).toMatch(/2 of 4 prompts do not contain the assistant header "<\|im_start\|>assistant"/);
  });

  it("truncated-completion: max_completion_length None (TRL's no cap) is no budget of 4 tokens; the hint knows mask_truncated_completions is set", () => {
    const b = load('truncated-completion');
    const none = ofRule(diagnose({ ...b, config: { ...b.config, max_completion_length: null } }).findings, 'truncated-completion');
    expect(none[0].message).toMatch(/reach the longest completion \(4 tokens\)/);
    const masked = ofRule(diagnose({ ...b, config: { ...b.config, mask_truncated_completions: true } }).findings, 'truncated-completion');
    expect(masked[0].hint).toMatch(/^mask_truncated_completions is set: TRL keeps them out of the loss/);
  });

  it('advantage-mismatch names the scaling the advantages do match', () => {
    const b = load('advantage-mismatch');
    b.advantages = [...computeAdvantages(b.rewards!, { num_generations: 2, scale_rewards: 'none' }).advantages];
    const fs = ofRule(diagnose(b).findings, 'advantage-mismatch');
    expect(fs[0].hint).toMatch(/scale_rewards="none"/);
    b.config = { scale_rewards: 'none' };
    expect(ofRule(diagnose(b).findings, 'advantage-mismatch')).toEqual([]);
  });
});

/** A realistic batch: Qwen3 chat prompts, sampled-looking completions, rewards, log-probs. */
function cleanQwenBatch(tok: Tokenizer): GrpoBatch {
  const rng = new Rng(11);
  const imEnd = tok.tokenToId('<|im_end|>')!;
  const questions = ['What is 2+2?', 'Écris « bonjour » en japonais 🇯🇵', 'Name a prime number.'];
  const answers = [['It is 4.', '4', 'Four.'], ['こんにちは 👋', 'Bonjour = こんにちは', 'おはよう'], ['7', 'Seven is prime.', '11, since it has no divisors but 1 and itself.']];
  const G = 3;
  const messages = questions.map((q) => [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: q }]);
  const completion_ids = answers.flat().map((a) => [...tok.encode(a), imEnd]);
  const rewards = [1, 0.2, 0.5, 0, 1, 0.3, 0.9, 0.1, 0.4];
  const logps = completion_ids.map((r) => r.map(() => -Math.abs(rng.normal()) * 2));
  return assembleBatch({
    prompt_ids: messages.map((m) => tok.renderChat(m).ids),
    completion_ids,
    num_generations: G,
    pad_token_id: tok.pad_token_id!,
    eos_token_ids: [imEnd],
    rewards,
    advantages: [...computeAdvantages(rewards, { num_generations: G }).advantages],
    old_per_token_logps: logps,
    sampling_per_token_logps: logps.map((r) => r.map((x) => x + rng.normal() * 0.01)),
    ref_per_token_logps: logps.map((r) => r.map((x) => x - 0.05)),
    messages,
    completion_texts: answers.flat(),
    config: { model_type: 'qwen3', position_ids: 'arange', scale_rewards: 'group', max_completion_length: 64 },
  });
}

describe('clean batches', () => {
  it('a batch assembled from the Qwen3 tokenizer triggers no rule, and every rule runs', () => {
    const report = diagnose(cleanQwenBatch(qwen), { tokenizer: qwen });
    expect(report.findings).toEqual([]);
    // Only the rules that read what a trainer logs or how it scores rewards per function, or whole
    // conversations (messages here are the prompts), have nothing to read.
    expect(report.skipped.map((s) => s.rule)).toEqual(['unscorable-rewards', 'turn-retokenization', 'reasoning-dropped', 'tool-tokens-in-loss', 'tool-call-masked', 'logged-kl']);
    expect(report.groups!.map((g) => g.zero_std)).toEqual([false, false, false]);
  });

  it('the clean hand-made fixture triggers nothing', () => {
    expect(diagnose(load('clean')).findings).toEqual([]);
  });

  it('golden batches have no errors', () => {
    const models = readdirSync(golden).filter((d) => d.startsWith('tiny-'));
    expect(models).toHaveLength(5);
    for (const m of models) {
      const report = diagnose(parseBatch(readFileSync(path.join(golden, m, 'batch.json'), 'utf8')));
      expect(report.counts.error, m).toBe(0);
      // Group 1 has rewards [0.5, 0.5]: its advantages are 0.
      expect(ofRule(report.findings, 'zero-std-group')[0].message).toMatch(/1 of 3 groups/);
    }
  });
});

describe('logged-kl against the trainers\' clamped estimators', () => {
  it("a KL logged under verl's low_var_kl / OpenRLHF's clamp (each token bounded to ±10) is named, not a mismatch", () => {
    // Two tokens: old − ref = −15 (k3 ≈ 3.3e6, clamped to 10) and 0.5 (k3 = e^−0.5 − 0.5 ≈ 0.1065).
    const d = [-15, 0.5];
    const k3 = d.map((x) => Math.min(10, Math.expm1(-x) + x));
    const batch = { ...load('clean'), old_per_token_logps: [[-1, -1, -1], [0, 0], [-1, -1, -1, -1], [0, 0]], ref_per_token_logps: [[14, -1.5, -1], [0, 0], [-1, -1, -1, -1], [0, 0]] };
    batch.completion_mask = [[1, 1, 0], [0, 0], [0, 0, 0, 0], [0, 0]];
    batch.metrics = { 'actor/kl_loss': (k3[0] + k3[1]) / 2 };
    const fs = ofRule(diagnose(batch).findings, 'logged-kl');
    expect(fs.map((f) => f.severity)).toEqual(['info']);
    expect(fs[0].message).toMatch(/^logged actor\/kl_loss = 5\.05\d* is k3 clamped ±10 token mean/);
  });
});

describe('seed 002 on the real Llama-3 tokenizer', () => {
  it('pad = <|eot_id|>, a response that starts with the chat header, a sampler that did not stop', async () => {
    const tok = await loadTokenizerDir(LLAMA3_DIR);
    const eot = tok.tokenToId('<|eot_id|>')!;
    const eos = [eot, tok.tokenToId('<|end_of_text|>')!];
    const prompts = ['Is the sky blue?', 'Summarise: GRPO normalises rewards per group.'].map((q) => tok.renderChat([{ role: 'user', content: q }]).ids);
    const P = Math.max(...prompts.map((p) => p.length));
    const leftPad = (p: number[]) => [...new Array(P - p.length).fill(eot), ...p];
    const enc = (t: string) => tok.encode(t);
    const header = enc('<|start_header_id|>assistant<|end_header_id|>\n\n');
    const completion_ids = [
      [...header, ...enc('Yes.'), eot], // response slice that includes the assistant header (bug #4)
      [...enc('Yes, on a clear day.'), eot, eot, eot], // right-padded with pad = eot
      [...enc('GRPO centres rewards.'), eot, ...enc(' Also'), eot], // kept sampling after <|eot_id|>
      [...enc('Rewards minus the group mean.'), eot],
    ];
    const batch: GrpoBatch = {
      format: 'grpo-batch/v1', num_generations: 2, pad_token_id: eot, eos_token_ids: eos,
      prompt_ids: [0, 0, 1, 1].map((g) => leftPad(prompts[g])),
      prompt_mask: [0, 0, 1, 1].map((g) => leftPad(prompts[g]).map((_, t) => (t < P - prompts[g].length ? 0 : 1))),
      completion_ids,
      completion_mask: completion_ids.map((r) => r.map((_, t) => (t <= r.indexOf(eot) ? 1 : 0))),
    };
    const report = diagnose(batch, { tokenizer: tok });
    expect(ofRule(report.findings, 'pad-equals-eos').map((f) => f.severity)).toEqual(['info']);
    expect(ofRule(report.findings, 'completion-contains-prompt').map((f) => [f.sample, f.span])).toEqual([[0, [0, header.length]]]);
    const eosInside = ofRule(report.findings, 'eos-inside-completion');
    expect(eosInside.map((f) => [f.sample, f.severity])).toEqual([[2, 'warning']]);
    expect(report.findings.filter((f) => f.severity === 'error').map((f) => f.rule)).toEqual(['completion-contains-prompt']);
    // The trailing <|eot_id|> pads of sample 1 are padding, not extra EOS tokens.
    expect(report.findings.some((f) => f.sample === 1)).toBe(false);
  });
});

describe('malformed batches are findings, not crashes', () => {
  it('junk elements, short rows and missing rows', () => {
    const b = load('clean') as unknown as Record<string, unknown[][]>;
    b.completion_ids[0] = [10, 'x', null, 1] as unknown[];
    b.completion_mask = [[1, 1], [1, 1]];
    b.old_per_token_logps = [['a'], [], [1, 2, 3, 4, 5, 6], [NaN, 0]];
    b.prompt_ids[1] = [];
    const report = diagnose(b as unknown as GrpoBatch);
    const rules = new Set(report.findings.map((f) => f.rule));
    expect(rules).toContain('schema');
    expect(rules).toContain('mask-length-mismatch');
    expect(rules).toContain('nonfinite');
    expect(report.counts.error).toBeGreaterThan(3);
    for (const f of report.findings) expect(f.message.length).toBeGreaterThan(10);
  });
});
