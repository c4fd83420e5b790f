// The studio worker's StepRunner (src/worker/protocol.ts) over the step pipeline: loads a model and its
// tokenizer from the page's ModelChoice (the embedded default, a Hub id or a dropped folder), turns the
// page's settings into a StepConfig and a prompt source, runs the pipeline stage by stage and converts
// each stage's data into the protocol's payloads (per-token arrays as (B, C) Float32Arrays). A run
// starts at `render` with the settings of that moment; reset() undoes the optimizer step, so every run
// starts from the weights as loaded (and the frozen-copy reference stays the loaded policy).
import type { Gpu } from '../gpu/context.ts';
import type { BatchConfig } from '../io/batch.ts';
import { countParams, ModelLoadError } from '../model/config.ts';
import { kvDecoder } from '../model/generate.ts';
import { HubSource } from '../model/hub.ts';
import type { LoadProgress as ModelLoadProgress } from '../model/loader.ts';
import { planMemory } from '../model/memory.ts';
import { CausalLM } from '../model/model.ts';
import { FileSource, parseJSONFile, readStream, type ModelSource } from '../model/source.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import { runJsReward } from '../worker/reward_sandbox.ts';
import type { LoadProgress, LossSettings, ModelChoice, ModelInfo, PerTokenArray, StageId, StagePayloads, StageResult, StepRunner, StepSettings } from '../worker/protocol.ts';
import { DEFAULT_GRPO_CONFIG, DEFAULT_PROMPTS } from './default_task.ts';
import { StepPipeline, stepConfigFromBatch, type StageData, type StageResult as PipelineResult } from './step.ts';

/** The site root (where public/ is served): the worker script sits under assets/ in a build and under src/ in dev. */
function siteRoot(): string {
  const here = (globalThis as { location?: { href: string } }).location?.href ?? 'http://localhost/';
  const m = /^(.*?\/)(assets|src)\//.exec(here);
  return m ? m[1] : new URL('./', here).href;
}

/** A model folder served over plain HTTP (the embedded default under public/models/). */
class UrlSource implements ModelSource {
  constructor(
    readonly name: string,
    private readonly base: string,
  ) {}

  private async get(file: string, method: 'GET' | 'HEAD' = 'GET'): Promise<Response> {
    return fetch(new URL(file, this.base), { method });
  }

  async exists(file: string): Promise<boolean> {
    return (await this.get(file, 'HEAD')).ok;
  }

  async readJSON(file: string): Promise<unknown> {
    const res = await this.get(file);
    if (!res.ok) throw new ModelLoadError(`${this.name}: no ${file} (HTTP ${res.status})`);
    return parseJSONFile(this, file, await res.text());
  }

  async readBytes(file: string, onProgress?: (loaded: number, total: number) => void): Promise<Uint8Array> {
    const res = await this.get(file);
    if (!res.ok || !res.body) throw new ModelLoadError(`${this.name}: no ${file} (HTTP ${res.status})`);
    return readStream(res.body, Number(res.headers.get('content-length') ?? 0), onProgress);
  }
}

function sourceOf(choice: ModelChoice): ModelSource {
  switch (choice.kind) {
    case 'embedded':
      return new UrlSource(choice.name, new URL(`models/${choice.name}/`, siteRoot()).href);
    case 'hub':
      return new HubSource(choice.id, { revision: choice.revision });
    case 'local':
      return FileSource.fromFiles(choice.files, choice.name);
  }
}

/** tokenizer.json + tokenizer_config.json from the model's source (a chat_template.jinja beside them when the config has none). */
async function loadTokenizer(source: ModelSource): Promise<Tokenizer> {
  const { Tokenizer } = await import('../tokenize/tokenizer.ts');
  const json = (await source.readJSON('tokenizer.json')) as object;
  const config = (await source.readJSON('tokenizer_config.json')) as Record<string, unknown>;
  if (!config.chat_template && (await source.exists('chat_template.jinja'))) config.chat_template = new TextDecoder().decode(await source.readBytes('chat_template.jinja'));
  return Tokenizer.fromJSON(json, config);
}

/** The page's loss settings in a batch file's terms, so one parser (stepConfigFromBatch) validates both. */
function batchConfigOf(l: LossSettings): BatchConfig {
  return {
    loss_type: l.loss_type, beta: l.beta, epsilon: l.epsilon_low, epsilon_high: l.epsilon_high, delta: l.delta, temperature: l.temperature,
    kl_estimator: l.kl_estimator, importance_sampling_level: l.importance_sampling_level, max_completion_length: l.max_completion_length,
    optimizer: { name: l.optimizer, lr: l.lr, betas: l.betas, weight_decay: l.weight_decay }, max_grad_norm: l.max_grad_norm,
    position_ids: l.position_ids, scale_rewards: l.scale_rewards, advantage_estimator: l.advantage_estimator,
  };
}

const grid = (data: Float32Array, B: number, C: number): PerTokenArray => ({ B, C, data });

/** Ragged rows → a (B, C) grid, 0 past each row. */
function gridOf(rows: number[][], C: number): PerTokenArray {
  const data = new Float32Array(rows.length * C);
  rows.forEach((r, b) => data.set(r, b * C));
  return grid(data, rows.length, C);
}

/** A pipeline stage's data as the protocol's payload. */
function payloadOf(pipe: StepPipeline, r: PipelineResult, tok: Tokenizer): StagePayloads[StageId] | Record<string, never> {
  if (r.skipped || !r.data) return {};
  const d = <S extends StageId>(id: S) => pipe.data(id) as StageData[S];
  const shape = () => d('assemble').padded;
  switch (r.id) {
    case 'render':
      return d('render');
    case 'advantages':
      return { advantages: d('advantages').advantages, groups: d('advantages').groups ?? [] };
    case 'sample': {
      const s = d('sample');
      const C = Math.max(1, ...s.completion_ids.map((x) => x.length));
      return { completion_ids: s.completion_ids, completion_texts: s.completion_texts, sampling_per_token_logps: gridOf(s.sampling_per_token_logps, C) };
    }
    case 'reward': {
      const t = d('reward');
      return { rewards_per_func: t.rewards_per_func, reward_names: t.names, reward_weights: t.weights, rewards: t.rewards, errors: t.errors };
    }
    case 'assemble': {
      const { batch, padded } = d('assemble');
      const texts = (rows: number[][]) => rows.map((row) => row.map((id) => tok.decode([id])));
      return { batch, P: padded.P, C: padded.C, position_ids: padded.position_ids, token_texts: { prompt: texts(batch.prompt_ids), completion: texts(batch.completion_ids) } };
    }
    case 'policy_forward': {
      const { B, C } = shape();
      return { per_token_logps: grid(d('policy_forward').per_token_logps, B, C), entropy: grid(d('policy_forward').per_token_entropy, B, C) };
    }
    case 'reference_forward': {
      const { B, C } = shape();
      return { ref_per_token_logps: grid(d('reference_forward').ref_per_token_logps!, B, C) };
    }
    case 'loss': {
      const { B, C } = shape();
      const l = d('loss');
      return {
        old_per_token_logps: grid(l.old_per_token_logps, B, C),
        importance_ratio: grid(l.importance_ratio, B, C),
        per_token_kl: grid(l.per_token_kl ?? new Float32Array(B * C), B, C),
        per_token_loss: grid(l.per_token_loss, B, C),
        token_weight: grid(l.token_weight, B, C),
        clip_flags: Uint8Array.from(l.clip),
        losses: l.losses,
        loss: l.loss,
        policy_term: l.policy_term,
        kl_term: l.kl_term,
        mean_kl: l.mean_kl,
        clip_counts: { low: l.clip_counts.low, high: l.clip_counts.high, delta: l.clip_counts.delta_binding, tokens: l.clip_counts.tokens },
      };
    }
    case 'backward':
      return { grad_norm: d('backward').grad_norm, grad_norms: Object.entries(d('backward').group_grad_norms).map(([group, norm]) => ({ group, norm })) };
    case 'step': {
      const s = d('step');
      return { clip_coef: s.clip_coef, lr: s.optimizer.lr, update_norms: Object.entries(s.group_update_norms).map(([group, norm]) => ({ group, norm })) };
    }
    case 're_evaluate': {
      const { B, C } = shape();
      return { post_per_token_logps: grid(d('re_evaluate').post_per_token_logps, B, C), loss_after: d('re_evaluate').loss_after };
    }
  }
}

class PipelineRunner implements StepRunner {
  private policy: CausalLM | null = null;
  private tokenizer: Tokenizer | null = null;
  private pipe: StepPipeline | null = null;

  constructor(private readonly gpu: Gpu) {}

  async load(choice: ModelChoice, onProgress: (p: LoadProgress) => void): Promise<ModelInfo> {
    await this.reset();
    this.policy?.destroy();
    this.policy = null;
    const source = sourceOf(choice);
    onProgress({ label: 'tokenizer', loaded: 0, total: 0 });
    const tokenizer = await loadTokenizer(source);
    const policy = await CausalLM.from_pretrained(source, this.gpu, {
      onProgress: (p: ModelLoadProgress) => onProgress({ label: `policy weights${p.file ? `: ${p.file}` : ''} (${p.phase})`, loaded: p.loaded, total: p.total }),
    });
    this.policy = policy;
    this.tokenizer = tokenizer;
    const cfg = policy.config;
    // The memory plan at the default task's shape: its prompts rendered with this tokenizer, G completions each.
    const P = Math.max(...DEFAULT_PROMPTS.map((p) => tokenizer.renderChat(p.messages).ids.length));
    const C = DEFAULT_GRPO_CONFIG.max_completion_length ?? 8;
    const special: number[] = [];
    for (let id = 0; id < tokenizer.vocab_size; id++) if (tokenizer.isSpecial(id)) special.push(id);
    const eos = tokenizer.eos_token_id;
    return {
      name: source.name,
      model_type: cfg.model_type,
      architectures: [cfg.architecture],
      num_parameters: countParams(cfg),
      dtype: policy.info?.dtypes.join(', ') ?? 'F32',
      vocab_size: cfg.vocab_size,
      tokenizer: { kind: tokenizer.hf.constructor.name, bos_token_id: tokenizer.bos_token_id ?? null, eos_token_ids: eos === undefined ? [] : [eos], pad_token_id: tokenizer.pad_token_id ?? null, special_token_ids: special },
      chat_template: (tokenizer.hf.chat_template as string | null | undefined) ?? null,
      memory_plan: planMemory(cfg, { B: DEFAULT_PROMPTS.length * DEFAULT_GRPO_CONFIG.num_generations, T: P + C, logits_to_keep: C, limits: this.gpu.limits, name: source.name }),
    };
  }

  async runStage(stage: StageId, settings: StepSettings): Promise<StageResult> {
    const policy = this.policy;
    const tokenizer = this.tokenizer;
    if (!policy || !tokenizer) throw new Error('load a model first');
    if (stage === 'render' || !this.pipe) {
      await this.reset();
      const s = settings.sampling;
      this.pipe = new StepPipeline(this.gpu, {
        policy,
        reference: null,
        config: stepConfigFromBatch(batchConfigOf(settings.loss), settings.loss.max_completion_length),
        source: {
          kind: 'prompts',
          prompts: settings.prompts.map((p) => ({ messages: [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: p.user }], answer: p.answer })),
          tokenizer,
          generation: { ...s, eos_token_ids: s.eos_token_ids ?? undefined },
          decoder: () => kvDecoder(policy),
          rewards: settings.rewards,
          runJs: (spec, samples) => runJsReward(spec, samples),
        },
        undo: true,
      });
    }
    const pipe = this.pipe;
    if (pipe.nextStage !== stage) throw new Error(`stage "${stage}" cannot run now: the next stage is ${pipe.nextStage ? `"${pipe.nextStage}"` : 'none (reset first)'}`);
    const r = await pipe.next();
    return { stage, ms: r.ms, memory: { bytes: r.gpuBytes, peak_bytes: r.peakBytes }, skipped: r.skipped, payload: payloadOf(pipe, r, tokenizer) as StagePayloads[StageId] };
  }

  /** Undoes the step (if taken) and drops the run. */
  async reset(): Promise<void> {
    await this.pipe?.reset();
    this.pipe?.destroy();
    this.pipe = null;
  }

  dispose(): void {
    this.pipe?.destroy();
    this.pipe = null;
    this.policy?.destroy();
    this.policy = null;
  }
}

export function createStepRunner(gpu: Gpu): StepRunner {
  return new PipelineRunner(gpu);
}
