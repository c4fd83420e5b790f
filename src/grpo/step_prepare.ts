// The stages before the GPU work of one update: render prompts → sample G completions → score rewards →
// advantages → assemble the padded batch (and upload what the loss reads). Starting from an imported
// grpo-batch/v1 batch, render / sample / reward are skipped and say so.
import { BatchFormatError, type GrpoBatch } from '../io/batch.ts';
import { assertComputable, modelLimits } from '../io/validate.ts';
import { generate } from '../model/generate.ts';
import type { RenderOptions } from '../tokenize/tokenizer.ts';
import { computeAdvantages, groupRows, rewardAdvantageGap, withUnscorable, type AdvantageResult } from './advantages.ts';
import { assembleBatch, checkScorable, padBatch, type PaddedBatch } from './batch.ts';
import { scoreRewards } from './rewards.ts';
import { batchConfigOf, type StepConfig } from './step_config.ts';
import { toolCallLoop, type ToolRow } from './tool_loop.ts';
import { need, type PromptSource, type Skipped, type StageContext, type StageData, type StageOutput, type StepState } from './step_types.ts';
import { SettingsError } from './settings/types.ts';

const FROM_BATCH: Skipped = { skipped: 'the update starts from an imported batch' };

const promptsOf = (ctx: StageContext): PromptSource | null => (ctx.opts.source.kind === 'prompts' ? ctx.opts.source : null);

/** pad / EOS for generation and assembly: the settings', else the tokenizer's (pad falls back to EOS, as TRL). */
function special(src: PromptSource): { pad: number; eos: number[] } {
  const eos = src.generation.eos_token_ids ?? (src.tokenizer.eos_token_id !== undefined ? [src.tokenizer.eos_token_id] : []);
  const pad = src.generation.pad_token_id ?? src.tokenizer.pad_token_id ?? eos[0];
  if (pad === undefined) throw new RangeError('the tokenizer has neither a pad nor an EOS token: set pad_token_id');
  return { pad, eos };
}

/** The prompts' render: the page's options, with the tool schemas when the prompts have tools (TRL renders them so). */
const renderOf = (src: PromptSource): RenderOptions => (src.tools ? { ...src.render, tools: src.tools.schemas } : (src.render ?? {}));

/**
 * The seed of the tool loop's later turns: the sampler draws uniform(seed, row, step), and a later turn's rows
 * are a subset renumbered from 0, so each turn mixes its own seed (a golden-ratio step) to draw afresh.
 */
const turnSeed = (seed: number, iteration: number) => (seed + Math.imul(iteration, 0x9e3779b1)) >>> 0;

export async function render(ctx: StageContext): Promise<StageOutput<'render'> | Skipped> {
  const src = promptsOf(ctx);
  if (!src) return FROM_BATCH;
  const rendered = src.prompts.map((p) => src.tokenizer.renderChat(p.messages, renderOf(src)));
  return { data: { prompt_texts: rendered.map((r) => r.text), prompt_ids: rendered.map((r) => r.ids), messages: src.prompts.map((p) => p.messages) } };
}

export async function sample(ctx: StageContext, state: StepState): Promise<StageOutput<'sample'> | Skipped> {
  const src = promptsOf(ctx);
  if (!src) return FROM_BATCH;
  const { pad, eos } = special(src);
  // The GPU sampler unless the sampling settings name the CPU one (the first_update bench compares both). It was
  // off while a page "hang" in full `.ci/run` runs was blamed on its asynchronous read-backs; the hang was an
  // import landing mid-update (src/store/controller.ts nextStage), and came with the CPU sampler too.
  const sampling = { ...src.generation, sampler: src.generation.sampler ?? ('gpu' as const), pad_token_id: pad, eos_token_ids: eos };
  const run = async (prompts: number[][], o: typeof sampling) => {
    const decoder = src.decoder();
    try {
      return await generate(decoder, prompts, o);
    } finally {
      decoder.dispose();
    }
  };
  const r = need(state, 'render').data;
  const out = await run(r.prompt_ids, sampling);
  let decode_ms = out.timings.prefill_ms + out.timings.decode_ms;
  let completion_ids = out.completion_ids;
  let logps = out.sampling_per_token_logps;
  let finish_reason = out.finish_reason;
  let tools: StageData['sample']['tools'] = null;
  if (src.tools) {
    const G = src.generation.num_generations;
    const rows = await toolCallLoop(
      { prompt_ids: completion_ids.map((_, b) => r.prompt_ids[Math.floor(b / G)]), prompt_messages: completion_ids.map((_, b) => r.messages[Math.floor(b / G)]), completion_ids, logps, finish_reason },
      async (sequences, iteration, max_new_tokens) => {
        const next = await run(sequences, { ...sampling, num_generations: 1, max_new_tokens, seed: turnSeed(sampling.seed, iteration) });
        decode_ms += next.timings.prefill_ms + next.timings.decode_ms;
        return { completion_ids: next.completion_ids, logps: next.sampling_per_token_logps, finish_reason: next.finish_reason };
      },
      { tokenizer: src.tokenizer, render: renderOf(src), eos_token_id: eos[0], run: src.tools.run },
      { ...src.tools.loop, max_completion_length: src.generation.max_new_tokens },
    );
    const overflow = rows.findIndex((row) => row.mask_overflow);
    if (overflow >= 0) throw new BatchFormatError(maskOverflow(rows, overflow));
    completion_ids = rows.map((row) => row.completion_ids);
    logps = rows.map((row) => row.logps);
    finish_reason = rows.map((row) => row.finish_reason);
    tools = {
      tool_mask: rows.map((row) => row.tool_mask),
      messages: rows.map((row) => row.messages),
      tool_calls: rows.map((row) => row.tool_calls),
      tool_failures: rows.map((row) => row.tool_failures),
      retokenized: rows.map((row) => row.retokenized),
    };
  }
  return {
    data: {
      completion_ids,
      completion_texts: completion_ids.map((ids) => src.tokenizer.decode(ids)),
      sampling_per_token_logps: logps,
      finish_reason,
      decode_ms,
      tools,
    },
  };
}

/** The one-line refusal where the rerender loop left a tool_mask longer than its completion (huggingface/trl#5145). */
function maskOverflow(rows: ToolRow[], at: number): string {
  const bad = rows.flatMap((row, b) => (row.mask_overflow ? [b] : []));
  const o = rows[at].mask_overflow!;
  const re = rows[at].retokenized.find((x) => x.iteration === o.iteration);
  const how = re ? `its tool call, sampled in ${re.sampled_tokens} tokens, was re-rendered in ${re.rendered_tokens}` : 'its turns were re-rendered shorter than sampled';
  return `tool_mask: sample ${at} has ${o.mask} entries for ${o.completion} completion tokens after tool round ${o.iteration + 1} (${how})${bad.length > 1 ? `; also sample${bad.length > 2 ? 's' : ''} ${bad.filter((b) => b !== at).join(', ')}` : ''}: the tool loop re-tokenized the conversation (TRL before #5242), so the mask built from the sampled length overruns the completion and TRL fails in _compute_loss (huggingface/trl#5145); the concat loop keeps the sampled ids`;
}

export async function reward(ctx: StageContext, state: StepState): Promise<StageOutput<'reward'> | Skipped> {
  const src = promptsOf(ctx);
  if (!src) return FROM_BATCH;
  const r = need(state, 'render').data;
  const s = need(state, 'sample').data;
  const G = src.generation.num_generations;
  const samples = s.completion_ids.map((ids, i) => ({
    index: i,
    group: Math.floor(i / G),
    prompt: r.prompt_texts[Math.floor(i / G)],
    completion: s.completion_texts[i], // a tool rollout's: every turn and tool block (rewards pick the turn they score)
    answer: src.prompts[Math.floor(i / G)].answer,
    completion_ids: ids,
  }));
  return { data: await scoreRewards(src.rewards, samples, src.runJs) };
}

/** The batch's advantages, or TRL's group advantages from its (or the sampled) rewards. */
export async function advantages(ctx: StageContext, state: StepState): Promise<StageOutput<'advantages'>> {
  const c = ctx.opts.config;
  const src = ctx.opts.source;
  // The first stage that computes from an imported batch: the page and the CLI stop here on the same verdict.
  if (src.kind === 'batch') {
    assertComputable(src.batch, { purpose: 'step', ...modelLimits(ctx.opts.policy.config) });
    return { data: batchAdvantages(src.batch, c) };
  }
  // The rollout's rewards go through the studio's group advantage (sum the functions, then normalise): TRL's
  // normalize_then_sum (each function normalised in its group first) is another number, so it is refused, as
  // for an imported batch without advantages (rewardAdvantageGap).
  if (c.advantage_gap) throw new SettingsError(`config.multi_objective_aggregation: ${c.advantage_gap}; set sum_then_normalize to take the step`);
  const a = rewardAdvantages(need(state, 'reward').data, src.generation.num_generations, undefined, c);
  return { data: { advantages: Array.from(a.advantages), groups: a.groups, from: 'rewards' } };
}

/**
 * An imported batch's advantages as the step takes them: its own, or its rewards' group advantages. Throws
 * BatchFormatError when it has neither, or per-token advantages the step cannot take.
 */
function batchAdvantages(batch: GrpoBatch, c: Pick<StepConfig, 'advantage_estimator' | 'scale_rewards' | 'advantage_clip'>): StageOutput<'advantages'>['data'] {
  if (batch.advantages) return { advantages: [...batch.advantages], groups: null, from: 'batch' };
  // Per-token advantages that vary inside a sequence (a critic's GAE, a token-level reward) were the
  // trainer's: the step takes one advantage per sequence, and rewards would give other numbers.
  if (batch.per_token_advantages) throw new BatchFormatError(`per_token_advantages: ${varyingAdvantage(batch.per_token_advantages, batch.completion_mask)}; the step takes one advantage per sequence (GRPO), and recomputing them from rewards would not be what the trainer used`);
  const gap = rewardAdvantageGap(batch);
  if (gap) throw new BatchFormatError(`advantages: the batch has none, and ${gap}; include the trainer's "advantages"`);
  const a = rewardAdvantages(batch, batch.num_generations, batch.group_ids, c);
  return { advantages: Array.from(a.advantages), groups: a.groups, from: 'rewards' };
}

/**
 * The group advantages of a batch's rewards as the step computes them (TRL's, or verl's with
 * advantage_estimator "verl"); the mismatch explorer's corrections take them too when a batch has none.
 * Throws BatchFormatError when there are no rewards or a labelled group is incomplete.
 */
export function rewardAdvantages(scored: Pick<GrpoBatch, 'rewards' | 'rewards_per_func'>, G: number, labels: number[] | undefined, c: Pick<StepConfig, 'advantage_estimator' | 'scale_rewards' | 'advantage_clip'>): AdvantageResult {
  const rewards = scored.rewards;
  if (!rewards) throw new BatchFormatError('the batch has neither "advantages" nor "rewards": nothing to take a step on');
  // Labelled groups (verl uid, a rank's slice): a group missing rows had its mean/std over rows we lack.
  const groups = labels && groupRows(rewards.length, G, labels);
  const partial = groups ? groups.complete.indexOf(false) : -1;
  if (groups && partial >= 0) throw new BatchFormatError(`group_ids: group ${labels![groups.rows[partial][0]]} has ${groups.rows[partial].length} of its ${G} rows here, so its advantages cannot be recomputed from rewards; include "advantages" or merge the slices`);
  // TRL: a sample no reward function scored is out of the group statistics, advantage 0 (verl has no such rows).
  const r = c.advantage_estimator === 'trl' ? withUnscorable(rewards, scored.rewards_per_func) : rewards;
  return computeAdvantages(r, { num_generations: G, scale_rewards: c.scale_rewards, estimator: c.advantage_estimator, groups: groups?.rows, clip: c.advantage_clip });
}

/** TRL's loss mask: completion_mask · tool_mask (tool_mask absent = all 1). */
export function lossMaskOf(p: PaddedBatch): Int32Array {
  if (!p.tool_mask) return p.completion_mask;
  const out = new Int32Array(p.completion_mask.length); // (B, C)
  for (let i = 0; i < out.length; i++) out[i] = p.completion_mask[i] * p.tool_mask[i];
  return out;
}

/** The padded batch the model scores; advantages, old log-probs and the loss mask go to the GPU once, here. */
export async function assemble(ctx: StageContext, state: StepState): Promise<StageOutput<'assemble'>> {
  const src = ctx.opts.source;
  const { policy, config } = ctx.opts;
  const adv = need(state, 'advantages').data.advantages;
  let batch: GrpoBatch;
  if (src.kind === 'batch') {
    batch = { ...src.batch, advantages: adv };
  } else {
    const { pad, eos } = special(src);
    const s = need(state, 'sample').data;
    const rw = need(state, 'reward').data;
    const r = need(state, 'render').data;
    const G = src.generation.num_generations;
    batch = assembleBatch({
      prompt_ids: r.prompt_ids,
      completion_ids: s.completion_ids,
      num_generations: G,
      pad_token_id: pad,
      eos_token_ids: eos,
      rewards: rw.rewards,
      rewards_per_func: rw.rewards_per_func,
      reward_weights: rw.weights,
      advantages: adv,
      sampling_per_token_logps: s.sampling_per_token_logps,
      // A tool rollout's rows: TRL's tool_mask, its completion mask (1 over every turn), whole conversations.
      ...(s.tools ? { tool_mask: s.tools.tool_mask, completion_mask: s.completion_ids.map((ids) => ids.map(() => 1)), tools: src.tools!.schemas } : {}),
      messages: s.tools ? s.tools.messages : r.messages,
      prompt_texts: s.completion_ids.map((_, i) => r.prompt_texts[Math.floor(i / G)]),
      completion_texts: s.completion_texts,
      // So an exported batch replays the same update.
      config: batchConfigOf(config, policy.config.model_type),
    });
  }
  const padded = padBatch(batch, { position_ids: config.position_ids });
  // The studio's own rollout knows its tokenizer's EOS, which may stop fewer rows than the sampling's EOS ids.
  if (src.kind === 'prompts' && src.tokenizer.eos_token_id !== undefined) padded.tokenizer_eos_token_id = src.tokenizer.eos_token_id;
  checkScorable(batch, padded, policy.config.vocab_size, 'policy');
  if (adv.length !== padded.B) throw new BatchFormatError(`advantages has ${adv.length} values for ${padded.B} samples`);
  const gpu = ctx.gpu;
  const device = {
    advantages: ctx.own(gpu.upload('advantages', Float32Array.from(adv))), // (B)
    old_per_token_logps: padded.old_per_token_logps ? ctx.own(gpu.upload('old_per_token_logps', padded.old_per_token_logps)) : null, // (B, C)
    // Tool-output tokens are attended to (attention_mask keeps completion_mask) but not trained on.
    loss_mask: padded.tool_mask ? ctx.own(gpu.upload('loss_mask', lossMaskOf(padded))) : null, // (B, C)
  };
  return { data: { batch, padded }, device };
}

/** Where per-token advantages first differ inside one sequence's loss mask, in words (the readers keep a constant row as `advantages`). */
function varyingAdvantage(perToken: number[][], mask: number[][]): string {
  for (let b = 0; b < perToken.length; b++) {
    const m = mask[b] ?? [];
    let first = -1;
    for (let t = 0; t < perToken[b].length; t++) {
      if (m[t] !== 1) continue;
      if (first < 0) first = t;
      else if (perToken[b][t] !== perToken[b][first]) return `sample ${b} has ${perToken[b][first]} at position ${first} and ${perToken[b][t]} at position ${t}`;
    }
  }
  return 'they vary inside a sequence';
}
