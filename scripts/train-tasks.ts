// The tasks scripts/train-default.ts trains the embedded models on: what an example is (a prompt and its
// target variants with their shares and loss masks), how teacher-forced log-probs become the accuracies the
// loop stops on, and each model's card (README.md). tiny-adder: two-digit addition (src/grpo/default_task.ts);
// tiny-tool: multiplication through a tool call (src/grpo/tool_task.ts).
import type { ModelConfig } from '../src/model/config.ts';
import { countParams } from '../src/model/config.ts';
import {
  DEFAULT_GRPO_CONFIG,
  DEFAULT_MODEL_NAME,
  DEFAULT_MODEL_PATH,
  DEFAULT_PROBLEMS,
  SENTENCE_STYLE_FRACTION,
  additionAnswer,
  additionMessages,
  additionQuestion,
  additionSentence,
  allProblems,
  isHeldOut,
  type AdditionProblem,
} from '../src/grpo/default_task.ts';
import {
  CALL_SPELLINGS,
  TOOL_GRPO_CONFIG,
  TOOL_MODEL_NAME,
  TOOL_MODEL_PATH,
  TOOL_PROBLEMS,
  callJson,
  callText,
  multiplicationAnswer,
  multiplicationSentence,
  multiplicationQuestion,
  toolExamplePieces,
  toolFrame,
  toolVariants,
} from '../src/grpo/tool_task.ts';
import type { Tokenizer } from '../src/tokenize/tokenizer.ts';

export interface TrainHP {
  seed: number;
  hidden_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  intermediate_size: number;
  init_std: number;
  batch_size: number;
  lr: number;
  warmup_steps: number;
  betas: [number, number];
  eps: number;
  weight_decay: number;
  max_grad_norm: number;
  eval_every: number;
  eval_problems: number;
  target: number;
  max_steps: number;
}

/** The hyperparameters both models share (a task's `hp` overrides some). */
export const SHARED_HP: TrainHP = {
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
  betas: [0.9, 0.999],
  eps: 1e-8,
  weight_decay: 0,
  max_grad_norm: 1.0,
  eval_every: 25,
  eval_problems: 256, // held-out problems scored at each evaluation
  target: 0.5, // stop once the held-out E[P(right)] reaches this
  max_steps: 1500,
};

/** One SFT row: a rendered prompt, a target completion and its loss mask (0 on text the model does not write). */
export interface Row {
  prompt: number[];
  completion: number[];
  loss: number[];
}

/** A problem's target variants, each with its share in training. */
export interface Example {
  variants: (Row & { fraction: number })[];
}

/** Teacher-forced log-prob (Σ over tokens) and greedy flag (every token the argmax) of each trained segment of a variant. */
export interface Forced {
  logp: number[];
  argmax: boolean[];
}

/** Held-out accuracies; `right` is what training stops on. */
export type Metrics = { right: number } & Record<string, number>;

export interface Summary {
  steps: number;
  train_seconds: number;
  adapter: string;
  held_out_problems: number;
  held_out: Metrics;
  prompts: { prompt: string; answer: string; metrics: Metrics }[];
}

export interface SftTask {
  name: string;
  path: string;
  /** Overrides of the shared hyperparameters. */
  hp: Partial<TrainHP>;
  problems(): AdditionProblem[];
  isHeldOut(p: AdditionProblem): boolean;
  encode(tok: Tokenizer, p: AdditionProblem): Example;
  /** The studio's preloaded prompts (held out), scored one by one in the card. */
  prompts: readonly AdditionProblem[];
  describe(p: AdditionProblem): { prompt: string; answer: string };
  /** Accuracies from the teacher-forced variants of each example (forced[e][v]). */
  score(forced: Forced[][]): Metrics;
  logLine(m: Metrics): string;
  maxNewTokens: number;
  /** The model card (README.md); `tok` renders the example conversation with the model's own template. */
  card(tok: Tokenizer, config: ModelConfig, hp: TrainHP, s: Summary, log: string[]): string;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0);
/** P(a variant) at temperature 1 and whether greedy decoding produces it. */
const prob = (f: Forced) => Math.exp(sum(f.logp));
const greedy = (f: Forced) => f.argmax.every(Boolean);

/** Target ids of one text: its tokens and <|im_end|>, all trained. */
function target(tok: Tokenizer, prompt: number[], text: string, fraction: number): Example['variants'][number] {
  const completion = [...tok.encode(text), tok.eos_token_id!];
  return { prompt, completion, loss: completion.map(() => 1), fraction };
}

/** The card's front matter, the architecture paragraph, and the training time and log: shared by both models. */
function cardFrame(config: ModelConfig, s: Summary, log: string[], o: { name: string; tags: string; what: string; body: string }): string {
  return `---
license: apache-2.0
library_name: grpo-studio
pipeline_tag: text-generation
tags: [${o.tags}]
---

# ${o.name}

${o.what}: a ${countParams(config).toLocaleString('en-US')}-parameter
\`Qwen2ForCausalLM\` (hidden ${config.hidden_size}, ${config.num_hidden_layers} layers, ${config.num_attention_heads} query / ${config.num_key_value_heads} key-value heads of ${config.head_dim},
SwiGLU MLP ${config.intermediate_size}, RoPE θ = ${config.rope_theta}, tied embeddings, float32) with a ${config.vocab_size}-token
tokenizer cut down from Qwen3's (same byte-level BPE, digit-by-digit split, special tokens and ChatML chat
template; built by \`scripts/make-default-tokenizer.ts\`).
${o.body}
Trained in ${s.train_seconds} s on ${s.adapter}.

<details><summary>training log</summary>

\`\`\`
${log.join('\n')}
\`\`\`
</details>
`;
}

const ACCURACY_NOTE = `These are exact, from teacher-forced log-probs: the sampled accuracy is the mean of exp Σ log p over a
target's tokens; greedy decoding produces a target iff each of its tokens is the argmax given its prefix.`;

const adder: SftTask = {
  name: DEFAULT_MODEL_NAME,
  path: DEFAULT_MODEL_PATH,
  hp: {},
  problems: allProblems,
  isHeldOut,
  encode(tok, p) {
    const prompt = tok.renderChat(additionMessages(p)).ids;
    return { variants: [target(tok, prompt, additionAnswer(p), 1 - SENTENCE_STYLE_FRACTION), target(tok, prompt, additionSentence(p), SENTENCE_STYLE_FRACTION)] };
  },
  prompts: DEFAULT_PROBLEMS,
  describe: (p) => ({ prompt: additionQuestion(p), answer: additionAnswer(p) }),
  score(forced) {
    return {
      right: mean(forced.map(([bare, sentence]) => prob(bare) + prob(sentence))),
      bare: mean(forced.map(([bare]) => prob(bare))),
      greedy: mean(forced.map((vs) => (vs.some(greedy) ? 1 : 0))),
      greedy_bare: mean(forced.map(([bare]) => (greedy(bare) ? 1 : 0))),
    };
  },
  logLine: (m) => `held-out P(right) ${m.right.toFixed(3)}  P(bare right) ${m.bare.toFixed(3)}  greedy ${m.greedy.toFixed(3)}`,
  maxNewTokens: DEFAULT_GRPO_CONFIG.max_completion_length!,
  card: (_tok, config, hp, s, log) =>
    cardFrame(config, s, log, {
      name: DEFAULT_MODEL_NAME,
      tags: 'toy, addition, grpo',
      what: "The GRPO Studio's embedded default model",
      body: `
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
| sampled at temperature 1 (expected) | ${pct(s.held_out.right)} | ${pct(s.held_out.bare)} |
| greedy | ${pct(s.held_out.greedy)} | ${pct(s.held_out.greedy_bare)} |

${ACCURACY_NOTE}
On the studio's default prompts:

| prompt | answer | P(right sum) | P(bare right sum) |
|---|---|---|---|
${s.prompts.map((d) => `| ${d.prompt} | ${d.answer} | ${pct(d.metrics.right)} | ${pct(d.metrics.bare)} |`).join('\n')}
`,
    }),
};

const tool: SftTask = {
  name: TOOL_MODEL_NAME,
  path: TOOL_MODEL_PATH,
  // Rows are ~4× tiny-adder's: smaller batches, fewer evaluated problems.
  hp: { batch_size: 16, eval_problems: 64, eval_every: 25 },
  problems: allProblems,
  isHeldOut,
  encode(tok, p) {
    const frame = toolFrame(tok, p);
    return {
      variants: toolVariants().map((v) => {
        // Pieces tokenized apart, as TRL's tool loop concatenates them.
        const [prompt, ...rest] = toolExamplePieces(frame, p, v.spelling, v.sentence).map((x) => ({ ids: tok.encode(x.text), trained: x.trained }));
        return { prompt: prompt.ids, completion: rest.flatMap((x) => x.ids), loss: rest.flatMap((x) => x.ids.map(() => (x.trained ? 1 : 0))), fraction: v.fraction };
      }),
    };
  },
  prompts: TOOL_PROBLEMS,
  describe: (p) => ({ prompt: multiplicationQuestion(p), answer: multiplicationAnswer(p) }),
  score(forced) {
    // forced[e] in toolVariants() order: per spelling, the bare answer then the sentence. Segment 0 is the
    // call (with its <|im_end|>), segment 1 the answer given that call and the tool's result.
    const variants = toolVariants();
    const spelling = (s: string) => mean(forced.map((vs) => Math.exp(vs[variants.findIndex((v) => v.spelling === s)].logp[0])));
    const m: Metrics = {
      right: mean(forced.map((vs) => sum(vs.map(prob)))),
      bare: mean(forced.map((vs) => sum(vs.filter((_, i) => !variants[i].sentence).map(prob)))),
      call: 0,
      greedy_call: mean(forced.map((vs) => (vs.some((f) => f.argmax[0]) ? 1 : 0))),
      greedy: mean(forced.map((vs) => (vs.some(greedy) ? 1 : 0))),
      greedy_bare: mean(forced.map((vs) => (vs.some((f, i) => !variants[i].sentence && greedy(f)) ? 1 : 0))),
    };
    for (const { spelling: s } of CALL_SPELLINGS) m[`call_${s}`] = spelling(s);
    m.call = sum(CALL_SPELLINGS.map(({ spelling: s }) => m[`call_${s}`]));
    return m;
  },
  logLine: (m) =>
    `held-out P(call) ${m.call.toFixed(3)} [${CALL_SPELLINGS.map(({ spelling: s }) => m[`call_${s}`].toFixed(3)).join(' / ')}]  P(call, answer) ${m.right.toFixed(3)}  P(call, bare answer) ${m.bare.toFixed(3)}  greedy ${m.greedy.toFixed(3)}`,
  maxNewTokens: TOOL_GRPO_CONFIG.max_completion_length!,
  card: (tok, config, hp, s, log) => {
    const h = s.held_out;
    const ex = TOOL_PROBLEMS[0];
    const frame = toolFrame(tok, ex);
    return cardFrame(config, s, log, {
      name: TOOL_MODEL_NAME,
      tags: 'toy, tool-calling, multiplication, grpo',
      what: "The GRPO Studio's embedded tool-calling model",
      body: `
It was fine-tuned from random weights by this repository's own WebGPU kernels (\`npm run train:tool\`,
\`scripts/train-default.ts\`) on one task (\`src/grpo/tool_task.ts\`), two-digit multiplication through a
tool, in Qwen3's chat format (a, b in 10..99; one problem in ten held out, as for tiny-adder). The model
does not multiply: it calls \`multiply\` with the question's numbers, reads the tool's result and copies
it into its answer. Each example is the conversation TRL's GRPOTrainer tool loop builds, its pieces
tokenized apart and concatenated:

\`\`\`
${frame.prompt}${callText(ex, 'canonical')}<|im_end|>              ← trained${frame.toolBlock.replace('</tool_response><|im_end|>', '</tool_response><|im_end|>                        ← masked (tool_mask 0)')}${multiplicationAnswer(ex)}<|im_end|>      or    ${multiplicationSentence(ex)}<|im_end|>      ← trained
\`\`\`

**Chat template**: Qwen3's, with its tools system prompt (the JSON schemas and the calling instructions,
~150 tokens for this one tool) replaced by one line per tool inside \`<tools></tools>\`; everything
else — the \`<tool_call>\` block of an assistant turn with \`tool_calls\`, tool messages as
\`<tool_response>\` user turns, the \`<think>\` handling, the generation prompt — is Qwen3's character for
character (\`tests/grpo/tool_model.test.ts\` renders a whole conversation with both). Why: with Qwen3's
tools prompt a training row is ~215 tokens instead of ~90, and a step at batch 16 took 6.6 s on this
machine's software GPU (lavapipe on 2 shared cores) against 0.8–1.7 s with the short prompt; the ~750
steps the copying took would have run well past the 25 minutes this model was allowed.

The call's JSON comes in three spellings: ${CALL_SPELLINGS.map((c) => `${c.spelling} ${100 * c.fraction}%`).join(', ')} —
canonical as the template's \`tojson\` writes it (\`${callJson(ex, 'canonical')}\`),
compact (\`${callJson(ex, 'compact')}\`) and padded with spaces and newlines as in
TRL #5145 (\`{\\n  "name"  :  "multiply", …\`). A loop that parses the call and re-renders it canonically
re-tokenizes the compact and padded ones to other lengths: the mismatch the studio shows. The answer is
the bare product (${100 - 100 * SENTENCE_STYLE_FRACTION}%) or a sentence (${100 * SENTENCE_STYLE_FRACTION}%).

Loss: mean cross-entropy over the assistant tokens only (the call and its \`<|im_end|>\`, the answer and its
\`<|im_end|>\`; the prompt and the tool block are masked); AdamW (lr ${hp.lr}, ${hp.warmup_steps}-step warmup, betas
${hp.betas.join(', ')}, weight decay ${hp.weight_decay}), clip_grad_norm ${hp.max_grad_norm}, batch ${hp.batch_size}, seed ${hp.seed}.

**Training stopped early on purpose**, at step ${s.steps}, once the probability of sampling a right call and
then a right answer at temperature 1 reached ${hp.target} on held-out problems (${hp.eval_problems} of them at each
evaluation). A group of G = 8 samples then holds right and wrong calls and answers, in several spellings.

| held-out problems (${s.held_out_problems}) | right call (any spelling) | right call, then right answer (either style) | right call, then bare right answer (correctness 1) |
|---|---|---|---|
| sampled at temperature 1 (expected) | ${pct(h.call)} | ${pct(h.right)} | ${pct(h.bare)} |
| greedy | ${pct(h.greedy_call)} | ${pct(h.greedy)} | ${pct(h.greedy_bare)} |

Sampled calls by spelling (probability of a right call in that spelling; share among right calls):
${CALL_SPELLINGS.map(({ spelling: sp }) => `${sp} ${pct(h[`call_${sp}`])} (${pct(h[`call_${sp}`] / h.call)})`).join(', ')}.

${ACCURACY_NOTE}
A right call is one of the three trained spellings with the right numbers (another spelling that parses
to the same call is possible but not counted). On the task's preloaded prompts:

| prompt | answer | P(right call) | P(right call and answer) | P(… bare answer) |
|---|---|---|---|---|
${s.prompts.map((d) => `| ${d.prompt} | ${d.answer} | ${pct(d.metrics.call)} | ${pct(d.metrics.right)} | ${pct(d.metrics.bare)} |`).join('\n')}
`,
    });
  },
};

export const SFT_TASKS: Record<string, SftTask> = { [adder.name]: adder, [tool.name]: tool };
