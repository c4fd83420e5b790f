// Trains the studio's embedded default model, public/models/tiny-adder: a small Qwen2-architecture
// causal LM with a cut-down Qwen3 tokenizer (scripts/make-default-tokenizer.ts), fine-tuned from random
// weights on two-digit addition (src/grpo/default_task.ts) with this project's own GPU kernels: the
// model's forward with saved activations, the log-prob gather (cross-entropy on completion tokens),
// the model's backward, clip_grad_norm_ and AdamW. Everything is seeded (init, batch order).
//
// Targets mix two styles, the bare sum (70%) and "The answer is N." (30%), so sampled groups differ
// in format and length as well as correctness.
//
// Training stops EARLY on purpose: as soon as the model's probability of producing a right sum at
// temperature 1, averaged over held-out problems, reaches --target (default 0.5). A GRPO group of 8
// samples from such a model holds right and wrong answers, so the first step the studio shows has
// non-zero advantages; a fully trained model would give every group the same reward.
// Accuracies are exact, from teacher-forced log-probs: the probability of sampling a target at
// temperature 1 is exp(Σ_t logp_t); greedy decoding produces it iff every target token is the argmax
// given the target's prefix.
//
//   npm run train:default [-- --target 0.5 --max-steps 1500 --out DIR --seed 1234]
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { nodeGpu } from '../src/gpu/node.ts';
import type { Gpu } from '../src/gpu/context.ts';
import { assembleBatch, padBatch, type PaddedBatch } from '../src/grpo/batch.ts';
import { DEFAULT_GRPO_CONFIG, DEFAULT_MODEL_NAME, DEFAULT_MODEL_PATH, DEFAULT_PROBLEMS, SENTENCE_STYLE_FRACTION, additionAnswer, additionQuestion, additionSentence, additionMessages, allProblems, isHeldOut, type AdditionProblem } from '../src/grpo/default_task.ts';
import { writeSafeTensors, type TensorOut } from '../src/io/safetensors.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../src/kernels/logprob_gather.ts';
import { Optimizer } from '../src/grpo/optimizer.ts';
import { countParams, numel, paramSpecs, parseConfig } from '../src/model/config.ts';
import { CausalLM } from '../src/model/model.ts';
import { loadTokenizerDir } from '../src/tokenize/node.ts';
import type { Tokenizer } from '../src/tokenize/tokenizer.ts';
import { Rng } from '../src/model/rng.ts';
import { makeDefaultTokenizer } from './make-default-tokenizer.ts';

// npm runs scripts from the package root.
const ROOT = process.cwd();

const HP = {
  seed: 1234,
  hidden_size: 64,
  num_hidden_layers: 3,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  intermediate_size: 192,
  init_std: 0.02, // HF initializer_range
  batch_size: 64,
  lr: 3e-3,
  warmup_steps: 50,
  betas: [0.9, 0.999] as [number, number],
  eps: 1e-8,
  weight_decay: 0,
  max_grad_norm: 1.0,
  eval_every: 25,
  eval_problems: 256, // held-out problems scored at each evaluation
  target: 0.5, // stop once the held-out E[P(answer)] reaches this
  max_steps: 1500,
};

function parseArgs(argv: string[]): { out: string } & typeof HP {
  const o = { out: join(ROOT, 'public', DEFAULT_MODEL_PATH), ...HP };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === '--out') o.out = resolve(v);
    else if (k === '--target') o.target = Number(v);
    else if (k === '--max-steps') o.max_steps = Number(v);
    else if (k === '--seed') o.seed = Number(v);
    else throw new Error(`unknown argument ${k} (expected --out, --target, --max-steps, --seed)`);
  }
  return o;
}

function hfConfig(tok: Tokenizer, hp: typeof HP): Record<string, unknown> {
  return {
    architectures: ['Qwen2ForCausalLM'],
    model_type: 'qwen2',
    hidden_size: hp.hidden_size,
    num_hidden_layers: hp.num_hidden_layers,
    num_attention_heads: hp.num_attention_heads,
    num_key_value_heads: hp.num_key_value_heads,
    intermediate_size: hp.intermediate_size,
    hidden_act: 'silu',
    vocab_size: tok.vocab_size,
    max_position_embeddings: 512,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000.0,
    tie_word_embeddings: true,
    attention_dropout: 0.0,
    use_sliding_window: false,
    use_cache: true,
    initializer_range: hp.init_std,
    torch_dtype: 'float32',
    // As Qwen3's config: bos = <|endoftext|>, eos = <|im_end|>; no pad_token_id (it would make HF zero
    // that embedding row's gradient), the tokenizer and generation config carry the pad token.
    bos_token_id: tok.pad_token_id,
    eos_token_id: tok.eos_token_id,
  };
}

/** HF-style init: N(0, init_std) matrices and embedding, norms at 1, biases at 0. */
function initWeights(config: ReturnType<typeof parseConfig>, rng: Rng, std: number): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = {};
  for (const p of paramSpecs(config)) {
    const n = numel(p.shape);
    if (p.name.endsWith('norm.weight')) out[p.name] = new Float32Array(n).fill(1);
    else if (p.name.endsWith('.bias')) out[p.name] = new Float32Array(n);
    else out[p.name] = rng.f32(n, std);
  }
  return out;
}

/** One SFT row: a rendered prompt and a target completion (answer tokens + EOS). */
interface Row {
  prompt: number[];
  completion: number[];
}

/** A problem's prompt and its two target styles: [bare sum, sentence]. */
interface Example {
  prompt: number[];
  styles: [number[], number[]];
}

function encode(tok: Tokenizer, p: AdditionProblem): Example {
  const target = (text: string) => [...tok.encode(text), tok.eos_token_id!];
  return { prompt: tok.renderChat(additionMessages(p)).ids, styles: [target(additionAnswer(p)), target(additionSentence(p))] };
}

function toBatch(tok: Tokenizer, rows: Row[]): PaddedBatch {
  return padBatch(
    assembleBatch({
      prompt_ids: rows.map((e) => e.prompt),
      completion_ids: rows.map((e) => e.completion),
      num_generations: 1,
      pad_token_id: tok.pad_token_id!,
      eos_token_ids: [tok.eos_token_id!],
    }),
  );
}

/** GPU buffers of one batch's completion tokens and of the per-token log-prob pass. */
function tokenBuffers(gpu: Gpu, b: PaddedBatch) {
  const N = b.B * b.C;
  return {
    ids: gpu.upload('completion_ids', b.completion_ids), // (B, C)
    mask: gpu.upload('completion_mask', b.completion_mask), // (B, C)
    logp: gpu.createBuffer('per_token_logps', N * 4), // (B, C)
    lse: gpu.createBuffer('lse', N * 8), // (B, C, 2)
    entropy: gpu.createBuffer('entropy', N * 4), // (B, C)
  };
}

interface Scores {
  right: number; // E[P(right sum, either style)] at temperature 1
  bare: number; // E[P(bare right sum)]: the expected correctness reward
  greedy: number; // greedy decoding gives the right sum (either style)
  greedy_bare: number;
  perProblem: { right: number; bare: number }[];
}

/** Teacher-forced scores of both target styles of each problem (see the header for why this is exact). */
async function evaluate(model: CausalLM, tok: Tokenizer, ex: Example[]): Promise<Scores> {
  const gpu = model.gpu;
  const b = toBatch(tok, ex.flatMap((e) => e.styles.map((completion) => ({ prompt: e.prompt, completion }))));
  const t = tokenBuffers(gpu, b);
  const rec = gpu.recorder('eval');
  const f = model.forward(rec, { B: b.B, T: b.L, input_ids: b.input_ids, attention_mask: b.attention_mask, position_ids: b.position_ids }, { logits_to_keep: b.C });
  logprob_gather_forward(rec, { logits: f.logits, ids: t.ids, mask: t.mask, logp: t.logp, lse: t.lse, entropy: t.entropy, N: b.B * b.C, V: f.V, temperature: 1 });
  await rec.finish();
  const logp = await gpu.readF32(t.logp, b.B * b.C);
  const logits = await gpu.readF32(f.logits, b.B * b.C * f.V);
  Object.values(t).forEach((x) => x.destroy());
  // Row r: P(target) and whether every target token is the argmax given the target prefix.
  const row = (r: number) => {
    let s = 0;
    let argmax = true;
    for (let c = 0; c < b.C; c++) {
      const i = r * b.C + c;
      if (!b.completion_mask[i]) continue;
      s += logp[i];
      const z = logits.subarray(i * f.V, (i + 1) * f.V);
      const target = z[b.completion_ids[i]];
      for (let v = 0; v < f.V; v++) if (z[v] > target) argmax = false;
    }
    return { p: Math.exp(s), argmax };
  };
  const perProblem: Scores['perProblem'] = [];
  let greedy = 0;
  let greedy_bare = 0;
  for (let e = 0; e < ex.length; e++) {
    const [bare, sentence] = [row(2 * e), row(2 * e + 1)];
    perProblem.push({ right: bare.p + sentence.p, bare: bare.p });
    if (bare.argmax || sentence.argmax) greedy++;
    if (bare.argmax) greedy_bare++;
  }
  const mean = (k: 'right' | 'bare') => perProblem.reduce((a, x) => a + x[k], 0) / ex.length;
  return { right: mean('right'), bare: mean('bare'), greedy: greedy / ex.length, greedy_bare: greedy_bare / ex.length, perProblem };
}

/** One SFT step: mean cross-entropy over completion tokens, backward, clip, AdamW. Returns loss and grad norm. */
async function trainStep(
  model: CausalLM,
  tok: Tokenizer,
  rows: Row[],
  opt: Optimizer,
  lr: number,
  hp: typeof HP,
): Promise<{ loss: number; gradNorm: number }> {
  const gpu = model.gpu;
  const b = toBatch(tok, rows);
  const N = b.B * b.C;
  const t = tokenBuffers(gpu, b);
  // loss = −Σ M·logp / ΣM, so dloss/dlogp = −M / ΣM.
  let count = 0;
  for (let i = 0; i < N; i++) count += b.completion_mask[i];
  const dlogp = gpu.upload('dlogp', Float32Array.from(b.completion_mask, (m) => -m / count)); // (B, C)

  const rec = gpu.recorder('sft.forward_backward');
  const f = model.forward(rec, { B: b.B, T: b.L, input_ids: b.input_ids, attention_mask: b.attention_mask, position_ids: b.position_ids }, { logits_to_keep: b.C, save: true });
  logprob_gather_forward(rec, { logits: f.logits, ids: t.ids, mask: t.mask, logp: t.logp, lse: t.lse, entropy: t.entropy, N, V: f.V, temperature: 1 });
  logprob_gather_backward(rec, { logits: f.logits, ids: t.ids, mask: t.mask, lse: t.lse, dlogp, dlogits: 'in-place', N, V: f.V, temperature: 1 });
  model.backward(rec, f.logits);
  opt.recordGradNorms(rec, model.grads!);
  await rec.finish();
  const logp = await gpu.readF32(t.logp, N);
  const gradNorm = (await opt.readGradNorms()).grad_norm;
  let loss = 0;
  for (let i = 0; i < N; i++) loss -= (b.completion_mask[i] * logp[i]) / count;

  // Clipped AdamW (the clip coefficient on the GPU, from the sums above), one submit.
  opt.setLearningRate(lr);
  await opt.step(model.grads!, hp.max_grad_norm);
  Object.values(t).forEach((x) => x.destroy());
  dlogp.destroy();
  return { loss, gradNorm };
}

function shuffle<T>(xs: T[], rng: Rng): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

async function main(): Promise<void> {
  const hp = parseArgs(process.argv.slice(2));
  const t0 = performance.now();
  console.log(await makeDefaultTokenizer(hp.out));
  const tok = await loadTokenizerDir(hp.out);
  const raw = hfConfig(tok, hp);
  const config = parseConfig(raw);
  const gpu = await nodeGpu();
  const rng = new Rng(hp.seed);
  const model = CausalLM.fromWeights(gpu, config, initWeights(config, rng, hp.init_std));
  const opt = new Optimizer(gpu, model.params.values(), { name: 'adamw', lr: hp.lr, betas: hp.betas, eps: hp.eps, weight_decay: hp.weight_decay, momentum: 0 });
  const problems = allProblems();
  const train = problems.filter((p) => !isHeldOut(p)).map((p) => encode(tok, p));
  const heldOut = shuffle(problems.filter(isHeldOut), new Rng(hp.seed + 1)).map((p) => encode(tok, p));
  const evalSet = heldOut.slice(0, hp.eval_problems);
  console.log(`${config.architecture}: ${countParams(config)} parameters, V = ${config.vocab_size}; ${train.length} training / ${heldOut.length} held-out problems; ${gpu.adapter.description}`);

  let order = shuffle(train, rng);
  let pos = 0;
  let step = 0;
  const log: string[] = [];
  while (step < hp.max_steps) {
    if (pos + hp.batch_size > order.length) [order, pos] = [shuffle(train, rng), 0];
    const batch = order.slice(pos, pos + hp.batch_size).map((e) => ({ prompt: e.prompt, completion: e.styles[rng.next() < SENTENCE_STYLE_FRACTION ? 1 : 0] }));
    pos += hp.batch_size;
    step++;
    const lr = hp.lr * Math.min(1, step / hp.warmup_steps);
    const { loss, gradNorm } = await trainStep(model, tok, batch, opt, lr, hp);
    if (step % hp.eval_every === 0) {
      const e = await evaluate(model, tok, evalSet);
      const line = `step ${step}  loss ${loss.toFixed(4)}  grad_norm ${gradNorm.toFixed(3)}  held-out P(right) ${e.right.toFixed(3)}  P(bare right) ${e.bare.toFixed(3)}  greedy ${e.greedy.toFixed(3)}  ${((performance.now() - t0) / 1000).toFixed(0)} s`;
      console.log(line);
      log.push(line);
      if (e.right >= hp.target) break;
    }
  }
  const trainSeconds = (performance.now() - t0) / 1000;
  const final = await evaluate(model, tok, heldOut);
  const perPrompt = (await evaluate(model, tok, DEFAULT_PROBLEMS.map((p) => encode(tok, p)))).perProblem;
  const summary: Summary = {
    steps: step,
    train_seconds: Math.round(trainSeconds),
    adapter: gpu.adapter.description,
    held_out_problems: heldOut.length,
    held_out: { right: final.right, bare_right: final.bare, greedy: final.greedy, greedy_bare: final.greedy_bare },
    default_prompts: DEFAULT_PROBLEMS.map((p, i) => ({ prompt: additionQuestion(p), answer: additionAnswer(p), ...perPrompt[i] })),
  };
  console.log(JSON.stringify(summary, null, 1));

  // Hugging Face layout.
  mkdirSync(hp.out, { recursive: true });
  const tensors: Record<string, TensorOut> = {};
  for (const [name, p] of model.params) tensors[name] = { dtype: 'F32', shape: p.shape, data: await model.readParam(name) };
  writeFileSync(join(hp.out, 'model.safetensors'), writeSafeTensors(tensors, { format: 'pt' }));
  writeFileSync(join(hp.out, 'config.json'), JSON.stringify(raw, null, 2) + '\n');
  writeFileSync(
    join(hp.out, 'generation_config.json'),
    JSON.stringify({ bos_token_id: tok.pad_token_id, eos_token_id: [tok.eos_token_id, tok.pad_token_id], pad_token_id: tok.pad_token_id, do_sample: true, temperature: 1.0, top_k: 0, top_p: 1.0, max_new_tokens: DEFAULT_GRPO_CONFIG.max_completion_length }, null, 2) + '\n',
  );
  writeFileSync(join(hp.out, 'README.md'), modelCard(config, hp, summary, log));
  process.exit(0);
}

type Summary = {
  steps: number;
  train_seconds: number;
  adapter: string;
  held_out_problems: number;
  held_out: { right: number; bare_right: number; greedy: number; greedy_bare: number };
  default_prompts: { prompt: string; answer: string; right: number; bare: number }[];
};

function modelCard(config: ReturnType<typeof parseConfig>, hp: typeof HP, s: Summary, log: string[]): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  return `---
license: apache-2.0
library_name: grpo-studio
pipeline_tag: text-generation
tags: [toy, addition, grpo]
---

# ${DEFAULT_MODEL_NAME}

The GRPO Studio's embedded default model: a ${countParams(config).toLocaleString('en-US')}-parameter
\`Qwen2ForCausalLM\` (hidden ${config.hidden_size}, ${config.num_hidden_layers} layers, ${config.num_attention_heads} query / ${config.num_key_value_heads} key-value heads of ${config.head_dim},
SwiGLU MLP ${config.intermediate_size}, RoPE θ = ${config.rope_theta}, tied embeddings, float32) with a ${config.vocab_size}-token
tokenizer cut down from Qwen3's (same byte-level BPE, digit-by-digit split, special tokens and ChatML chat
template; built by \`scripts/make-default-tokenizer.ts\`).

It was fine-tuned from random weights by this repository's own WebGPU kernels (\`npm run train:default\`,
\`scripts/train-default.ts\`) on one task, two-digit addition in Qwen3's chat format (a, b in 10..99;
one problem in ten held out), with two answer styles: the bare sum (${100 - 100 * SENTENCE_STYLE_FRACTION}% of examples) and a
sentence (${100 * SENTENCE_STYLE_FRACTION}%):

\`\`\`
<|im_start|>user
What is 37 + 45?<|im_end|>
<|im_start|>assistant
82<|im_end|>                     or    The answer is 82.<|im_end|>
\`\`\`

Loss: mean cross-entropy over the completion tokens (the answer and \`<|im_end|>\`); AdamW (lr ${hp.lr},
${hp.warmup_steps}-step warmup, betas ${hp.betas.join(', ')}, weight decay ${hp.weight_decay}), clip_grad_norm ${hp.max_grad_norm}, batch ${hp.batch_size}, seed ${hp.seed}.

**Training stopped early on purpose**, at step ${s.steps}, once the probability of sampling a right sum at
temperature 1 reached ${hp.target} on held-out problems. A group of G = 8 samples then holds right and wrong
sums, bare numbers and sentences (of different lengths), so its rewards vary and the first GRPO step has
something to learn. It is not a good adder.

| held-out problems (${s.held_out_problems}) | right sum, either style | bare right sum (correctness reward 1) |
|---|---|---|
| sampled at temperature 1 (expected) | ${pct(s.held_out.right)} | ${pct(s.held_out.bare_right)} |
| greedy | ${pct(s.held_out.greedy)} | ${pct(s.held_out.greedy_bare)} |

These are exact, from teacher-forced log-probs: the sampled accuracy is the mean of exp Σ log p over a
target's tokens; greedy decoding produces a target iff each of its tokens is the argmax given its prefix.
On the studio's default prompts:

| prompt | answer | P(right sum) | P(bare right sum) |
|---|---|---|---|
${s.default_prompts.map((d) => `| ${d.prompt} | ${d.answer} | ${pct(d.right)} | ${pct(d.bare)} |`).join('\n')}

Trained in ${s.train_seconds} s on ${s.adapter}.

<details><summary>training log</summary>

\`\`\`
${log.join('\n')}
\`\`\`
</details>
`;
}

await main();
