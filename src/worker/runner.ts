// The studio worker's StepRunner (src/worker/protocol.ts) over the step pipeline: loads a model and its
// tokenizer from the page's ModelChoice (the embedded default, a Hub id or a dropped folder), turns the
// page's settings into a StepConfig and the start of the update (the prompt set, or an imported batch),
// runs the pipeline stage by stage and hands each stage's data through unchanged, adding what the page
// needs besides: decoded token texts and the Doctor's report on the assembled batch. A run starts at
// `render` with the settings of that moment; reset() undoes the optimizer step, so every run starts
// from the weights as loaded (and the frozen-copy reference stays the loaded policy).
import type { Gpu } from '../gpu/context.ts';
import { diagnose } from '../doctor/index.ts';
import { countParams, ModelLoadError } from '../model/config.ts';
import { kvDecoder } from '../model/generate.ts';
import { HubSource } from '../model/hub.ts';
import type { LoadProgress as ModelLoadProgress } from '../model/loader.ts';
import { planMemory } from '../model/memory.ts';
import { CausalLM } from '../model/model.ts';
import { FileSource, parseJSONFile, readStream, type ModelSource } from '../model/source.ts';
import type { Tokenizer } from '../tokenize/tokenizer.ts';
import type { CreateStepRunner, LoadProgress, ModelChoice, ModelInfo, StagePayloads, StageId, StageResult, StepRunner, StepSettings, StepStart } from './protocol.ts';
import { runJsReward } from './reward_sandbox.ts';
import { batchConfigOf } from './settings.ts';
import type { JsRewardRunner } from '../grpo/rewards.ts';
import { DEFAULT_GRPO_CONFIG, DEFAULT_PROMPTS } from '../grpo/default_task.ts';
import { StepPipeline } from '../grpo/step.ts';
import { stepConfigFromBatch } from '../grpo/step_config.ts';
import type { StageData, StepSource } from '../grpo/step_types.ts';

/** A model folder served over plain HTTP (the embedded default under public/models/, at the URL the page resolved). */
class UrlSource implements ModelSource {
  constructor(
    readonly name: string,
    private readonly base: string,
  ) {}

  /**
   * The file, or null where it is missing. Static hosts with a single-page-app fallback (the Vite dev
   * server, many CDNs) answer a missing path with index.html and 200: no model file is ever HTML.
   */
  private async get(file: string, method: 'GET' | 'HEAD' = 'GET'): Promise<Response | null> {
    const res = await fetch(new URL(file, this.base), { method });
    return res.ok && !(res.headers.get('content-type') ?? '').startsWith('text/html') ? res : null;
  }

  private async need(file: string): Promise<Response> {
    const res = await this.get(file);
    if (!res?.body) throw new ModelLoadError(`${this.name}: no ${file} at ${new URL(file, this.base).href}`);
    return res;
  }

  async exists(file: string): Promise<boolean> {
    return (await this.get(file, 'HEAD')) !== null;
  }

  async readJSON(file: string): Promise<unknown> {
    return parseJSONFile(this, file, await (await this.need(file)).text());
  }

  async readBytes(file: string, onProgress?: (loaded: number, total: number) => void): Promise<Uint8Array> {
    const res = await this.need(file);
    return readStream(res.body!, Number(res.headers.get('content-length') ?? 0), onProgress);
  }
}

function sourceOf(choice: ModelChoice): ModelSource {
  switch (choice.kind) {
    case 'embedded':
      return new UrlSource(choice.name, choice.url);
    case 'hub':
      return new HubSource(choice.id, { revision: choice.revision });
    case 'local':
      return FileSource.fromFiles(choice.files, choice.name);
  }
}

/**
 * tokenizer.json + tokenizer_config.json from the model's source (a chat_template.jinja beside them when
 * the config has none), and what to call it: the config's tokenizer_class and the tokenizer.json model type.
 */
async function loadTokenizer(source: ModelSource): Promise<{ tokenizer: Tokenizer; kind: string }> {
  const { Tokenizer } = await import('../tokenize/tokenizer.ts');
  const json = (await source.readJSON('tokenizer.json')) as { model?: { type?: string } };
  const config = (await source.readJSON('tokenizer_config.json')) as Record<string, unknown>;
  if (!config.chat_template && (await source.exists('chat_template.jinja'))) config.chat_template = new TextDecoder().decode(await source.readBytes('chat_template.jinja'));
  const kind = [config.tokenizer_class, json.model?.type].filter((x) => typeof x === 'string').join(', ') || 'tokenizer';
  return { tokenizer: await Tokenizer.fromJSON(json, config), kind };
}

/** A stage's data with the page's extras (src/worker/protocol.ts StageExtras): token texts and the Doctor's report. */
function withExtras(id: StageId, data: StageData[StageId] | null, tok: Tokenizer, pipe: StepPipeline, model_type: string): StagePayloads[StageId] | null {
  if (id !== 'assemble' || !data) return data as StagePayloads[StageId] | null;
  const a = data as StageData['assemble'];
  const texts = (rows: number[][]) => rows.map((row) => row.map((t) => tok.decode([t])));
  // With the tokenizer the Doctor also checks retokenization and the chat template; model_type and the
  // position-ids policy are the ones this step scores with.
  const report = diagnose(a.batch, { tokenizer: tok, model_type, position_ids: pipe.config.position_ids });
  return { ...a, token_texts: { prompt: texts(a.batch.prompt_ids), completion: texts(a.batch.completion_ids) }, report };
}

class PipelineRunner implements StepRunner {
  private policy: CausalLM | null = null;
  private tokenizer: Tokenizer | null = null;
  private pipe: StepPipeline | null = null;

  constructor(
    private readonly gpu: Gpu,
    private readonly runJs: JsRewardRunner,
  ) {}

  async load(choice: ModelChoice, onProgress: (p: LoadProgress) => void): Promise<ModelInfo> {
    await this.reset();
    this.policy?.destroy();
    this.policy = null;
    const source = sourceOf(choice);
    onProgress({ label: 'tokenizer', loaded: 0, total: 0 });
    const { tokenizer, kind } = await loadTokenizer(source);
    const policy = await CausalLM.from_pretrained(source, this.gpu, {
      onProgress: (p: ModelLoadProgress) => onProgress({ label: `policy weights${p.file ? `: ${p.file}` : ''} (${p.phase})`, loaded: p.loaded, total: p.total }),
    });
    this.policy = policy;
    this.tokenizer = tokenizer;
    const cfg = policy.config;
    // The memory plan at the default task's shape: its prompts rendered with this tokenizer, G completions each.
    const P = Math.max(...DEFAULT_PROMPTS.map((p) => tokenizer.renderChat(p.messages).ids.length));
    const C = DEFAULT_GRPO_CONFIG.max_completion_length ?? 8;
    const eos = tokenizer.eos_token_id;
    return {
      name: source.name,
      model_type: cfg.model_type,
      architectures: [cfg.architecture],
      num_parameters: countParams(cfg),
      dtype: policy.info?.dtypes.join(', ') ?? 'F32',
      vocab_size: cfg.vocab_size,
      tokenizer: { kind, bos_token_id: tokenizer.bos_token_id ?? null, eos_token_ids: eos === undefined ? [] : [eos], pad_token_id: tokenizer.pad_token_id ?? null, special_token_ids: [...tokenizer.special_token_ids] },
      chat_template: (tokenizer.hf.chat_template as string | null | undefined) ?? null,
      memory_plan: planMemory(cfg, { B: DEFAULT_PROMPTS.length * DEFAULT_GRPO_CONFIG.num_generations, T: P + C, logits_to_keep: C, limits: this.gpu.limits, name: source.name }),
    };
  }

  async runStage(stage: StageId, settings: StepSettings, start: StepStart = { kind: 'prompts' }): Promise<StageResult> {
    const policy = this.policy;
    const tokenizer = this.tokenizer;
    if (!policy || !tokenizer) throw new Error('load a model first');
    if (stage === 'render' || !this.pipe) {
      await this.reset();
      const s = settings.sampling;
      const source: StepSource =
        start.kind === 'batch'
          ? { kind: 'batch', batch: start.batch }
          : {
              kind: 'prompts',
              prompts: settings.prompts.map((p) => ({ messages: [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: p.user }], answer: p.answer })),
              tokenizer,
              generation: { ...s, eos_token_ids: s.eos_token_ids ?? undefined },
              decoder: () => kvDecoder(policy),
              rewards: settings.rewards,
              runJs: this.runJs,
            };
      this.pipe = new StepPipeline(this.gpu, {
        policy,
        reference: null,
        config: stepConfigFromBatch(batchConfigOf(settings.loss), settings.loss.max_completion_length),
        source,
        undo: true,
      });
    }
    const pipe = this.pipe;
    if (pipe.nextStage !== stage) throw new Error(`stage "${stage}" cannot run now: the next stage is ${pipe.nextStage ? `"${pipe.nextStage}"` : 'none (reset first)'}`);
    const r = await pipe.next();
    return { ...r, data: withExtras(r.id, r.data, tokenizer, pipe, policy.config.model_type) };
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

/** `runJsReward` defaults to the sandbox worker (the browser); Node callers without JS rewards need none. */
export const createStepRunner = (gpu: Gpu, deps: Partial<Parameters<CreateStepRunner>[1]> = {}): StepRunner => new PipelineRunner(gpu, deps.runJsReward ?? ((spec, samples) => runJsReward(spec, samples)));
