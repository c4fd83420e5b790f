// Issue 25, item 3: the live tool-call rollout in the studio worker's StepRunner on the embedded tool model
// (public/models/tiny-tool) with the tool task's settings (src/grpo/tasks.ts), its JS tools and rewards run
// in-process. The concat loop (TRL since #5242): every stage runs; a row that called the tool holds, after its
// call's end-of-turn token, exactly the tool block the chat template writes for the product of the call's own
// arguments (computed here from the decoded call), with tool_mask 0 there and 1 elsewhere; its conversation is
// [user, assistant calling multiply, tool, assistant]; the loss is finite; the Doctor finds no tool tokens in
// the loss. The rerender loop (TRL before #5242): on a seed where the model padded a call, the call comes back
// canonical and shorter by more than the tool block, so TRL's mask overruns the completion — the sample stage
// refuses it in one line naming huggingface/trl#5145 (the seed report's crash); on a seed with compact calls
// only, each comes back longer, is recorded, and the mask's 0s reach its last tokens: tool-call-masked names
// exactly those rows.
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createStepRunner } from '../../src/worker/runner.ts';
import { STAGES, type StagePayloads, type StepRunner, type StepSettings } from '../../src/bridge/protocol.ts';
import { compileUserReward, scoreColumn } from '../../src/grpo/rewards.ts';
import { compileTools } from '../../src/worker/reward_sandbox.ts';
import { taskSettings } from '../../src/store/settings.ts';
import { noEdits, pageSettings } from '../../src/bridge/settings.ts';
import { loadTokenizerDir } from '../../src/tokenize/node.ts';
import type { Tokenizer } from '../../src/tokenize/tokenizer.ts';
import { testGpu } from '../helpers/gpu.ts';

const DIR = resolve(__dirname, '../../public/models/tiny-tool');

function files(): File[] {
  return readdirSync(DIR).map((f) => {
    const file = new File([readFileSync(join(DIR, f))], f);
    Object.defineProperty(file, 'webkitRelativePath', { value: `tiny-tool/${f}` });
    return file;
  });
}

let runner: StepRunner;
let tok: Tokenizer;
beforeAll(async () => {
  runner = createStepRunner(await testGpu(), {
    runJsReward: async (spec, samples) => scoreColumn(compileUserReward(spec.name, spec.source), samples),
    runJsTools: async (source, calls) => {
      const tools = compileTools(source) as Record<string, (args: Record<string, unknown>) => unknown>;
      return calls.map((c) => String(tools[c.name](c.arguments)));
    },
  });
  await runner.load({ kind: 'local', name: 'tiny-tool', files: files() }, () => {});
  tok = await loadTokenizerDir(DIR);
}, 120_000);

function settings(way: 'concat' | 'rerender', seed: number, prompts = 2, G = 4): StepSettings {
  const t = taskSettings('multiply-tool');
  const sampling = { ...t.sampling, num_generations: G, seed };
  return { prompts: t.prompts.slice(0, prompts), sampling, rewards: t.rewards, tools: { ...t.tools!, way }, settings: pageSettings('trl', { kind: 'prompts', task: 'multiply-tool', sampling }, noEdits()) };
}

async function runAll(s: StepSettings, until: number = STAGES.length): Promise<Partial<StagePayloads>> {
  const out: Partial<StagePayloads> = {};
  for (const stage of STAGES.slice(0, until)) (out as Record<string, unknown>)[stage] = (await runner.runStage(stage, s)).data;
  return out;
}

const EOT = '<|im_end|>';
/** The call's arguments as the model wrote them (any JSON spelling), from the decoded first turn. */
function writtenCall(text: string): { a: number; b: number } | null {
  const m = /<tool_call>([\s\S]*?)<\/tool_call>/.exec(text);
  try {
    const j = m && (JSON.parse(m[1]) as { name: string; arguments: { a: number; b: number } });
    return j && j.name === 'multiply' ? j.arguments : null;
  } catch {
    return null;
  }
}

describe('the live tool-call rollout (tiny-tool)', () => {
  it('concat: tool blocks as the template writes them for the call\'s own product, masked out; every stage runs', async () => {
    const out = await runAll(settings('concat', 42));
    const batch = out.assemble!.batch;
    const called = batch.completion_ids.map((ids, b) => ({ b, ids, call: writtenCall(tok.decode(ids.slice(0, ids.indexOf(tok.eos_token_id!) + 1))) })).filter((r) => r.call);
    expect(called.length).toBeGreaterThan(0);
    for (const { b, ids, call } of called) {
      const mask = batch.tool_mask![b];
      expect(mask).toHaveLength(ids.length);
      const end = ids.indexOf(tok.eos_token_id!) + 1;
      const block = `\n<|im_start|>user\n<tool_response>\n${call!.a * call!.b}\n</tool_response>${EOT}\n<|im_start|>assistant\n`;
      const zeros = mask.flatMap((m, t) => (m === 0 ? [t] : []));
      expect(tok.decode(zeros.map((t) => ids[t]))).toBe(block);
      expect(zeros[0]).toBe(end);
      expect(zeros.every((t, i) => t === end + i)).toBe(true);
      expect(batch.completion_mask[b].every((m) => m === 1)).toBe(true);
      expect(batch.messages![b].map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant'].slice(0, batch.messages![b].length));
      expect(batch.messages![b][1].tool_calls).toEqual([{ type: 'function', function: { name: 'multiply', arguments: call } }]);
      expect(batch.messages![b][2]).toEqual({ role: 'tool', name: 'multiply', content: String(call!.a * call!.b) });
    }
    expect(batch.tools).toEqual(taskSettings('multiply-tool').tools!.schemas);
    expect(Number.isFinite(out.loss!.loss)).toBe(true);
    expect(out.assemble!.report.findings.filter((f) => f.rule === 'tool-tokens-in-loss')).toEqual([]);
    expect(out.sample!.tools!.tool_calls.reduce((a, x) => a + x, 0)).toBeGreaterThanOrEqual(called.length);
  }, 600_000);

  /** The first seed (of 40) whose sampled first turns hold a call spelled as `want` says, and those rows. */
  async function seedWith(want: (spellings: string[]) => boolean): Promise<{ seed: number; rows: number[]; spellings: string[] }> {
    for (let seed = 1; seed <= 40; seed++) {
      const s = await runAll(settings('concat', seed), 2);
      const spellings = s.sample!.completion_ids.map((ids) => {
        const first = tok.decode(ids.slice(0, ids.indexOf(tok.eos_token_id!) + 1));
        if (!writtenCall(first)) return 'none';
        if (/<tool_call>\n\{"name": "multiply", "arguments": \{"a": \d+, "b": \d+\}\}\n<\/tool_call>/.test(first)) return 'canonical';
        return /<tool_call>\n\{"name":"multiply","arguments":\{"a":\d+,"b":\d+\}\}\n<\/tool_call>/.test(first) ? 'compact' : 'padded';
      });
      if (want(spellings)) return { seed, rows: spellings.flatMap((x, b) => (x === 'compact' || x === 'padded' ? [b] : [])), spellings };
    }
    throw new Error('no seed in 1..40 sampled the spellings asked for: tiny-tool was trained on 15% compact and 15% padded calls');
  }

  it('rerender, a padded call: re-rendered shorter by more than the tool block, tool_mask overruns the completion and the step is refused (trl#5145)', async () => {
    const { seed } = await seedWith((sp) => sp.includes('padded'));
    await expect(runAll(settings('rerender', seed))).rejects.toThrow(/^tool_mask: sample \d+ has \d+ entries for \d+ completion tokens after tool round 1 \(its tool call, sampled in \d+ tokens, was re-rendered in \d+\).*huggingface\/trl#5145/);
  }, 900_000);

  it('rerender, compact calls only: each comes back longer, recorded, and its last tokens masked (tool-call-masked names the row)', async () => {
    const { seed, rows } = await seedWith((sp) => sp.includes('compact') && !sp.includes('padded'));
    const out = await runAll(settings('rerender', seed));
    const re = out.sample!.tools!.retokenized;
    for (const b of rows) {
      expect(re[b]).toHaveLength(1);
      expect(re[b][0].rendered_tokens).toBeGreaterThan(re[b][0].sampled_tokens);
    }
    const masked = new Set(out.assemble!.report.findings.filter((f) => f.rule === 'tool-call-masked').map((f) => f.sample));
    expect([...masked].sort()).toEqual([...rows].sort());
    expect(Number.isFinite(out.loss!.loss)).toBe(true);
  }, 900_000);
});
