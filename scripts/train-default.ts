// Trains the studio's embedded models with this project's own GPU kernels: the model's forward with saved
// activations, the log-prob gather (cross-entropy on the trained completion tokens), the model's backward,
// clip_grad_norm_ and AdamW, from random weights. One loop for every task of scripts/train-tasks.ts:
// public/models/tiny-adder (two-digit addition, src/grpo/default_task.ts) and public/models/tiny-tool
// (multiplication through a tool call, src/grpo/tool_task.ts). The tokenizer is Qwen3's cut down to the
// task (scripts/make-default-tokenizer.ts). Everything is seeded (init, batch order).
//
// Each example has target variants (answer styles, tool-call spellings) drawn with fixed shares, so sampled
// groups differ in format and length as well as correctness. A variant's completion may hold text the
// model does not write (a tool response): its loss mask is 0 there (TRL's tool_mask).
//
// Training stops EARLY on purpose: as soon as the model's probability of producing a right completion at
// temperature 1, averaged over held-out problems, reaches --target (default 0.5). A GRPO group of 8
// samples from such a model holds right and wrong answers, so the first step the studio shows has
// non-zero advantages; a fully trained model would give every group the same reward.
// Accuracies are exact, from teacher-forced log-probs: the probability of sampling a target at
// temperature 1 is exp(Σ_t logp_t) over its trained tokens (given the untrained ones); greedy decoding
// produces it iff every trained token is the argmax given the target's prefix.
//
//   npm run train:default [-- --target 0.5 --max-steps 1500 --out DIR --seed 1234]      (tiny-adder)
//   npm run train:tool [-- …]                                                           (--model tiny-tool)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { nodeGpu } from '../src/gpu/node.ts';
import type { Gpu } from '../src/gpu/context.ts';
import { assembleBatch, padBatch, type PaddedBatch } from '../src/grpo/batch.ts';
import { DEFAULT_MODEL_NAME } from '../src/grpo/default_task.ts';
import { writeSafeTensors, type TensorOut } from '../src/io/safetensors.ts';
import { logprob_gather_backward, logprob_gather_forward } from '../src/kernels/logprob_gather.ts';
import { Optimizer } from '../src/grpo/optimizer.ts';
import { countParams, numel, paramSpecs, parseConfig } from '../src/model/config.ts';
import { CausalLM } from '../src/model/model.ts';
import { loadTokenizerDir } from '../src/tokenize/node.ts';
import type { Tokenizer } from '../src/tokenize/tokenizer.ts';
import { Rng } from '../src/model/rng.ts';
import { makeTaskTokenizer } from './make-default-tokenizer.ts';
import { SFT_TASKS, SHARED_HP, type Example, type Forced, type Row, type SftTask, type Summary, type TrainHP } from './train-tasks.ts';

// npm runs scripts from the package root.
const ROOT = process.cwd();

function parseArgs(argv: string[]): { out: string; task: SftTask } & TrainHP {
  const model = argv[0] === '--model' ? argv[1] : DEFAULT_MODEL_NAME;
  const task = SFT_TASKS[model];
  if (!task) throw new Error(`unknown model ${model} (expected ${Object.keys(SFT_TASKS).join(', ')})`);
  const o = { out: join(ROOT, 'public', task.path), task, ...SHARED_HP, ...task.hp };
  for (let i = argv[0] === '--model' ? 2 : 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === '--out') o.out = resolve(v);
    else if (k === '--target') o.target = Number(v);
    else if (k === '--max-steps') o.max_steps = Number(v);
    else if (k === '--seed') o.seed = Number(v);
    else throw new Error(`unknown argument ${k} (expected --model first, then --out, --target, --max-steps, --seed)`);
  }
  return o;
}

function hfConfig(tok: Tokenizer, hp: TrainHP): Record<string, unknown> {
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

/**
 * Rows as one batch. The completion mask covers every real completion token (no EOS cut: a tool
 * conversation's completion holds an <|im_end|> per turn); the loss mask is completion_mask × tool_mask.
 */
function toBatch(tok: Tokenizer, rows: Row[]): PaddedBatch {
  return padBatch(
    assembleBatch({
      prompt_ids: rows.map((e) => e.prompt),
      completion_ids: rows.map((e) => e.completion),
      num_generations: 1,
      pad_token_id: tok.pad_token_id!,
      eos_token_ids: [],
      tool_mask: rows.map((e) => e.loss),
    }),
  );
}

/** GPU buffers of one batch's completion tokens, its loss mask and the per-token log-prob pass. */
function tokenBuffers(gpu: Gpu, b: PaddedBatch) {
  const N = b.B * b.C;
  const loss = Int32Array.from(b.completion_mask, (m, i) => m * b.tool_mask![i]); // (B, C)
  return {
    lossMask: loss,
    buffers: {
      ids: gpu.upload('completion_ids', b.completion_ids), // (B, C)
      mask: gpu.upload('loss_mask', loss), // (B, C)
      logp: gpu.createBuffer('per_token_logps', N * 4), // (B, C)
      lse: gpu.createBuffer('lse', N * 8), // (B, C, 2)
      entropy: gpu.createBuffer('entropy', N * 4), // (B, C)
    },
  };
}

/** Teacher-forced log-prob and greedy flag of each trained segment of every variant of every example. */
async function teacherForce(model: CausalLM, tok: Tokenizer, ex: Example[]): Promise<Forced[][]> {
  const gpu = model.gpu;
  const rows = ex.flatMap((e) => e.variants);
  const out: Forced[] = [];
  // Chunks bound the logits read back (B × C × V floats).
  for (let r0 = 0; r0 < rows.length; r0 += 128) {
    const b = toBatch(tok, rows.slice(r0, r0 + 128));
    const { lossMask, buffers: t } = tokenBuffers(gpu, b);
    const rec = gpu.recorder('eval');
    const f = model.forward(rec, { B: b.B, T: b.L, input_ids: b.input_ids, attention_mask: b.attention_mask, position_ids: b.position_ids }, { logits_to_keep: b.C });
    logprob_gather_forward(rec, { logits: f.logits, ids: t.ids, mask: t.mask, logp: t.logp, lse: t.lse, entropy: t.entropy, N: b.B * b.C, V: f.V, temperature: 1 });
    await rec.finish();
    const logp = await gpu.readF32(t.logp, b.B * b.C);
    const logits = await gpu.readF32(f.logits, b.B * b.C * f.V);
    Object.values(t).forEach((x) => x.destroy());
    for (let r = 0; r < b.B; r++) {
      const seg: Forced = { logp: [], argmax: [] };
      let inside = false;
      for (let c = 0; c < b.C; c++) {
        const i = r * b.C + c;
        if (!lossMask[i]) {
          inside = false;
          continue;
        }
        if (!inside) seg.logp.push(0), seg.argmax.push(true);
        inside = true;
        seg.logp[seg.logp.length - 1] += logp[i];
        const z = logits.subarray(i * f.V, (i + 1) * f.V);
        const target = z[b.completion_ids[i]];
        for (let v = 0; v < f.V; v++) if (z[v] > target) seg.argmax[seg.argmax.length - 1] = false;
      }
      out.push(seg);
    }
  }
  let k = 0;
  return ex.map((e) => e.variants.map(() => out[k++]));
}

/** One SFT step: mean cross-entropy over the trained tokens, backward, clip, AdamW. Returns loss and grad norm. */
async function trainStep(model: CausalLM, tok: Tokenizer, rows: Row[], opt: Optimizer, lr: number, hp: TrainHP): Promise<{ loss: number; gradNorm: number }> {
  const gpu = model.gpu;
  const b = toBatch(tok, rows);
  const N = b.B * b.C;
  const { lossMask, buffers: t } = tokenBuffers(gpu, b);
  // loss = −Σ M·logp / ΣM, so dloss/dlogp = −M / ΣM.
  let count = 0;
  for (let i = 0; i < N; i++) count += lossMask[i];
  const dlogp = gpu.upload('dlogp', Float32Array.from(lossMask, (m) => -m / count)); // (B, C)

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
  for (let i = 0; i < N; i++) loss -= (lossMask[i] * logp[i]) / count;

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

/** A variant drawn by its share: u ~ U[0, 1) falls in the shares accumulated from the last variant back. */
function drawVariant(e: Example, u: number): Row {
  let acc = 0;
  for (let v = e.variants.length - 1; v > 0; v--) if (u < (acc += e.variants[v].fraction)) return e.variants[v];
  return e.variants[0];
}

async function main(): Promise<void> {
  const hp = parseArgs(process.argv.slice(2));
  const task = hp.task;
  const t0 = performance.now();
  console.log(await makeTaskTokenizer(task.name, hp.out));
  const tok = await loadTokenizerDir(hp.out);
  const raw = hfConfig(tok, hp);
  const config = parseConfig(raw);
  const gpu = await nodeGpu();
  const rng = new Rng(hp.seed);
  const model = CausalLM.fromWeights(gpu, config, initWeights(config, rng, hp.init_std));
  const opt = new Optimizer(gpu, model.params.values(), { name: 'adamw', lr: hp.lr, betas: hp.betas, eps: hp.eps, weight_decay: hp.weight_decay, momentum: 0 });
  const problems = task.problems();
  const train = problems.filter((p) => !task.isHeldOut(p)).map((p) => task.encode(tok, p));
  const heldOut = shuffle(problems.filter(task.isHeldOut), new Rng(hp.seed + 1)).map((p) => task.encode(tok, p));
  const evalSet = heldOut.slice(0, hp.eval_problems);
  console.log(`${config.architecture}: ${countParams(config)} parameters, V = ${config.vocab_size}; ${train.length} training / ${heldOut.length} held-out problems; ${gpu.adapter.description}`);

  let order = shuffle(train, rng);
  let pos = 0;
  let step = 0;
  const log: string[] = [];
  while (step < hp.max_steps) {
    if (pos + hp.batch_size > order.length) [order, pos] = [shuffle(train, rng), 0];
    const batch = order.slice(pos, pos + hp.batch_size).map((e) => drawVariant(e, rng.next()));
    pos += hp.batch_size;
    step++;
    const lr = hp.lr * Math.min(1, step / hp.warmup_steps);
    const { loss, gradNorm } = await trainStep(model, tok, batch, opt, lr, hp);
    if (step % 5 === 0 && step % hp.eval_every !== 0) console.log(`step ${step}  loss ${loss.toFixed(4)}  ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    if (step % hp.eval_every === 0) {
      const e = task.score(await teacherForce(model, tok, evalSet));
      const line = `step ${step}  loss ${loss.toFixed(4)}  grad_norm ${gradNorm.toFixed(3)}  ${task.logLine(e)}  ${((performance.now() - t0) / 1000).toFixed(0)} s`;
      console.log(line);
      log.push(line);
      if (e.right >= hp.target) break;
    }
  }
  const trainSeconds = (performance.now() - t0) / 1000;
  const forcedPrompts = await teacherForce(model, tok, task.prompts.map((p) => task.encode(tok, p)));
  const summary: Summary = {
    steps: step,
    train_seconds: Math.round(trainSeconds),
    adapter: gpu.adapter.description,
    held_out_problems: heldOut.length,
    held_out: task.score(await teacherForce(model, tok, heldOut)),
    prompts: task.prompts.map((p, i) => ({ ...task.describe(p), metrics: task.score([forcedPrompts[i]]) })),
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
    JSON.stringify({ bos_token_id: tok.pad_token_id, eos_token_id: [tok.eos_token_id, tok.pad_token_id], pad_token_id: tok.pad_token_id, do_sample: true, temperature: 1.0, top_k: 0, top_p: 1.0, max_new_tokens: task.maxNewTokens }, null, 2) + '\n',
  );
  writeFileSync(join(hp.out, 'README.md'), task.card(tok, config, hp, summary, log));
  process.exit(0);
}

await main();
