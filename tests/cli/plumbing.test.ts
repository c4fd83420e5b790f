// Plumbing failures (issue 21, "Plumbing"): each is exit 2 with one line naming the file or path, in bounded time
// and memory, with no stack trace — run in process through main() as the binary runs it (tests/helpers/cli_refusal.ts),
// on small bad inputs built in a temporary folder. The real binary's stderr is checked too (Dawn's notices dropped by bin/grpo-studio.mjs).
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { inputLimits } from '../../src/cli/args.ts';
import { main } from '../../src/cli/main.ts';
import { parseSafeTensors, toF32, writeSafeTensors } from '../../src/io/safetensors.ts';
import { loadCheckpoint } from '../../src/model/loader.ts';
import { FolderSource } from '../../src/model/source_node.ts';
import { expectRefusal } from '../helpers/cli_refusal.ts';
import { GOLDEN } from '../helpers/golden.ts';

const ROOT = resolve(__dirname, '..', '..');
const LLAMA = join(GOLDEN, 'tiny-llama'); // vocab 101
const QWEN2 = join(GOLDEN, 'tiny-qwen2'); // vocab 83
const BATCH = join(LLAMA, 'batch.json');
const tmp = () => mkdtempSync(join(tmpdir(), 'plumbing-'));
/** Printable on one line: no control characters (a binary header's bytes) in the reason. */
const PRINTABLE = /^[^\p{C}]*$/u;

/** main() with stdout / stderr silenced; its exit code. */
async function quiet(argv: string[]): Promise<number> {
  const log = vi.spyOn(console, 'log').mockImplementation(() => {});
  const err = vi.spyOn(console, 'error').mockImplementation(() => {});
  const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  try {
    return await main(argv);
  } finally {
    log.mockRestore();
    err.mockRestore();
    out.mockRestore();
  }
}

/** A copy of a golden model folder, to damage. */
function modelCopy(from: string): string {
  const dir = join(tmp(), 'model');
  mkdirSync(dir);
  for (const f of ['config.json', 'model.safetensors']) copyFileSync(join(from, f), join(dir, f));
  return dir;
}

describe('grpo-studio plumbing (issue 21)', () => {
  afterEach(() => vi.restoreAllMocks());

  it('1. --out into a missing folder or onto a folder is exit 2 naming it, before any work', async () => {
    const dir = tmp();
    const missing = join(dir, 'no-such-dir', 'out.json');
    await expectRefusal(['convert', BATCH, '--out', missing], /^grpo-studio convert: --out .*no-such-dir\/out\.json: its folder .*no-such-dir does not exist/);
    await expectRefusal(['report', BATCH, '--out', dir], new RegExp(`^grpo-studio report: --out ${dir}: is a directory`));
    // score / step check it before the GPU is opened or a weight read.
    await expectRefusal(['step', '--model', LLAMA, '--batch', BATCH, '--out', missing], /^grpo-studio step: --out .*no-such-dir\/out\.json: its folder/);
    await expectRefusal(['score', '--model', LLAMA, '--batch', BATCH, '--out', dir], /^grpo-studio score: --out .*: is a directory/);
  });

  it('1b. a switch given a value (--json=maybe) is exit 2 naming the flag, not silently taken as set', async () => {
    await expectRefusal(['doctor', join(ROOT, 'tests/fixtures/batches/clean.json'), '--json=maybe'], /--json takes no value/);
  });

  it('2. --save-adapter under /proc is refused before the step, naming the path (no hang)', async () => {
    await expectRefusal(['step', '--model', LLAMA, '--batch', BATCH, '--create-adapter', 'r=2,seed=0', '--save-adapter', '/proc/self/nonexistent-dir'], /^grpo-studio step: --save-adapter \/proc\/self\/nonexistent-dir: /);
    await expectRefusal(['step', '--model', LLAMA, '--batch', BATCH, '--create-adapter', 'r=2', '--save-adapter', BATCH], /^grpo-studio step: --save-adapter .*batch\.json: .*batch\.json is not a folder/);
  });

  it('3. doctor /dev/zero reads at most the cap for a device and is refused past it', async () => {
    const cap = inputLimits.nonRegularBytes;
    inputLimits.nonRegularBytes = 1 << 20; // 1 MiB here; 2 GiB - 1 in use
    try {
      await expectRefusal(['doctor', '/dev/zero'], /^grpo-studio doctor: cannot read \/dev\/zero: not a regular file, and longer than 1048576 bytes/);
    } finally {
      inputLimits.nonRegularBytes = cap;
    }
    await expectRefusal(['doctor', tmp()], /^grpo-studio doctor: cannot read .*: it is a directory$/);
  });

  it('4. a prime-rl JSONL whose first line is blank is read (blank lines skipped)', async () => {
    const dir = tmp();
    const file = join(dir, 'rank_0.jsonl');
    const rec = (ids: number[], mask: number[]) => JSON.stringify({ schema_version: 1, step: 0, rank: 0, token_ids: ids, loss_mask: mask });
    writeFileSync(file, `\n${rec([1, 2, 3, 4], [0, 0, 1, 1])}\n\n${rec([1, 2, 5], [0, 1, 1])}\n`);
    const out = join(dir, 'batch.json');
    expect(await quiet(['convert', file, '--out', out])).toBe(0);
    const batch = JSON.parse(readFileSync(out, 'utf8'));
    expect(batch.completion_ids).toEqual([[3, 4], [2, 5]]);
  });

  it('5. a safetensors header length past the file, or truncated data, is said so in printable words', async () => {
    const dir = tmp();
    const bad = join(dir, 'bad_header.safetensors');
    const head = new Uint8Array(16);
    new DataView(head.buffer).setBigUint64(0, 1000n, true);
    head.set(new TextEncoder().encode('{"a":1}\u0001'), 8);
    writeFileSync(bad, head);
    await expectRefusal(['doctor', bad], /^grpo-studio doctor: .*bad_header\.safetensors: header length 1000 exceeds the file \(16 bytes\)$/);
    const whole = writeSafeTensors({ completion_ids: { dtype: 'I64', shape: [2, 3], data: new BigInt64Array([1n, 2n, 3n, 4n, 5n, 6n]) } });
    const cut = join(dir, 'truncated.safetensors');
    writeFileSync(cut, whole.subarray(0, whole.byteLength - 5));
    await expectRefusal(['doctor', cut], new RegExp(`truncated\\.safetensors: data truncated: tensor "completion_ids" needs bytes \\[\\d+, ${whole.byteLength}\\), file has ${whole.byteLength - 5}$`));
    // Binary junk inside a header that fits: the JSON error is escaped, never raw bytes on the terminal.
    const junk = new Uint8Array(24);
    new DataView(junk.buffer).setBigUint64(0, 16n, true);
    junk.set([0x7b, 0x01, 0x02, 0x1b, 0x5b, 0x32, 0x4a, 0x7d], 8);
    writeFileSync(join(dir, 'junk.safetensors'), junk);
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    expect(await main(['doctor', join(dir, 'junk.safetensors')])).toBe(2);
    expect(String(err.mock.calls[0][0])).toMatch(PRINTABLE);
    expect(String(err.mock.calls[0][0])).toMatch(/junk\.safetensors: header is not valid JSON/);
  });

  it('6. the reasons that named no file name it: an empty prompt side, a completion_mask row of the wrong length, a step with neither advantages nor rewards, a bad --model config', async () => {
    const dir = tmp();
    const b = JSON.parse(readFileSync(BATCH, 'utf8'));
    b.prompt_ids = b.prompt_ids.map(() => []);
    if (b.prompt_mask) b.prompt_mask = b.prompt_mask.map(() => []);
    const file = join(dir, 'no_prompt.json');
    writeFileSync(file, JSON.stringify(b));
    await expectRefusal(['score', '--model', LLAMA, '--batch', file], /^grpo-studio score: .*no_prompt\.json: the batch needs at least one prompt token and one completion token \(P = 0/);
    // One row with nothing before its trained completion (an empty prompt, or a prompt_mask of 0s): its first token's
    // log-prob would be the logits of a position that attends nothing, which no trainer computes. score and step (and
    // mismatch, through the same check) refuse it naming the file and sample; a row whose first token is not trained is scored.
    const one = JSON.parse(readFileSync(BATCH, 'utf8'));
    one.prompt_ids[1] = [];
    if (one.prompt_mask) one.prompt_mask[1] = [];
    const oneFile = join(dir, 'one_empty.json');
    writeFileSync(oneFile, JSON.stringify(one));
    for (const args of [['score', '--batch', oneFile], ['step', '--batch', oneFile]]) {
      const verb = args[0];
      await expectRefusal([...args, '--model', LLAMA], new RegExp(`^grpo-studio ${verb}: .*one_empty\\.json: prompt of sample 1: no attended token \\(prompt_ids is empty\\), and its completion's first token is trained`));
    }
    const masked = JSON.parse(readFileSync(BATCH, 'utf8'));
    masked.prompt_mask = masked.prompt_ids.map((r: number[], i: number) => r.map(() => (i === 1 ? 0 : 1)));
    writeFileSync(join(dir, 'masked.json'), JSON.stringify(masked));
    await expectRefusal(['score', '--model', LLAMA, '--batch', join(dir, 'masked.json')], /masked\.json: prompt of sample 1: no attended token \(prompt_mask is 0 throughout\)/);
    masked.completion_mask[1][0] = 0;
    writeFileSync(join(dir, 'untrained.json'), JSON.stringify(masked));
    expect(await main(['score', '--model', LLAMA, '--batch', join(dir, 'untrained.json'), '--out', join(dir, 'u.json')])).toBe(0);
    // A completion_mask row shorter than its ids (the Doctor's finding) stops score (before the model is read) and step
    // (at its assemble stage, as the page's pipeline) naming the file, field and sample.
    const short = JSON.parse(readFileSync(BATCH, 'utf8'));
    short.completion_mask[1] = short.completion_mask[1].slice(1);
    const shortFile = join(dir, 'short_mask.json');
    writeFileSync(shortFile, JSON.stringify(short));
    for (const verb of ['score', 'step']) {
      await expectRefusal([verb, '--model', LLAMA, '--batch', shortFile], new RegExp(`^grpo-studio ${verb}: .*short_mask\\.json: completion_mask sample 1 has length \\d+, completion_ids has \\d+$`));
    }
    // Neither advantages nor rewards: step says so at its advantages stage (as the page), naming the file.
    const bare = JSON.parse(readFileSync(BATCH, 'utf8'));
    delete bare.advantages;
    delete bare.rewards;
    delete bare.rewards_per_func;
    const bareFile = join(dir, 'no_advantages.json');
    writeFileSync(bareFile, JSON.stringify(bare));
    await expectRefusal(['step', '--model', LLAMA, '--batch', bareFile], /^grpo-studio step: .*no_advantages\.json: the batch has neither "advantages" nor "rewards": nothing to take a step on$/);
    const cfg = join(dir, 'config.json');
    writeFileSync(cfg, '[1]');
    await expectRefusal(['plan', '--model', cfg, '--batch', '2x16'], new RegExp(`^grpo-studio plan: ${cfg}: config\\.json: not a JSON object$`));
  });

  it('7. score --ref-model with another vocabulary is refused as step refuses it', async () => {
    const batch = join(QWEN2, 'batch.json');
    const msg = (verb: string) => new RegExp(`^grpo-studio ${verb}: --ref-model ${LLAMA}: the reference's vocabulary \\(101 tokens\\) differs from the policy's \\(83, --model ${QWEN2}\\)$`);
    await expectRefusal(['score', '--model', QWEN2, '--batch', batch, '--ref-model', LLAMA], msg('score'));
    await expectRefusal(['step', '--model', QWEN2, '--batch', batch, '--ref-model', LLAMA], msg('step'));
  });

  it('8. plan with 30,000 layers is planned (no stack overflow); an absurd layer count is one line', async () => {
    const dir = tmp();
    const cfg = JSON.parse(readFileSync(join(LLAMA, 'config.json'), 'utf8'));
    const deep = join(dir, 'deep.json');
    writeFileSync(deep, JSON.stringify({ ...cfg, num_hidden_layers: 30_000 }));
    expect(await quiet(['plan', '--model', deep, '--batch', '2x16'])).toBe(0);
    const absurd = join(dir, 'absurd.json');
    writeFileSync(absurd, JSON.stringify({ ...cfg, num_hidden_layers: 1e9 }));
    await expectRefusal(['plan', '--model', absurd, '--batch', '2x16'], /absurd\.json: config\.json: "num_hidden_layers" = 1000000000 exceeds the 65536 layers/);
  });

  it("9. once the GPU is opened, the binary's stderr is the one-line reason: Dawn's limit notices are dropped", async () => {
    const dir = tmp();
    const b = JSON.parse(readFileSync(BATCH, 'utf8'));
    b.completion_ids[0][0] = 100_000; // refused against the loaded model's vocabulary, after the GPU is open
    const file = join(dir, 'big_id.json');
    writeFileSync(file, JSON.stringify(b));
    // bin/grpo-studio.mjs runs the CLI in a child and drops exactly Dawn's two lavapipe notices from its stderr
    // (its C++ logger writes them to fd 2); a shell pipe and Node's own child stdio see the same.
    const sh = `{ "${process.execPath}" bin/grpo-studio.mjs score --model "${LLAMA}" --batch "${file}" 2>&1 >/dev/null; echo "exit $?"; } | cat`;
    const { stdout } = await promisify(execFile)('/bin/sh', ['-c', sh], { cwd: ROOT });
    const lines = stdout.trimEnd().split('\n');
    expect(lines, stdout).toHaveLength(2);
    expect(lines[1]).toBe('exit 2');
    expect(lines[0]).toMatch(/^grpo-studio score: .*big_id\.json .*completion_ids\[0\]\[0\] = 100000/);
    const direct = await promisify(execFile)(process.execPath, ['bin/grpo-studio.mjs', 'score', '--model', LLAMA, '--batch', file], { cwd: ROOT }).catch((e: { code: number; stderr: string }) => e);
    expect('code' in direct && direct.code).toBe(2);
    expect(direct.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('10. a checkpoint with a NaN weight is unusable input naming the tensor (not exit 3)', async () => {
    const dir = modelCopy(LLAMA);
    const path = join(dir, 'model.safetensors');
    const bytes = new Uint8Array(readFileSync(path));
    const st = parseSafeTensors(bytes);
    const info = st.tensors.get('model.layers.1.mlp.up_proj.weight')!;
    new DataView(st.data.buffer, st.data.byteOffset + info.data_offsets[0]).setFloat32(4 * 7, NaN, true);
    writeFileSync(path, bytes);
    await expectRefusal(['step', '--model', dir, '--batch', BATCH], /^grpo-studio step: .*model\/model\.safetensors: tensor "model\.layers\.1\.mlp\.up_proj\.weight" holds NaN at flat index 7: /);
  });

  it("11. a shard index is honoured: a tensor is read from the shard its weight_map names, not the first file's copy", async () => {
    const dir = modelCopy(LLAMA);
    const st = parseSafeTensors(new Uint8Array(readFileSync(join(dir, 'model.safetensors'))));
    const NAME = 'model.norm.weight';
    const right = Float32Array.from(toF32(st, NAME), (x) => x * 2 + 1);
    // Shard 1 holds every tensor (a stale copy of NAME too); shard 2 holds the copy the index names.
    copyFileSync(join(dir, 'model.safetensors'), join(dir, 'model-00001-of-00002.safetensors'));
    writeFileSync(join(dir, 'model-00002-of-00002.safetensors'), writeSafeTensors({ [NAME]: { dtype: 'F32', shape: [right.length], data: right } }));
    const weight_map = Object.fromEntries([...st.tensors.keys()].map((k) => [k, k === NAME ? 'model-00002-of-00002.safetensors' : 'model-00001-of-00002.safetensors']));
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map }));
    let got: Float32Array | undefined;
    const info = await loadCheckpoint(new FolderSource(dir), (spec, data) => {
      if (spec.name === NAME) got = Float32Array.from(data);
    });
    expect(got).toEqual(right);
    expect(info.unused).toEqual([NAME]); // the stale copy in shard 1, named, not read
  });
  it('12. a value flag followed by another option, an unknown or missing verb, a binary file: one printable line, exit 2; <verb> --help is its usage', async () => {
    const clean = join(ROOT, 'tests/fixtures/batches/clean.json');
    const out = join(tmp(), 'x');
    await expectRefusal(['convert', clean, '--out', '--json'], /^grpo-studio convert: --out needs a value$/);
    await expectRefusal(['doctor', clean, '--tokenizer', '--json'], /^grpo-studio doctor: --tokenizer needs a value$/);
    await expectRefusal(['nope'], /^grpo-studio: unknown verb "nope" \(have loss, .*--help for usage\)$/);
    await expectRefusal([], /^grpo-studio: no verb \(have /);
    const png = join(tmp(), 'image.json');
    writeFileSync(png, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00]));
    await expectRefusal(['doctor', png], /image\.json: /);
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    await main(['doctor', png]);
    expect(String(err.mock.calls[0][0])).toMatch(PRINTABLE);
    err.mockRestore();
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    expect(await main(['convert', '--help'])).toBe(0);
    expect(String(log.mock.calls[0][0])).toMatch(/^usage: grpo-studio convert IN\.\.\./);
    log.mockRestore();
    expect(await quiet(['convert', clean, '--out=' + out])).toBe(0); // a value given inline
  });

  it('14. --out - is standard output, as without --out (no file named "-")', async () => {
    const clean = join(ROOT, 'tests/fixtures/batches/clean.json');
    const cwd = tmp();
    const run = (args: string[]) => promisify(execFile)(process.execPath, [join(ROOT, 'bin/grpo-studio.mjs'), ...args], { cwd, maxBuffer: 1 << 26 });
    const plain = await run(['convert', clean]);
    const dash = await run(['convert', clean, '--out', '-']);
    expect(JSON.parse(dash.stdout).format).toBe('grpo-batch/v1');
    expect(dash.stdout).toBe(plain.stdout);
    expect((await run(['report', clean, '--out=-'])).stdout).toMatch(/^<!doctype html>/i);
    expect(existsSync(join(cwd, '-'))).toBe(false);
  });

  it('13. a result that cannot be written (a full disk) is one line on stderr and exit 2, not a stack trace or exit 0', async () => {
    const clean = join(ROOT, 'tests/fixtures/batches/clean.json');
    for (const verb of ['doctor', 'convert']) {
      const sh = `"${process.execPath}" bin/grpo-studio.mjs ${verb} "${clean}" > /dev/full; echo "exit $?"`;
      const { stdout, stderr } = await promisify(execFile)('/bin/sh', ['-c', sh], { cwd: ROOT });
      expect(stdout.trim(), verb).toBe('exit 2');
      // The verb's own notes on stderr (convert's summary) stay; the failure is the last line, with no stack trace.
      const lines = stderr.trimEnd().split('\n');
      expect(lines.at(-1), verb).toMatch(/^grpo-studio: cannot write the output: ENOSPC/);
      expect(lines.filter((l) => /^\s+at |Error:/.test(l)), verb).toEqual([]);
    }
  });
});
